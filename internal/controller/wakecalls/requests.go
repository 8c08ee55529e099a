package wakecalls

import (
	"context"
	"errors"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
)

// wakeCall is one pending wake of one ElastiService; every activation call
// that arrives while it is pending waits on the same call.
type wakeCall struct {
	done     chan struct{}
	replicas int32
	err      error
}

// Requests hands activation calls to the reconciler. A reconcile of the
// ElastiService performs the wake: the one perform starts at once for each
// new wake, beside the work queue, and the work queue's own, which the wake
// also enqueues. The reconciler keeps the two from running at once for one
// object (docs/architecture.md, "A wake on its own path").
type Requests struct {
	mu      sync.Mutex
	pending map[types.NamespacedName]*wakeCall
	events  chan event.GenericEvent
	perform func(types.NamespacedName)
}

// NewRequests returns an empty set of pending wakes. perform, if not nil,
// is started on a goroutine of its own for each wake that starts: it
// reconciles the ElastiService without waiting in the work queue.
func NewRequests(perform func(types.NamespacedName)) *Requests {
	return &Requests{pending: map[types.NamespacedName]*wakeCall{}, events: make(chan event.GenericEvent, 1024), perform: perform}
}

// Events carries one event per wake that starts, for the controller's watch
// (a source.Channel): the event enqueues the ElastiService's reconcile.
func (w *Requests) Events() <-chan event.GenericEvent { return w.events }

// request registers a wake (or joins the pending one) and enqueues the
// object. A wake that cannot be enqueued before ctx ends is forgotten, and
// the calls that joined it get the error: no reconcile is coming for it, so
// nothing else would answer them, and the next call starts afresh. Each
// call is counted as started or joined once it is registered.
func (w *Requests) request(ctx context.Context, key types.NamespacedName) (*wakeCall, error) {
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
	if w.perform != nil {
		go w.perform(key)
	}
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
func (w *Requests) abandon(key types.NamespacedName, call *wakeCall, err error) bool {
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

// Pending reports whether activation calls wait on a wake of key: the
// reconcile reads it as traffic a resolver saw.
func (w *Requests) Pending(key types.NamespacedName) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.pending[key]
	return ok
}

// Complete answers every caller waiting on key: with the replicas the
// target has, or with err when no wake is coming (the ElastiService is gone
// or stands down).
func (w *Requests) Complete(key types.NamespacedName, replicas int32, err error) {
	w.mu.Lock()
	call, ok := w.pending[key]
	delete(w.pending, key)
	w.mu.Unlock()
	if ok {
		call.replicas, call.err = replicas, err
		close(call.done)
	}
}

// ErrCannotWake answers activation calls for a target that cannot be read:
// waiting for it would only run into the wake timeout.
var ErrCannotWake = errors.New("the scale target cannot be woken")

// Outcome is what one reconcile did about a wake, as the calls waiting on it
// are answered.
type Outcome struct {
	// Woke: the reconcile woke the target, or found it up, to Replicas.
	Woke     bool
	Replicas int32
	// CannotWake: a wake was asked for and the target cannot be read;
	// TargetErr says why.
	CannotWake bool
	TargetErr  string
}

// Answer answers the activation calls waiting on this reconcile of es, and
// removes the wake-now annotation through w: left in place, it would read
// as a new wake request on every later reconcile and keep the target from
// sleeping. A reconcile that neither woke nor found the target unreadable
// leaves the calls waiting for the next one.
func (w *Requests) Answer(ctx context.Context, c client.Writer, es *elastiv1alpha1.ElastiService, out Outcome) error {
	key := client.ObjectKeyFromObject(es)
	switch {
	case out.Woke:
		w.Complete(key, out.Replicas, nil)
	case out.CannotWake:
		w.Complete(key, 0, fmt.Errorf("%w: %s", ErrCannotWake, out.TargetErr))
	}
	if _, ok := es.Annotations[contract.AnnotationWakeNow]; !ok {
		return nil
	}
	orig := es.DeepCopy()
	delete(es.Annotations, contract.AnnotationWakeNow)
	if err := c.Patch(ctx, es, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("remove annotation %s from ElastiService %s/%s: %w", contract.AnnotationWakeNow, es.Namespace, es.Name, err)
	}
	return nil
}
