package ports

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// QuarantineRecordName is the ConfigMap, in the operator's namespace, that
// keeps the freed ports and when each was freed.
const QuarantineRecordName = "elasti-port-quarantine"

// QuarantineRecord keeps the quarantine where a new operator finds it: the
// ports freed lately, and when, in a ConfigMap of the operator's namespace
// (tenants have no rights there). A port is written to it before the
// status that held it lets go of it (Allocator.Allocate, Allocator.Retire),
// so that no restart, however sudden, forgets a port that a lagging data
// plane may still route to; see docs/architecture.md, "Port-mapped
// identity".
type QuarantineRecord struct {
	// Reader reads the ConfigMap live: the operator caches no ConfigMaps.
	Reader client.Reader
	Writer client.Writer
	Key    types.NamespacedName
}

// load returns when each recorded port was freed.
func (r QuarantineRecord) load(ctx context.Context) (map[int32]time.Time, error) {
	cm := &corev1.ConfigMap{}
	if err := r.Reader.Get(ctx, r.Key, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read the port quarantine %s: %w", r.Key, err)
	}
	out := map[int32]time.Time{}
	for k, v := range cm.Data {
		p, err := strconv.ParseInt(k, 10, 32)
		if err != nil {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			continue
		}
		out[int32(p)] = t
	}
	return out, nil
}

// add records ports as freed at now, and drops the entries whose
// quarantine (keep) is over.
func (r QuarantineRecord) add(ctx context.Context, ports []int32, now time.Time, keep time.Duration) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm := &corev1.ConfigMap{}
		err := r.Reader.Get(ctx, r.Key, cm)
		create := apierrors.IsNotFound(err)
		switch {
		case create:
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.Key.Namespace, Name: r.Key.Name, Labels: map[string]string{
				"app.kubernetes.io/name": "elasti", "app.kubernetes.io/component": "operator",
			}}}
		case err != nil:
			return fmt.Errorf("read the port quarantine %s: %w", r.Key, err)
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		for k, v := range cm.Data {
			if t, err := time.Parse(time.RFC3339Nano, v); err != nil || now.Sub(t) >= keep {
				delete(cm.Data, k)
			}
		}
		for _, p := range ports {
			cm.Data[strconv.Itoa(int(p))] = now.UTC().Format(time.RFC3339Nano)
		}
		if create {
			err = r.Writer.Create(ctx, cm)
			if apierrors.IsAlreadyExists(err) {
				// Another replica created it first: read it and merge.
				return apierrors.NewConflict(corev1.Resource("configmaps"), r.Key.Name, err)
			}
		} else {
			err = r.Writer.Update(ctx, cm)
		}
		if err != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("write the port quarantine %s: %w", r.Key, err)
		}
		return err
	})
}
