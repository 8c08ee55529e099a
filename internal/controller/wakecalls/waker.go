package wakecalls

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/activation"
	"elasti.dev/elasti/internal/contract"
)

// Waker turns authenticated activation calls into wakes. On the elected
// leader the call is handed to the reconciler, which acts at once; on any
// other replica it sets the wake-now annotation, which the leader's watch
// picks up at once.
type Waker struct {
	// Reader reads ElastiServices from the API server (not a cache, which
	// a non-leader may not have started).
	Reader client.Reader
	// Cache, if set, is read instead on the leader, whose cache runs: it
	// saves an API round trip per wake. A miss falls back to Reader, in
	// case the object is newer than the cache.
	Cache client.Reader
	// Writer patches the wake-now annotation.
	Writer client.Writer
	// Elected is closed once this replica leads.
	Elected <-chan struct{}
	// Timeout bounds how long a call waits for the leader's wake.
	Timeout time.Duration
	// Requests hands calls to the reconciler on the leader. Without it
	// every call is forwarded through the annotation, as on a follower.
	Requests *Requests

	// forwarding deduplicates annotation writes on a non-leader.
	mu         sync.Mutex
	forwarding map[types.NamespacedName]*wakeCall
}

var _ activation.Waker = (*Waker)(nil)

// Wake implements activation.Waker.
func (w *Waker) Wake(ctx context.Context, key types.NamespacedName) (activation.WakeResult, error) {
	es := &elastiv1alpha1.ElastiService{}
	if err := w.get(ctx, key, es); err != nil {
		if apierrors.IsNotFound(err) {
			activations.WithLabelValues(key.Namespace, key.Name, "not_found").Inc()
			return activation.WakeResult{}, nil
		}
		activations.WithLabelValues(key.Namespace, key.Name, "error").Inc()
		return activation.WakeResult{}, fmt.Errorf("get ElastiService %s: %w", key, err)
	}
	if es.DeletionTimestamp != nil {
		// Deleting restores the target anyway.
		return activation.WakeResult{Found: true, Replicas: es.Spec.MinTargetReplicas}, nil
	}
	if w.leading() && w.Requests != nil {
		return w.wakeAsLeader(ctx, key)
	}
	return w.forward(ctx, es)
}

func (w *Waker) get(ctx context.Context, key types.NamespacedName, es *elastiv1alpha1.ElastiService) error {
	if w.Cache != nil && w.leading() {
		err := w.Cache.Get(ctx, key, es)
		if !apierrors.IsNotFound(err) {
			return err
		}
	}
	return w.Reader.Get(ctx, key, es)
}

func (w *Waker) leading() bool {
	if w.Elected == nil {
		return true
	}
	select {
	case <-w.Elected:
		return true
	default:
		return false
	}
}

func (w *Waker) wakeAsLeader(ctx context.Context, key types.NamespacedName) (activation.WakeResult, error) {
	ctx, cancel := context.WithTimeout(ctx, w.timeout())
	defer cancel()
	call, err := w.Requests.request(ctx, key)
	if err != nil {
		activations.WithLabelValues(key.Namespace, key.Name, "error").Inc()
		return activation.WakeResult{}, err
	}
	select {
	case <-call.done:
		if call.err != nil {
			activations.WithLabelValues(key.Namespace, key.Name, "error").Inc()
			return activation.WakeResult{}, call.err
		}
		activations.WithLabelValues(key.Namespace, key.Name, "woken").Inc()
		return activation.WakeResult{Found: true, Replicas: call.replicas}, nil
	case <-ctx.Done():
		activations.WithLabelValues(key.Namespace, key.Name, "error").Inc()
		return activation.WakeResult{}, fmt.Errorf("wait for the wake of %s: %w", key, ctx.Err())
	}
}

// forward sets the wake-now annotation; concurrent calls for the same object
// share one write.
func (w *Waker) forward(ctx context.Context, es *elastiv1alpha1.ElastiService) (activation.WakeResult, error) {
	key := client.ObjectKeyFromObject(es)
	w.mu.Lock()
	if w.forwarding == nil {
		w.forwarding = map[types.NamespacedName]*wakeCall{}
	}
	call, joined := w.forwarding[key]
	if !joined {
		call = &wakeCall{done: make(chan struct{})}
		w.forwarding[key] = call
	}
	w.mu.Unlock()
	if !joined {
		call.err = annotateWakeNow(ctx, w.Writer, es, time.Now())
		call.replicas = es.Spec.MinTargetReplicas
		w.mu.Lock()
		delete(w.forwarding, key)
		w.mu.Unlock()
		close(call.done)
	}
	select {
	case <-call.done:
	case <-ctx.Done():
		return activation.WakeResult{}, ctx.Err()
	}
	if call.err != nil {
		activations.WithLabelValues(key.Namespace, key.Name, "error").Inc()
		return activation.WakeResult{}, call.err
	}
	activations.WithLabelValues(key.Namespace, key.Name, "forwarded").Inc()
	return activation.WakeResult{Found: true, Replicas: call.replicas}, nil
}

func (w *Waker) timeout() time.Duration {
	if w.Timeout <= 0 {
		return 10 * time.Second
	}
	return w.Timeout
}

// wakeNowByActivation starts the wake-now value a follower writes for an
// activation call, so that the leader tells a resolver's report of traffic
// from a wake someone asked for (`kubectl elasti wake` writes a bare
// timestamp): traffic that reaches a resolver during a scale-down's grace
// period cancels the sleep, and is recorded as such (observed.trafficSeen).
const wakeNowByActivation = "activation "

// Forwarded reports whether annotations carry an activation call that a
// follower handed to the leader: the leader reads it as traffic a resolver
// saw, where a wake-now set by hand is not.
func Forwarded(annotations map[string]string) bool {
	v, ok := annotations[contract.AnnotationWakeNow]
	return ok && strings.HasPrefix(v, wakeNowByActivation)
}

// annotateWakeNow asks the leader to wake an ElastiService for an
// activation call.
func annotateWakeNow(ctx context.Context, c client.Writer, es *elastiv1alpha1.ElastiService, now time.Time) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		contract.AnnotationWakeNow: wakeNowByActivation + now.UTC().Format(time.RFC3339Nano),
	}}})
	if err != nil {
		return fmt.Errorf("encode wake-now patch: %w", err)
	}
	target := &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{Namespace: es.Namespace, Name: es.Name}}
	if err := c.Patch(ctx, target, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("set %s on ElastiService %s/%s: %w", contract.AnnotationWakeNow, es.Namespace, es.Name, err)
	}
	return nil
}
