package admission

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// The keys of the serving pair in the certificate Secret, and the file names
// the webhook server reads: cert-controller's and controller-runtime's
// defaults, which agree.
const (
	certKey = corev1.TLSCertKey
	keyKey  = corev1.TLSPrivateKeyKey
)

// certFiles copies the serving certificate and key from the Secret the
// rotator keeps into the directory the webhook server reads, and again
// whenever the rotator renews them. It does the kubelet's job for a
// mounted Secret, but within seconds rather than at the kubelet's next sync
// (up to a minute or more), so a new operator pod is ready sooner.
type certFiles struct {
	reader client.Reader
	secret types.NamespacedName
	dir    string
	clock  clock.Clock
	// fast is the poll interval until the pair has first been written,
	// slow the one after, when only a renewal can change it.
	fast, slow time.Duration
}

var (
	_ manager.Runnable               = (*certFiles)(nil)
	_ manager.LeaderElectionRunnable = (*certFiles)(nil)
)

// NeedLeaderElection is false: every replica serves the webhook.
func (*certFiles) NeedLeaderElection() bool { return false }

// Start polls the Secret until ctx ends. Errors are logged and retried: a
// replica without its files stays unready, which is what the operator's
// readiness reports.
func (c *certFiles) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("webhook-cert-files")
	poll(ctx, c.clock, c.fast, c.slow, c.sync, func(err error) {
		logger.Error(err, "copy the webhook serving certificate", "secret", c.secret.String())
	})
	return nil
}

// poll calls sync every fast until it first reports done, then every slow,
// until ctx ends. Errors go to onErr and are retried at the same pace.
func poll(ctx context.Context, clk clock.Clock, fast, slow time.Duration, sync func(context.Context) (bool, error), onErr func(error)) {
	interval := fast
	for {
		done, err := sync(ctx)
		if err != nil {
			onErr(err)
		}
		if done {
			interval = slow
		}
		t := clk.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// sync writes the Secret's pair into dir when it differs from the files
// there. It reports whether the files hold a pair, new or not.
func (c *certFiles) sync(ctx context.Context) (bool, error) {
	var s corev1.Secret
	if err := c.reader.Get(ctx, c.secret, &s); err != nil {
		return false, fmt.Errorf("get Secret %s: %w", c.secret, err)
	}
	crt, key := s.Data[certKey], s.Data[keyKey]
	if len(crt) == 0 || len(key) == 0 {
		return false, nil // the rotator has not filled it yet
	}
	// The key first: the server's certificate watcher reloads on a change
	// of either file and keeps the old pair while the two do not match.
	for _, f := range []struct {
		name string
		data []byte
	}{{keyKey, key}, {certKey, crt}} {
		if err := writeIfChanged(filepath.Join(c.dir, f.name), f.data); err != nil {
			return false, err
		}
	}
	return true, nil
}

// writeIfChanged replaces path with data, atomically, unless it already
// holds it.
func writeIfChanged(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
