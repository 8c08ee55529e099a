package hold

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"elasti.dev/elasti/internal/resolver/route"
)

// Errors a held request or connection can end with. HTTP answers each in
// the handler package's hold; TCP closes.
var (
	// ErrQueueFull means an ElastiService already holds its maximum number
	// of requests on this resolver; HTTP answers 503 with Retry-After.
	ErrQueueFull = errors.New("hold queue full")
	// ErrResolverFull means this resolver holds its maximum number of
	// requests and connections for all ElastiServices together; HTTP
	// answers 503 with Retry-After, TCP closes.
	ErrResolverFull = errors.New("resolver holds its maximum")
	// ErrHoldTimeout means no endpoint became ready within the hold
	// timeout; HTTP answers 504.
	ErrHoldTimeout = errors.New("hold timeout passed before the target had a ready endpoint")
	// ErrStopping means the resolver's drain timeout passed while still
	// holding; HTTP answers 503.
	ErrStopping = errors.New("resolver is stopping")
	// ErrClientGone means the client left while held: it closed or reset
	// the connection, cancelled the stream, or half-closed, which on the
	// wire looks the same as leaving. Nothing is forwarded and nobody reads
	// an answer.
	ErrClientGone = errors.New("client went away while held")
)

// Endpoints is the endpoint source the hold waits on: the ready endpoints
// of each Service and an event at each change (endpoints.Endpoints).
type Endpoints interface {
	Ready(svc types.NamespacedName, portName string) []string
	AnyReady(svc types.NamespacedName) bool
	Changed(svc types.NamespacedName) <-chan struct{}
	// ReadyEpoch counts svc's turns from no ready endpoint to some.
	ReadyEpoch(svc types.NamespacedName) uint64
}

// Operator is what the hold reads of the operator's word on an
// ElastiService: whether its FallbackActive condition is True, and the
// channel closed at the next change (ports.PortMap).
type Operator interface {
	FallbackSaid(es types.NamespacedName) (bool, <-chan struct{})
}

// Recorder takes what the hold counts (the resolver's metrics).
type Recorder interface {
	// Held counts a request as held until the returned function is called.
	Held(es types.NamespacedName) (done func())
	// HoldEnded records a hold that lasted d; coldStart says it then went
	// to its woken target.
	HoldEnded(es types.NamespacedName, d time.Duration, coldStart bool)
	TimedOut(es types.NamespacedName)
	// Refused counts a request the hold refused with err (ErrQueueFull,
	// ErrResolverFull).
	Refused(es types.NamespacedName, err error)
	// Fallback counts a request sent to the fallback Service, because its
	// own hold passed fallback.after (deadline) or the ElastiService was
	// in fallback already.
	Fallback(es types.NamespacedName, deadline bool)
	// Activation counts an activation call that ended with err, and
	// returns the result it was counted as, for the logs.
	Activation(es types.NamespacedName, err error) (result string)
}

// Config are what a Hold is built from.
type Config struct {
	Endpoints Endpoints
	Operator  Operator
	Recorder  Recorder
	Clock     clock.Clock
	Log       logr.Logger
	// Timeout and MaxHeld apply where the ElastiService's spec.proxy does
	// not set them.
	Timeout time.Duration
	MaxHeld int
	// MaxHeldTotal bounds what all ElastiServices hold together; 0 is no
	// bound.
	MaxHeldTotal int
	// Activator wakes targets (nil: no activation calls). CallTimeout
	// bounds one call; failed calls are retried from Backoff doubling to
	// MaxBackoff; a successful call is repeated every Refresh while
	// requests are still held. ReportInterval throttles the calls that
	// report traffic forwarded at once (trafficReporter).
	Activator      Activator
	CallTimeout    time.Duration
	Backoff        time.Duration
	MaxBackoff     time.Duration
	Refresh        time.Duration
	ReportInterval time.Duration
	// Drained, if not nil, is called each time nothing is held any more,
	// with the peak held since the last time (Queue).
	Drained func(peak int)
}

// Hold decides whether a request or connection goes through now, and
// otherwise holds it, event-driven, until its target (or fallback) can take
// it: the queue bound, the activation under way, the fallback, and what a
// release carries on to the dial. It knows nothing of HTTP or TCP: each
// layer hands it a watch of its own client.
type Hold struct {
	endpoints Endpoints
	queue     *Queue
	waker     *waker
	traffic   *trafficReporter
	fallback  *fallback
	rec       Recorder
	clock     clock.Clock
	timeout   time.Duration
	maxHeld   int
	// stop ends every hold and activation (the resolver's drain timeout).
	stop context.Context
}

