package wakecalls

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// TestTimedOutWakeIsForgotten: a wake that could not be enqueued in time
// (the work queue's channel was full) is forgotten. The calls that joined it
// fail with it instead of waiting for a reconcile that is not coming, and the
// next call enqueues a wake of its own, which a reconcile then answers.
func TestTimedOutWakeIsForgotten(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "web"}
	w := &Requests{pending: map[types.NamespacedName]*wakeCall{}, events: make(chan event.GenericEvent, 1)}
	w.events <- event.GenericEvent{} // the channel is full
	waker := &Waker{Requests: w, Timeout: 200 * time.Millisecond}

	first := make(chan error, 1)
	go func() { _, err := waker.wakeAsLeader(context.Background(), key); first <- err }()
	// A call that joins the pending wake while it cannot be enqueued.
	for !w.Pending(key) {
		time.Sleep(time.Millisecond)
	}
	joined := make(chan error, 1)
	go func() {
		_, err := waker.wakeAsLeader(context.Background(), key)
		joined <- err
	}()
	if err := <-first; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("first call: %v, want a deadline error", err)
	}
	if err := <-joined; err == nil {
		t.Fatal("the joined call succeeded, yet no reconcile ran")
	}
	if w.Pending(key) {
		t.Fatal("the timed-out wake is still pending")
	}

	<-w.events // the queue drains
	next := make(chan error, 1)
	go func() {
		res, err := waker.wakeAsLeader(context.Background(), key)
		if err == nil && res.Replicas != 2 {
			err = errors.New("wrong replicas")
		}
		next <- err
	}()
	select {
	case <-w.events: // enqueued afresh; the reconcile answers
		w.Complete(key, 2, nil)
	case <-time.After(time.Second):
		t.Fatal("the next call joined the dead wake instead of enqueueing its own")
	}
	if err := <-next; err != nil {
		t.Fatalf("next call: %v", err)
	}
}
