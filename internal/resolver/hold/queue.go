package resolver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Errors a held request or connection can end with. HTTP answers each in
// holdUntilReady; TCP closes.
var (
	// ErrQueueFull means an ElastiService already holds its maximum number
	// of requests on this resolver; HTTP answers 503 with Retry-After.
	ErrQueueFull = errors.New("hold queue full")
	// ErrHoldTimeout means no endpoint became ready within the hold
	// timeout; HTTP answers 504.
	ErrHoldTimeout = errors.New("hold timeout passed before the target had a ready endpoint")
	// ErrStopping means the resolver's drain timeout passed while still
	// holding; HTTP answers 503.
	ErrStopping = errors.New("resolver is stopping")
	// ErrClientGone means the client left while held: it closed or reset
	// the connection, cancelled the stream, or (TCP) half-closed, which on
	// the wire looks the same as leaving. Nothing is forwarded and nobody
	// reads an answer.
	ErrClientGone = errors.New("client went away while held")
	// ErrReadAheadFull means the client sent more than the read-ahead
	// bound while held. Past the bound the resolver could no longer see the
	// client leave, so it does not hold the request on unwatched: HTTP
	// answers 503 with Retry-After, TCP closes.
	ErrReadAheadFull = errors.New("client sent more than the read-ahead bound while held")
)

// HoldQueue bounds the requests and connections held per ElastiService. Each
// ElastiService has its own bound, so a burst at one Service never takes
// slots from another. HoldQueue only counts, which keeps it cheap on the hot
// path; the event-driven wait is Resolver.hold, below.
type HoldQueue struct {
	mu   sync.Mutex
	held map[types.NamespacedName]int
	// total is what all ElastiServices hold; peak is its largest value
	// since it was last zero.
	total, peak int
	// drained, if set before the first Enter, is called (without the
	// lock) each time total falls back to zero, with the peak it had.
	drained func(peak int)
}

// NewHoldQueue returns an empty HoldQueue.
func NewHoldQueue() *HoldQueue {
	return &HoldQueue{held: map[types.NamespacedName]int{}}
}

// Enter takes a slot for key if fewer than limit are held. The returned leave
// gives it back; calling leave more than once is harmless, so a deferred call
// and an early one (client gone) can coexist.
func (q *HoldQueue) Enter(key types.NamespacedName, limit int) (leave func(), err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.held[key] >= limit {
		return nil, ErrQueueFull
	}
	q.held[key]++
	q.total++
	q.peak = max(q.peak, q.total)
	var once sync.Once
	return func() { once.Do(func() { q.leave(key) }) }, nil
}

func (q *HoldQueue) leave(key types.NamespacedName) {
	q.mu.Lock()
	if q.held[key] <= 1 {
		delete(q.held, key)
	} else {
		q.held[key]--
	}
	q.total--
	peak := q.peak
	if q.total > 0 {
		peak = 0
	} else {
		q.peak = 0
	}
	q.mu.Unlock()
	if peak > 0 && q.drained != nil {
		q.drained(peak)
	}
}

// Total returns how many slots all ElastiServices hold.
func (q *HoldQueue) Total() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.total
}

// Held returns how many slots key holds.
func (q *HoldQueue) Held(key types.NamespacedName) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.held[key]
}

// watchFunc starts watching a held client and returns a channel that
// delivers, at most once, why the hold must end early: ErrClientGone or
// ErrReadAheadFull. A nil channel means the caller's context alone tells
// that the client left.
type watchFunc func() <-chan error

// holdEnd is how a hold let a request or connection through.
type holdEnd struct {
	// deadline bounds the dial that follows.
	deadline time.Time
	// dest is t, or t pointed at its fallback Service.
	dest Target
	// coldStart says it waited for t to wake and goes to t: it lived a
	// cold start, which lasted waited (on the injected clock).
	coldStart bool
	waited    time.Duration
}

// hold returns once t has a ready endpoint, at once if it already has one;
// traffic let through at once is reported to the operator (traffic.go),
// without waiting for the report. Otherwise it takes a slot in t's hold
// queue, makes sure an activation is under way, starts watch (if not nil)
// and waits for endpoint events until the hold timeout, the caller's
// cancellation, what watch reports or the resolver's stop. A request that
// goes through at once is never watched, so the normal path streams as it
// did. The returned end says where the request goes and how long its dial
// may take; it is meaningful only without an error.
//
// With spec.proxy.fallback, end.dest is where the request goes: t itself, or t
// pointed at the fallback Service (fallback.go) once the hold has lasted
// fallback.after, or at once while the ElastiService is in fallback. The
// fallback is used only while it has a ready endpoint; until then the
// request stays held. The target wins whenever it has a ready endpoint.
func (r *Resolver) hold(ctx context.Context, t Target, watch watchFunc) (end holdEnd, err error) {
	// The work is split so that what stays on the stack while a request
	// waits is small: a parked request's goroutine (park.go) is the most
	// numerous thing the resolver has in a burst, and its stack is kept
	// at the size the deepest call ever needed.
	start := r.opts.Clock.Now()
	end, ok := r.passes(t)
	if ok {
		return end, nil
	}
	leave, err := r.enterHold(&t)
	if err != nil {
		return end, err
	}
	err = r.waitHold(ctx, &t, watch, &end)
	r.holdEnded(&t, start, &end, err)
	leave()
	return end, err
}