// New builds a Hold; stop ends every hold (ErrStopping) and activation.
func New(stop context.Context, c Config) *Hold {
	h := &Hold{
		endpoints: c.Endpoints,
		queue:     NewQueue(c.MaxHeldTotal, c.Drained),
		rec:       c.Recorder,
		clock:     c.Clock,
		timeout:   c.Timeout,
		maxHeld:   c.MaxHeld,
		stop:      stop,
		fallback:  &fallback{endpoints: c.Endpoints, operator: c.Operator, rec: c.Recorder},
	}
	eps := c.Endpoints
	h.waker = &waker{
		activator:      c.Activator,
		clock:          c.Clock,
		log:            c.Log.WithName("activation"),
		rec:            c.Recorder,
		needed:         h.wakeNeeded,
		changed:        func(t route.Target) <-chan struct{} { return eps.Changed(t.Service) },
		readyEpoch:     func(t route.Target) uint64 { return eps.ReadyEpoch(t.Service) },
		callTimeout:    c.CallTimeout,
		initialBackoff: c.Backoff,
		maxBackoff:     c.MaxBackoff,
		refresh:        c.Refresh,
		running:        map[types.NamespacedName]bool{},
	}
	h.traffic = &trafficReporter{
		activator:   c.Activator,
		clock:       c.Clock,
		log:         c.Log.WithName("activation"),
		rec:         c.Recorder,
		interval:    c.ReportInterval,
		callTimeout: c.CallTimeout,
	}
	return h
}

// Queue is the hold's queue: what is held, per ElastiService.
func (h *Hold) Queue() *Queue { return h.queue }

// Watch starts watching a held client and returns a channel that
// delivers, at most once, why the hold must end early: ErrClientGone. A
// nil channel means the caller's context alone tells that the client left.
type Watch func() <-chan error

// Hold returns once t has a ready endpoint, at once if it already has one;
// traffic let through at once is reported to the operator (traffic.go),
// without waiting for the report. Otherwise it takes a slot in t's hold
// queue, makes sure an activation is under way, starts watch (if not nil)
// and waits for endpoint events until the hold timeout, the caller's
// cancellation, what watch reports or the resolver's stop. A request that
// goes through at once is never watched, so the normal path streams as it
// did. The returned release says where the request goes and how long its
// dial may take; it is meaningful only without an error.
//
// With spec.proxy.fallback, rel.Dest is where the request goes: t itself,
// or t pointed at the fallback Service (fallback.go) once the hold has
// lasted fallback.after, or at once while the ElastiService is in fallback.
// The fallback is used only while it has a ready endpoint; until then the
// request stays held. The target wins whenever it has a ready endpoint.
func (h *Hold) Hold(ctx context.Context, t route.Target, watch Watch) (rel route.Release, err error) {
	// The work is split so that what stays on the stack while a request
	// waits is small: a parked request's goroutine (the park package) is
	// the most numerous thing the resolver has in a burst, and its stack
	// is kept at the size the deepest call ever needed.
	start := h.clock.Now()
	rel, ok := h.Passes(t)
	if ok {
		return rel, nil
	}
	leave, err := h.enter(&t)
	if err != nil {
		return rel, err
	}
	err = h.wait(ctx, &t, watch, &rel)
	h.ended(&t, start, &rel, err)
	leave()
	return rel, err
}

// enter takes a slot in t's hold queue, counts the request as held and
// makes sure an activation is under way; leave undoes the first two.
func (h *Hold) enter(t *route.Target) (leave func(), err error) {
	limit := t.MaxHeld
	if limit <= 0 {
		limit = h.maxHeld
	}
	leaveQueue, err := h.queue.Enter(t.ElastiService, limit)
	if err != nil {
		h.rec.Refused(t.ElastiService, err)
		return nil, err
	}
	held := h.rec.Held(t.ElastiService)
	h.waker.ensure(h.stop, *t)
	return func() {
		held()
		leaveQueue()
	}, nil
}

// ended records a hold that lasted since start, and marks rel as a cold
// start when it goes to t.
func (h *Hold) ended(t *route.Target, start time.Time, rel *route.Release, err error) {
	d := h.clock.Since(start)
	coldStart := err == nil && rel.Dest.Service == t.Service
	h.rec.HoldEnded(t.ElastiService, d, coldStart)
	if coldStart {
		rel.ColdStart, rel.Waited = true, d
	}
}

