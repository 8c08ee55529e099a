package hold

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/resolver/route"
)

// Activator asks the operator to wake an ElastiService's target.
type Activator interface {
	Activate(ctx context.Context, namespace, name string) (*contract.ActivationResponse, error)
}

// waker makes sure that, while an ElastiService has held requests and its
// target has no ready endpoint, exactly one loop per ElastiService calls the
// operator: at once on the first held request, again with exponential backoff
// after a failure, and again every refresh interval after a success in case
// the wake was lost (operator restart, leader change). Between calls the loop
// also wakes on every endpoint change of the Service, so it ends as soon as
// the target is ready: a later sleep then starts a fresh loop whose first call
// is immediate, instead of waiting out the refresh interval of this one.
type waker struct {
	activator Activator
	clock     clock.Clock
	log       logr.Logger
	rec       Recorder
	// needed reports whether the target still needs waking: requests are
	// held and no endpoint is ready. It is evaluated under mu.
	needed func(route.Target) bool
	// changed returns a channel closed at the next endpoint change of the
	// target's Service.
	changed func(route.Target) <-chan struct{}
	// readyEpoch counts the turns of the target's Service from no ready
	// endpoint to some (Endpoints.ReadyEpoch).
	readyEpoch func(route.Target) uint64

	callTimeout    time.Duration
	initialBackoff time.Duration
	maxBackoff     time.Duration
	refresh        time.Duration

	mu      sync.Mutex
	running map[types.NamespacedName]bool
}

// ensure starts the activation loop for t's ElastiService unless one runs.
// A held request calls it after it took its hold slot, so that a loop
// deciding to stop cannot miss it. A waking page (Hold.Wake) calls it
// without a slot: a loop it starts makes its first call at once (run), and
// a loop already running has called within the refresh interval; the
// page's next reload calls ensure again.
func (w *waker) ensure(ctx context.Context, t route.Target) {
	if w.activator == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running[t.ElastiService] {
		return
	}
	w.running[t.ElastiService] = true
	go w.run(ctx, t)
}

// stillNeeded decides under mu whether to go on; when not, it marks the loop
// stopped in the same critical section that ensure checks.
func (w *waker) stillNeeded(t route.Target) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.needed(t) {
		return true
	}
	delete(w.running, t.ElastiService)
	return false
}

func (w *waker) run(ctx context.Context, t route.Target) {
	log := w.log.WithValues("elastiservice", t.ElastiService.String())
	backoff := w.initialBackoff
	// The first call is made whatever stillNeeded says by now: the loop was
	// started for a request held while no endpoint was ready, and one that
	// already left the queue may still want the target, such as an upload
	// refused at once for passing the read-ahead bound, whose client
	// retries after Retry-After, or a browser shown the waking page, which
	// is never held at all.
	for first := true; first || w.stillNeeded(t); first = false {
		// Taken before the call, so that the target turning ready during
		// the call still ends this loop; otherwise a later sleep would find
		// it waiting out the refresh interval instead of calling at once.
		changed, epoch := w.changed(t), w.readyEpoch(t)
		callCtx, cancel := context.WithTimeout(ctx, w.callTimeout)
		resp, err := w.activator.Activate(callCtx, t.ElastiService.Namespace, t.ElastiService.Name)
		cancel()
		result := w.rec.Activation(t.ElastiService, err)
		var wait time.Duration
		if err == nil {
			replicas := int32(0)
			if resp != nil {
				replicas = resp.Replicas
			}
			log.V(1).Info("activation accepted", "replicas", replicas)
			wait, backoff = w.refresh, w.initialBackoff
		} else {
			log.Error(err, "activation failed", "result", result, "retryIn", backoff)
			wait, backoff = backoff, min(2*backoff, w.maxBackoff)
		}
		if !w.wait(ctx, t, wait, changed, epoch) {
			return
		}
	}
}

// wait sleeps until d has passed, and reports whether the loop goes on. It
// ends the loop early when an endpoint change (the first one on changed)
// shows the target no longer needs waking, or when ctx is done. It ends the
// wait early, for a call at once, when the target was ready at some moment
// since the last call (its ready epoch moved on) and needs waking again:
// that is a new sleep, whose first held request must not wait out this
// wake's refresh interval, even when this loop saw the ready endpoint only
// after it was gone again.
func (w *waker) wait(ctx context.Context, t route.Target, d time.Duration, changed <-chan struct{}, epoch uint64) bool {
	timer := w.clock.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case <-timer.C():
			return true
		case <-changed:
			changed = w.changed(t)
			if !w.stillNeeded(t) {
				return false
			}
			if w.readyEpoch(t) != epoch {
				return true
			}
		case <-ctx.Done():
			w.mu.Lock()
			delete(w.running, t.ElastiService)
			w.mu.Unlock()
			return false
		}
	}
}
