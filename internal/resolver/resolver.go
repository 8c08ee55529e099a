package resolver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Resolver is one resolver replica's data plane: the pre-opened ports, the
// L7 server and L4 splicer behind them, and the hold, activation and
// forwarding logic they share.
type Resolver struct {
	opts      Options
	ports     *PortMap
	endpoints *Endpoints
	holds     *HoldQueue
	memory    *memoryReturner
	waker     *waker
	traffic   *trafficReporter
	fallbacks fallbackEpochs
	// pageStarts times the waking pages of a wake the operator has not
	// reported a start time for (wakingpage.go).
	pageStarts pageStarts
	dialer     *dialer
	metrics    *Metrics

	listeners *listenerSet
	httpConns *connListener
	server    *http.Server
	upstreams upstreams
	pacer     *releasePacer
	// errorLog takes net/http's own error logs, for the server and proxy.
	errorLog *log.Logger

	// parked counts the requests held without their handler until the
	// server has them back (park.go); conns counts accepted connections
	// still being dispatched or spliced. The drain waits for both.
	parked inFlight
	conns  inFlight
	// parkedOnArrival counts the requests parked before the server read
	// them (parkOnArrival); for tests.
	parkedOnArrival atomic.Int64

	started  atomic.Bool
	draining atomic.Bool
	// stopCtx ends held work when the drain timeout passes.
	stopCtx context.Context
	stop    context.CancelFunc
	// portsClosed ends the reading of request heads (parkOnArrival) once
	// the ports are closed: what is left goes to the server, whose
	// Shutdown knows what to do with a connection that sent nothing yet.
	portsClosed   context.Context
	closeArrivals context.CancelFunc
}

// New builds a Resolver that maps ports through ports and forwards to
// endpoints. Nothing listens until Start.
func New(ports *PortMap, endpoints *Endpoints, opts Options) (*Resolver, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("resolver options: %w", err)
	}
	ports.SetLinger(opts.ReleasedPortLinger, opts.Clock)
	r := &Resolver{
		opts:      opts,
		ports:     ports,
		endpoints: endpoints,
		holds:     NewHoldQueue(),
		metrics:   opts.Metrics,
		httpConns: newConnListener(),
	}
	ports.setForget(func(es types.NamespacedName) {
		opts.Metrics.forget(es)
		r.pageStarts.forget(es)
	})
	r.stopCtx, r.stop = context.WithCancel(context.Background())
	r.portsClosed, r.closeArrivals = context.WithCancel(context.Background())
	free := func() {
		// The pod connections a burst's release opened are idle by now,
		// and would keep their buffers and goroutines for the Transport's
		// IdleConnTimeout: the woken target's clients reach it directly.
		r.upstreams.closeIdle()
		returnFreeMemory()
	}
	r.memory = newMemoryReturner(opts.Clock, opts.ReturnMemoryAfter, opts.ReturnMemoryAtPeak,
		func() bool { return r.holds.Total() == 0 }, free, opts.Metrics.MemoryReturns.Inc)
	r.holds.drained = r.memory.drained
	r.dialer = &dialer{
		endpoints:      endpoints,
		clock:          opts.Clock,
		dialFunc:       opts.DialContext,
		attemptTimeout: opts.DialTimeout,
		retryMin:       25 * time.Millisecond,
		retryMax:       time.Second,
	}
	r.waker = &waker{
		activator:      opts.Activator,
		clock:          opts.Clock,
		log:            opts.Log.WithName("activation"),
		metrics:        opts.Metrics,
		needed:         r.wakeNeeded,
		changed:        func(t Target) <-chan struct{} { return endpoints.Changed(t.Service) },
		readyEpoch:     func(t Target) uint64 { return endpoints.ReadyEpoch(t.Service) },
		callTimeout:    opts.ActivationTimeout,
		initialBackoff: opts.ActivationBackoff,
		maxBackoff:     opts.ActivationMaxBackoff,
		refresh:        opts.ActivationRefresh,
		running:        map[types.NamespacedName]bool{},
	}
	r.traffic = &trafficReporter{
		activator:   opts.Activator,
		clock:       opts.Clock,
		log:         opts.Log.WithName("activation"),
		metrics:     opts.Metrics,
		interval:    opts.TrafficReportInterval,
		callTimeout: opts.ActivationTimeout,
	}
	r.upstreams = newUpstreams(r.dialer.dialContext)
	r.pacer = newReleasePacer(opts.ReleaseConcurrency, opts.ReleaseTurn)
	r.errorLog = log.New(logWriter{opts.Log}, "", 0)
	r.server = r.newServer()
	return r, nil
}

// Start opens every port of the range and starts serving. It fails if any
// port cannot be opened.
func (r *Resolver) Start() error {
	ls, err := openListeners(r.opts.ListenAddress, r.opts.PortRangeStart, r.opts.PortRangeEnd, r.opts.ClientKeepAlive)
	if err != nil {
		return err
	}
	r.listeners = ls
	r.metrics.Listeners.Set(float64(len(ls.listeners)))
	go func() {
		if err := r.server.Serve(r.httpConns); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.opts.Log.Error(err, "L7 server stopped")
		}
	}()
	ls.serve(r.opts.Log, r.conns.add, r.handleConn)
	r.started.Store(true)
	r.opts.Log.Info("resolver ports open", "address", r.opts.ListenAddress, "from", r.opts.PortRangeStart, "to", r.opts.PortRangeEnd)
	return nil
}