// wait is the hold's wait, in a queue slot (see Hold); it sets rel.Dest
// when the request goes to the fallback.
func (h *Hold) wait(ctx context.Context, t *route.Target, watch Watch, rel *route.Release) error {
	var watched <-chan error
	if watch != nil {
		watched = watch()
	}
	timer := h.clock.NewTimer(h.holdTimeout(*t))
	defer timer.Stop()
	// With a fallback, the hold also wakes when its deadline passes, when
	// the fallback's endpoints change and when the operator's word on the
	// ElastiService does.
	var afterC <-chan time.Time
	if t.Fallback != nil {
		after := h.clock.NewTimer(t.Fallback.After)
		defer after.Stop()
		afterC = after.C()
	}
	passed := false
	for {
		// Every channel is taken before the state it announces is read,
		// so that no event falls between the check and the wait.
		changed := h.endpoints.Changed(t.Service)
		var fallbackChanged, said <-chan struct{}
		if t.Fallback != nil {
			fallbackChanged = h.endpoints.Changed(t.Fallback.Service)
			_, said = h.fallback.operator.FallbackSaid(t.ElastiService)
		}
		if len(h.endpoints.Ready(t.Service, t.PortName)) > 0 {
			return nil
		}
		if (passed || h.fallback.active(*t)) && h.toFallback(t, passed, rel) {
			return nil
		}
		select {
		case <-changed:
		case <-fallbackChanged:
		case <-said:
		case <-afterC:
			passed, afterC = true, nil
		case <-timer.C():
			h.rec.TimedOut(t.ElastiService)
			return ErrHoldTimeout
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrClientGone, context.Cause(ctx))
		case err := <-watched:
			return err
		case <-h.stop.Done():
			return ErrStopping
		}
	}
}

// toFallback points rel at t's fallback Service, if that can take the
// request now: the ElastiService is in fallback, or the hold has passed
// fallback.after (passed).
func (h *Hold) toFallback(t *route.Target, passed bool, rel *route.Release) bool {
	dest, ok := h.fallback.to(*t, passed)
	if !ok {
		return false
	}
	if passed {
		h.fallback.epochs.Set(t.ElastiService, h.endpoints.ReadyEpoch(t.Service))
	}
	rel.Dest = dest
	return true
}

// Passes lets a request through at once, reporting its traffic, when t has
// a ready endpoint or its fallback serves; the hold starts only when it
// does not. Either way rel bounds the dial that follows by the hold timeout.
func (h *Hold) Passes(t route.Target) (rel route.Release, ok bool) {
	// The deadline only bounds network dials, which run on the wall clock.
	rel = route.Release{Deadline: time.Now().Add(h.holdTimeout(t)), Dest: t}
	if len(h.endpoints.Ready(t.Service, t.PortName)) > 0 {
		// The operator only hears of traffic through activation calls, and
		// a scale-down in its grace period must be called off by it.
		h.traffic.seen(h.stop, t)
		return rel, true
	}
	if h.fallback.active(t) {
		if dest, ok := h.fallback.to(t, false); ok {
			// The wake must go on while the fallback serves: the report is
			// an activation call.
			h.traffic.seen(h.stop, t)
			rel.Dest = dest
			return rel, true
		}
	}
	return rel, false
}

// ServableNow says whether the hold would let t's request through at once:
// the Service port has a ready endpoint, or the ElastiService is in
// fallback and its fallback can take it.
func (h *Hold) ServableNow(t route.Target) bool {
	if len(h.endpoints.Ready(t.Service, t.PortName)) > 0 {
		return true
	}
	return h.fallback.active(t) && h.fallback.ready(t)
}

// Wake makes sure an activation of t's ElastiService is under way, for a
// request that wakes the target without being held (the waking page).
func (h *Hold) Wake(t route.Target) { h.waker.ensure(h.stop, t) }

// holdTimeout is t's spec.proxy.holdTimeout, or the resolver's default.
func (h *Hold) holdTimeout(t route.Target) time.Duration {
	if t.HoldTimeout > 0 {
		return t.HoldTimeout
	}
	return h.timeout
}

// wakeNeeded is the waker's condition: requests are held and no endpoint of
// the Service is ready.
func (h *Hold) wakeNeeded(t route.Target) bool {
	return h.queue.Held(t.ElastiService) > 0 && !h.endpoints.AnyReady(t.Service)
}

// Waking reports whether an activation loop runs for es; for tests.
func (h *Hold) Waking(es types.NamespacedName) bool {
	h.waker.mu.Lock()
	defer h.waker.mu.Unlock()
	return h.waker.running[es]
}

// Reported reports whether a traffic report for es is in flight or within
// its interval; for tests.
func (h *Hold) Reported(es types.NamespacedName) bool {
	_, recent := h.traffic.recent.Load(es)
	return recent
}
