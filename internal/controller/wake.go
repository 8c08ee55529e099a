package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/activation"
	"elasti.dev/elasti/internal/contract"
)

// wakeCall is one pending wake of one ElastiService; every activation call
// that arrives while it is pending waits on the same call.
type wakeCall struct {
	done     chan struct{}
	replicas int32
	err      error
}

// wakeRequests hands activation calls to the reconciler. The reconcile of
// the ElastiService performs the wake, so activation and reconcile never race:
// the work queue runs one reconcile per object at a time.
type wakeRequests struct {
	mu      sync.Mutex
	pending map[types.NamespacedName]*wakeCall
	events  chan event.GenericEvent
}

func newWakeRequests() *wakeRequests {
	return &wakeRequests{pending: map[types.NamespacedName]*wakeCall{}, events: make(chan event.GenericEvent, 1024)}
}

// request registers a wake (or joins the pending one) and enqueues the
// object. A wake that cannot be enqueued before ctx ends is forgotten, and
// the calls that joined it get the error: no reconcile is coming for it, so
// nothing else would answer them, and the next call starts afresh. Each
// call is counted as started or joined once it is registered.
func (w *wakeRequests) request(ctx context.Context, key types.NamespacedName) (*wakeCall, error) {
	w.mu.Lock()
	call, ok := w.pending[key]
	if !ok {
		call = &wakeCall{done: make(chan struct{})}
		w.pending[key] = call
	}
	w.mu.Unlock()
	if ok {
		wakeRequestCount.WithLabelValues(key.Namespace, key.Name, wakeJoined).Inc()
		return call, nil
	}
	wakeRequestCount.WithLabelValues(key.Namespace, key.Name, wakeStarted).Inc()
	es := &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	select {
	case w.events <- event.GenericEvent{Object: es}:
		return call, nil
	case <-ctx.Done():
		err := fmt.Errorf("enqueue wake of %s: %w", key, ctx.Err())
		if !w.abandon(key, call, err) {
			// A reconcile saw the wake pending and completed it.
			return call, nil
		}
		return nil, err
	}
}

// abandon forgets call, if it is still key's pending wake, and answers its
// callers with err. It reports false when call was completed already.
func (w *wakeRequests) abandon(key types.NamespacedName, call *wakeCall, err error) bool {
	w.mu.Lock()
	if w.pending[key] != call {
		w.mu.Unlock()
		return false
	}
	delete(w.pending, key)
	w.mu.Unlock()
	call.err = err
	close(call.done)
	return true
}

func (w *wakeRequests) isPending(key types.NamespacedName) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.pending[key]
	return ok
}

// complete answers every caller waiting on key.
func (w *wakeRequests) complete(key types.NamespacedName, replicas int32, err error) {
	w.mu.Lock()
	call, ok := w.pending[key]
	delete(w.pending, key)
	w.mu.Unlock()
	if ok {
		call.replicas, call.err = replicas, err
		close(call.done)
	}
}

// errCannotWake answers activation calls for a target that cannot be read:
// waiting for it would only run into the wake timeout.
var errCannotWake = errors.New("the scale target cannot be woken")

// answerWake answers the activation calls waiting on this reconcile, and
// removes the wake-now annotation: left in place, it would read as a new
// wake request on every later reconcile and keep the target from sleeping.
func (r *Reconciler) answerWake(ctx context.Context, es *elastiv1alpha1.ElastiService, o observed, fx effects) error {
	key := client.ObjectKeyFromObject(es)
	switch {
	case fx.woke:
		r.wakes.complete(key, fx.replicas, nil)
	case o.wakeRequested && !o.targetFound:
		r.wakes.complete(key, 0, fmt.Errorf("%w: %s", errCannotWake, o.targetErr))
	}
	if _, ok := es.Annotations[contract.AnnotationWakeNow]; !ok {
		return nil
	}
	orig := es.DeepCopy()
	delete(es.Annotations, contract.AnnotationWakeNow)
	if err := r.client.Patch(ctx, es, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("remove annotation %s from ElastiService %s/%s: %w", contract.AnnotationWakeNow, es.Namespace, es.Name, err)
	}
	return nil
}

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

	wakes *wakeRequests
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
	if w.leading() && w.wakes != nil {
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
	call, err := w.wakes.request(ctx, key)
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

// forwardedActivation reports whether annotations carry an activation call
// that a follower handed to the leader.
func forwardedActivation(annotations map[string]string) bool {
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