// enterHold takes a slot in t's hold queue, counts the request as held and
// makes sure an activation is under way; leave undoes the first two.
func (r *Resolver) enterHold(t *Target) (leave func(), err error) {
	limit := t.MaxHeld
	if limit <= 0 {
		limit = r.opts.MaxHeld
	}
	leaveQueue, err := r.holds.Enter(t.ElastiService, limit)
	if err != nil {
		r.metrics.reject(t.ElastiService, ReasonQueueFull)
		return nil, err
	}
	held := r.metrics.Held.WithLabelValues(t.ElastiService.Namespace, t.ElastiService.Name)
	held.Inc()
	r.waker.ensure(r.stopCtx, *t)
	return func() {
		held.Dec()
		leaveQueue()
	}, nil
}

// holdEnded records a hold that lasted since start, and marks end as a
// cold start when it goes to t.
func (r *Resolver) holdEnded(t *Target, start time.Time, end *holdEnd, err error) {
	d := r.opts.Clock.Since(start)
	r.metrics.HoldDuration.WithLabelValues(t.ElastiService.Namespace, t.ElastiService.Name).Observe(d.Seconds())
	if err == nil && end.dest.Service == t.Service {
		r.metrics.ColdStart.WithLabelValues(t.ElastiService.Namespace, t.ElastiService.Name).Observe(d.Seconds())
		end.coldStart, end.waited = true, d
	}
}

// waitHold is the hold's wait, in a queue slot (see hold); it sets
// end.dest when the request goes to the fallback.
func (r *Resolver) waitHold(ctx context.Context, t *Target, watch watchFunc, end *holdEnd) error {
	var watched <-chan error
	if watch != nil {
		watched = watch()
	}
	timer := r.opts.Clock.NewTimer(r.holdTimeout(*t))
	defer timer.Stop()
	// With a fallback, the hold also wakes when its deadline passes, when
	// the fallback's endpoints change and when the operator's word on the
	// ElastiService does.
	var afterC <-chan time.Time
	if t.Fallback != nil {
		after := r.opts.Clock.NewTimer(t.Fallback.After)
		defer after.Stop()
		afterC = after.C()
	}
	passed := false
	for {
		// Every channel is taken before the state it announces is read,
		// so that no event falls between the check and the wait.
		changed := r.endpoints.Changed(t.Service)
		var fallbackChanged, said <-chan struct{}
		if t.Fallback != nil {
			fallbackChanged = r.endpoints.Changed(t.Fallback.Service)
			_, said = r.ports.fallbackSaid(t.ElastiService)
		}
		if len(r.endpoints.Ready(t.Service, t.PortName)) > 0 {
			return nil
		}
		if (passed || r.inFallback(*t)) && r.holdToFallback(t, passed, end) {
			return nil
		}
		select {
		case <-changed:
		case <-fallbackChanged:
		case <-said:
		case <-afterC:
			passed, afterC = true, nil
		case <-timer.C():
			r.metrics.TimedOut.WithLabelValues(t.ElastiService.Namespace, t.ElastiService.Name).Inc()
			return ErrHoldTimeout
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrClientGone, context.Cause(ctx))
		case err := <-watched:
			if errors.Is(err, ErrReadAheadFull) {
				r.metrics.reject(t.ElastiService, ReasonReadAheadFull)
			}
			return err
		case <-r.stopCtx.Done():
			return ErrStopping
		}
	}
}

// holdToFallback points end at t's fallback Service, if that can take the
// request now: the ElastiService is in fallback, or the hold has passed
// fallback.after (passed).
func (r *Resolver) holdToFallback(t *Target, passed bool, end *holdEnd) bool {
	reason := FallbackActive
	if passed {
		reason = FallbackDeadline
	}
	dest, ok := r.toFallback(*t, reason)
	if !ok {
		return false
	}
	if passed {
		r.fallbacks.set(t.ElastiService, r.endpoints.ReadyEpoch(t.Service))
	}
	end.dest = dest
	return true
}

// passes lets a request through at once, reporting its traffic, when t has
// a ready endpoint or its fallback serves; the hold starts only when it
// does not. Either way end bounds the dial that follows by the hold timeout.
func (r *Resolver) passes(t Target) (end holdEnd, ok bool) {
	// The deadline only bounds network dials, which run on the wall clock.
	end = holdEnd{deadline: time.Now().Add(r.holdTimeout(t)), dest: t}
	if len(r.endpoints.Ready(t.Service, t.PortName)) > 0 {
		// The operator only hears of traffic through activation calls, and
		// a scale-down in its grace period must be called off by it.
		r.traffic.seen(r.stopCtx, t)
		return end, true
	}
	if r.inFallback(t) {
		if dest, ok := r.toFallback(t, FallbackActive); ok {
			// The wake must go on while the fallback serves: the report is
			// an activation call.
			r.traffic.seen(r.stopCtx, t)
			end.dest = dest
			return end, true
		}
	}
	return end, false
}

// holdTimeout is t's spec.proxy.holdTimeout, or the resolver's default.
func (r *Resolver) holdTimeout(t Target) time.Duration {
	if t.HoldTimeout > 0 {
		return t.HoldTimeout
	}
	return r.opts.HoldTimeout
}

// wakeNeeded is the waker's condition: requests are held and no endpoint of
// the Service is ready.
func (r *Resolver) wakeNeeded(t Target) bool {
	return r.holds.Held(t.ElastiService) > 0 && !r.endpoints.AnyReady(t.Service)
}