// Ready says why the resolver must not get traffic yet, or nil: every port
// is open, the ElastiService cache has synced, and it is not draining. The
// EndpointSlices of each Service are waited for by that Service's requests
// alone (Endpoints), so one slow watch never makes the whole replica unready.
func (r *Resolver) Ready() error {
	switch {
	case !r.started.Load():
		return errors.New("ports not open yet")
	case r.draining.Load():
		return errors.New("draining")
	case r.listeners.openCount() != len(r.listeners.listeners):
		return fmt.Errorf("%d of %d ports listening", r.listeners.openCount(), len(r.listeners.listeners))
	case !r.opts.Synced():
		return errors.New("ElastiService cache not synced")
	}
	return nil
}

// Drain stops the resolver gracefully. Readiness turns false at once, so the
// operator drops this replica from proxy slices; new connections are still
// accepted for period while that propagates. Then the ports close and held
// and in-flight work gets until ctx ends to finish, after which what is left
// is cut.
func (r *Resolver) Drain(ctx context.Context, period time.Duration) {
	r.opts.Log.Info("draining: readiness is false, still accepting", "period", period)
	r.drain(ctx, r.opts.Clock.After(period))
}

func (r *Resolver) drain(ctx context.Context, periodOver <-chan time.Time) {
	r.draining.Store(true)
	select {
	case <-periodOver:
	case <-ctx.Done():
	}
	r.opts.Log.Info("draining: ports closed, waiting for in-flight work")
	if r.listeners != nil {
		r.listeners.close()
	}
	r.closeArrivals()
	// Parked requests come back through the server when their hold ends,
	// so it must still serve until they have.
	select {
	case <-r.parked.none():
	case <-ctx.Done():
	}
	if err := r.server.Shutdown(ctx); err != nil {
		r.opts.Log.Info("drain timeout passed with requests in flight; cutting them", "err", err.Error())
	}
	r.stop()
	r.memory.stop()
	select {
	case <-r.conns.none():
	case <-ctx.Done():
	}
	_ = r.server.Close()
	r.opts.Log.Info("drained")
}

// Close stops everything at once; for tests.
func (r *Resolver) Close() {
	r.draining.Store(true)
	if r.listeners != nil {
		r.listeners.close()
	}
	r.closeArrivals()
	r.stop()
	r.memory.stop()
	_ = r.server.Close()
	<-r.conns.none()
	<-r.parked.none()
}

// Ports are the bound resolver ports.
func (r *Resolver) Ports() []int32 { return r.listeners.ports() }

// inFlight counts work in progress and tells when none is left.
type inFlight struct {
	mu   sync.Mutex
	n    int
	idle chan struct{}
}

// add counts one more; done uncounts it, once however often it is called.
func (f *inFlight) add() (done func()) {
	f.mu.Lock()
	f.n++
	f.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.n--
			if f.n == 0 && f.idle != nil {
				close(f.idle)
				f.idle = nil
			}
		})
	}
}

// none returns a channel closed once nothing is counted.
func (f *inFlight) none() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	if f.idle == nil {
		f.idle = make(chan struct{})
	}
	return f.idle
}

// handleConn dispatches one accepted connection by its port's mapping: L7
// to the HTTP server, L4 to the splicer, unmapped to a refusal.
func (r *Resolver) handleConn(c net.Conn, port int32) {
	t, ok := r.ports.Lookup(r.stopCtx, port, r.opts.UnmappedWait, r.opts.Clock.After)
	if !ok {
		r.refuseUnmapped(c, port)
		return
	}
	if t.Layer() == LayerHTTP {
		if r.opts.Parking == ParkOnArrival && !r.servableNow(t) {
			r.parkOnArrival(c, t, port)
			return
		}
		// The HTTP server owns the connection from here; it is tracked by
		// the server's own Shutdown.
		r.httpConns.push(&mappedConn{Conn: c, target: t, port: port, mapped: true})
		return
	}
	r.serveTCP(c, t)
}

// httpPrefixes are how HTTP/1.x requests and the HTTP/2 preface start.
var httpPrefixes = []string{"GET ", "HEAD", "POST", "PUT ", "DELE", "OPTI", "PATC", "CONN", "TRAC", "PRI "}

// refuseUnmapped answers a connection on a port nobody claimed: an HTTP
// client gets a 404 saying so, anything else is closed. The first bytes
// decide, read with a short deadline so a silent client is not kept.
func (r *Resolver) refuseUnmapped(c net.Conn, port int32) {
	br := bufio.NewReaderSize(c, 64)
	// Socket deadlines are wall-clock by nature; the injected clock is for
	// decisions.
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	head, _ := br.Peek(4)
	_ = c.SetReadDeadline(time.Time{})
	for _, p := range httpPrefixes {
		if string(head) == p {
			r.httpConns.push(&mappedConn{Conn: c, port: port, r: br})
			return
		}
	}
	r.metrics.reject(types.NamespacedName{}, ReasonUnmappedPort)
	r.opts.Log.V(1).Info("refused connection on unmapped port", "port", port)
	_ = c.Close()
}
