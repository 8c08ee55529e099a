package admission

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// errNoCertificate is the handshake error of a servingCert whose files are
// not in place yet.
var errNoCertificate = errors.New("the serving certificate is not in place yet")

// servingCert lends the webhook's serving pair in the certificate directory
// to the operator's other TLS server, the activation server. Once ready is
// closed (the rotator found the files), it watches them with
// controller-runtime's certwatcher, so a renewal is picked up as the
// webhook server picks it up. Until then every handshake fails.
type servingCert struct {
	ready   <-chan struct{}
	dir     string
	watcher atomic.Pointer[certwatcher.CertWatcher]
}

var (
	_ manager.Runnable               = (*servingCert)(nil)
	_ manager.LeaderElectionRunnable = (*servingCert)(nil)
)

// NeedLeaderElection is false: every replica serves activation calls.
func (*servingCert) NeedLeaderElection() bool { return false }

// Start waits for ready, then watches the pair until ctx ends.
func (s *servingCert) Start(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-s.ready:
	}
	w, err := certwatcher.New(filepath.Join(s.dir, certKey), filepath.Join(s.dir, keyKey))
	if err != nil {
		return fmt.Errorf("load the serving certificate for the activation server: %w", err)
	}
	s.watcher.Store(w)
	return w.Start(ctx)
}

// GetCertificate is a tls.Config GetCertificate: the current pair, or
// errNoCertificate before there is one.
func (s *servingCert) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	w := s.watcher.Load()
	if w == nil {
		return nil, errNoCertificate
	}
	return w.GetCertificate(hello)
}
