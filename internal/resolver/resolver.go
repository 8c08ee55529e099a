package resolver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"elasti.dev/elasti/internal/resolver/endpoints"
	"elasti.dev/elasti/internal/resolver/handler"
	"elasti.dev/elasti/internal/resolver/hold"
	"elasti.dev/elasti/internal/resolver/park"
	"elasti.dev/elasti/internal/resolver/ports"
	"elasti.dev/elasti/internal/resolver/route"
	"elasti.dev/elasti/internal/resolver/upstream"
)

// Resolver is one resolver replica's data plane: it builds the parts (the
// port map and endpoints it is handed, the hold, the parking, the
// forwarding and the handler chain), dispatches each accepted connection
// to them by its port, and owns their lifecycle: Start, Ready, Drain.
type Resolver struct {
	opts    Options
	metrics *Metrics
	ports   *ports.PortMap
	hold    *hold.Hold
	pacer   *hold.Pacer
	parker  *park.Parker
	proxy   *upstream.Proxy
	tcp     *upstream.TCP
	// heldBytes bounds what all holds read ahead together.
	heldBytes *park.Budget
	memory    *memoryReturner

	listeners *ports.Listeners
	httpConns *park.ConnListener
	server    *http.Server

	// state is where the Resolver is between New and its end.
	state lifecycle
}

// lifecycle is where a Resolver is between New and its end: started,
// draining, the contexts that end work, and the work the drain waits for.
type lifecycle struct {
	started  atomic.Bool
	draining atomic.Bool
	// stopCtx ends held work when the drain timeout passes.
	stopCtx context.Context
	stop    context.CancelFunc
	// portsClosed ends the reading of request heads on arrival once the
	// ports are closed: what is left goes to the server, whose Shutdown
	// knows what to do with a connection that sent nothing yet.
	portsClosed   context.Context
	closeArrivals context.CancelFunc
	// parked counts the requests held without their handler until the
	// server has them back (the park package); conns counts accepted
	// connections still being dispatched or spliced. The drain waits for
	// both.
	parked inFlight
	conns  inFlight
}

// New builds a Resolver that maps ports through pm and forwards to eps.
// Nothing listens until Start.
func New(pm *ports.PortMap, eps *endpoints.Endpoints, opts Options) (*Resolver, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("resolver options: %w", err)
	}
	pm.SetLinger(opts.Ports.ReleasedPortLinger, opts.Clock)
	r := &Resolver{opts: opts, metrics: opts.Metrics, ports: pm, httpConns: park.NewConnListener()}
	rec := recorder{opts.Metrics}
	pages := &handler.PageStarts{}
	pm.SetForget(func(es types.NamespacedName) {
		opts.Metrics.forget(es)
		pages.Forget(es)
	})
	r.state.stopCtx, r.state.stop = context.WithCancel(context.Background())
	r.state.portsClosed, r.state.closeArrivals = context.WithCancel(context.Background())
	free := func() {
		// The pod connections a burst's release opened are idle by now,
		// and would keep their buffers and goroutines for the Transport's
		// IdleConnTimeout: the woken target's clients reach it directly.
		r.proxy.CloseIdle()
		returnFreeMemory()
	}
	r.memory = newMemoryReturner(opts.Clock, opts.Memory.ReturnAfter, opts.Memory.ReturnAtPeak,
		func() bool { return r.hold.Queue().Total() == 0 }, free, opts.Metrics.MemoryReturns.Inc)
	a := opts.Activation
	r.hold = hold.New(r.state.stopCtx, hold.Config{
		Endpoints:      eps,
		Operator:       pm,
		Recorder:       rec,
		Clock:          opts.Clock,
		Log:            opts.Log,
		Timeout:        opts.Hold.Timeout,
		MaxHeld:        opts.Hold.MaxHeld,
		MaxHeldTotal:   opts.Hold.MaxHeldTotal,
		Activator:      a.Activator,
		CallTimeout:    a.Timeout,
		Backoff:        a.Backoff,
		MaxBackoff:     a.MaxBackoff,
		Refresh:        a.Refresh,
		ReportInterval: a.TrafficReportInterval,
		Drained:        r.memory.drained,
	})
	r.pacer = hold.NewPacer(opts.Hold.ReleaseConcurrency, opts.Hold.ReleaseTurn)
	dialer := upstream.NewDialer(eps, opts.Clock, opts.Upstream.DialContext, opts.Upstream.DialTimeout)
	errorLog := handler.ErrorLog(opts.Log)
	r.proxy = upstream.NewProxy(dialer, eps, r.pacer, rec, opts.Log, errorLog)
	r.heldBytes = park.NewBudget(opts.Hold.MaxHeldBytes)
	r.tcp = upstream.NewTCP(r.state.stopCtx, r.hold, dialer, rec, opts.Log, opts.Hold.ReadAheadBytes, r.heldBytes)
	hosts := handler.NewHosts(opts.HTTP.ClusterDomain, pm)
	r.parker = park.New(park.Config{
		Hold:    r.hold,
		Pacer:   r.pacer,
		Server:  r.httpConns,
		Parking: opts.Hold.Parking,
		// A misdirected request is answered 421 by requireMapping, so
		// it is never parked.
		Answered: func(rt route.Route, req *http.Request) bool {
			return hosts.Misdirected(req.Host, rt) || handler.Answered(rt.Target, req)
		},
		Track:             r.state.parked.add,
		PortsClosed:       r.state.portsClosed,
		ReadHeaderTimeout: opts.HTTP.ReadHeaderTimeout,
		MaxHeaderBytes:    opts.HTTP.MaxHeaderBytes,
		Log:               opts.Log,
	})
	chain := handler.Chain(handler.Config{
		Hold:              r.hold,
		Parker:            r.parker,
		Proxy:             r.proxy,
		Endpoints:         eps,
		Progress:          pm,
		Pages:             pages,
		Recorder:          rec,
		Clock:             opts.Clock,
		Log:               opts.Log,
		RetryAfter:        opts.Hold.RetryAfter,
		ReadAheadBytes:    opts.Hold.ReadAheadBytes,
		HeldBytes:         r.heldBytes,
		ReadHeaderTimeout: opts.HTTP.ReadHeaderTimeout,
		ClusterDomain:     opts.HTTP.ClusterDomain,
		Namespaces:        pm,
	})
	r.server = handler.NewServer(chain, handler.ServerOptions{
		ReadHeaderTimeout:    opts.HTTP.ReadHeaderTimeout,
		IdleTimeout:          opts.HTTP.IdleTimeout,
		MaxHeaderBytes:       opts.HTTP.MaxHeaderBytes,
		MaxConcurrentStreams: opts.HTTP.MaxConcurrentStreams,
		StreamReceiveBuffer:  opts.Hold.ReadAheadBytes,
		ErrorLog:             errorLog,
	})
	return r, nil
}

// Start opens every port of the range and starts serving. It fails if any
// port cannot be opened.
func (r *Resolver) Start() error {
	p := r.opts.Ports
	ls, err := ports.Open(p.ListenAddress, p.PortRangeStart, p.PortRangeEnd, p.ClientKeepAlive)
	if err != nil {
		return err
	}
	r.listeners = ls
	r.metrics.Listeners.Set(float64(ls.Count()))
	go func() {
		if err := r.server.Serve(r.httpConns); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.opts.Log.Error(err, "L7 server stopped")
		}
	}()
	ls.Serve(r.opts.Log, r.state.conns.add, r.handleConn)
	r.state.started.Store(true)
	r.opts.Log.Info("resolver ports open", "address", p.ListenAddress, "from", p.PortRangeStart, "to", p.PortRangeEnd)
	return nil
}

// Ready says why the resolver must not get traffic yet, or nil: every port
// is open, the ElastiService cache has synced, and it is not draining. The
// EndpointSlices of each Service are waited for by that Service's requests
// alone (endpoints.Endpoints), so one slow watch never makes the whole
// replica unready.
func (r *Resolver) Ready() error {
	switch {
	case !r.state.started.Load():
		return errors.New("ports not open yet")
	case r.state.draining.Load():
		return errors.New("draining")
	case r.listeners.OpenCount() != r.listeners.Count():
		return fmt.Errorf("%d of %d ports listening", r.listeners.OpenCount(), r.listeners.Count())
	case !r.opts.Synced():
		return errors.New("ElastiService cache not synced")
	}
	return nil
}

// Drain stops the resolver gracefully. Readiness turns false at once, so the
// operator drops this replica from proxy slices; new connections are still
// accepted for period while that propagates. Then the ports close and held
// and in-flight work gets until ctx ends to finish. Holds still waiting
// shortly before that (holdsEndBefore) end with a 503 and Retry-After (TCP:
// a close), so that no held client is cut without an answer; what is
// still in flight at the end is cut.
func (r *Resolver) Drain(ctx context.Context, period time.Duration) {
	r.opts.Log.Info("draining: readiness is false, still accepting", "period", period)
	over := make(chan struct{})
	go func() {
		defer close(over)
		select {
		case <-r.opts.Clock.After(period):
		case <-ctx.Done():
		}
	}()
	r.drain(ctx, over)
}

// DrainUntil is Drain with the ports kept open until accepting closes
// instead of for a period: the command closes it once no proxy
// EndpointSlice lists the pod (package unlisted).
func (r *Resolver) DrainUntil(ctx context.Context, accepting <-chan struct{}) {
	r.opts.Log.Info("draining: readiness is false, still accepting until no proxy EndpointSlice lists this pod")
	r.drain(ctx, accepting)
}

func (r *Resolver) drain(ctx context.Context, accepting <-chan struct{}) {
	r.state.draining.Store(true)
	select {
	case <-accepting:
	case <-ctx.Done():
	}
	r.opts.Log.Info("draining: ports closed, waiting for in-flight work")
	if r.listeners != nil {
		r.listeners.Close()
	}
	r.state.closeArrivals()
	// Parked requests come back through the server when their hold ends,
	// so it must still serve until they have.
	holdsEnd, cancel := holdsEndBefore(ctx)
	defer cancel()
	select {
	case <-r.state.parked.none():
	case <-holdsEnd:
		r.opts.Log.Info("draining: ending the holds still waiting, with 503 and Retry-After")
	}
	// Holds end (ErrStopping): held HTTP requests are answered 503 with
	// Retry-After, parked ones once back in the server, TCP closed.
	r.state.stop()
	select {
	case <-r.state.parked.none():
	case <-ctx.Done():
	}
	if err := r.server.Shutdown(ctx); err != nil {
		r.opts.Log.Info("drain timeout passed with requests in flight; cutting them", "err", err.Error())
	}
	r.memory.stop()
	select {
	case <-r.state.conns.none():
	case <-ctx.Done():
	}
	_ = r.server.Close()
	r.opts.Log.Info("drained")
}

// holdsEndBefore is when a drain ends the holds still waiting: a margin
// before ctx's deadline (a quarter of what is left, at most 5 s) for their
// answers to be written, or when ctx ends if it has no deadline.
func holdsEndBefore(ctx context.Context) (<-chan struct{}, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return ctx.Done(), func() {}
	}
	margin := min(5*time.Second, time.Until(dl)/4)
	hctx, cancel := context.WithDeadline(ctx, dl.Add(-margin))
	return hctx.Done(), cancel
}

// Close stops everything at once; for tests.
func (r *Resolver) Close() {
	r.state.draining.Store(true)
	if r.listeners != nil {
		r.listeners.Close()
	}
	r.state.closeArrivals()
	r.state.stop()
	r.memory.stop()
	_ = r.server.Close()
	<-r.state.conns.none()
	<-r.state.parked.none()
}

// Ports are the bound resolver ports.
func (r *Resolver) Ports() []int32 { return r.listeners.Ports() }

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
// to the HTTP server (or, while its target cannot serve, to parking on
// arrival), L4 to the splicer, unmapped to a refusal.
func (r *Resolver) handleConn(c net.Conn, port int32) {
	t, ok := r.ports.Lookup(r.state.stopCtx, port, r.opts.Ports.UnmappedWait, r.opts.Clock.After)
	if !ok {
		r.refuseUnmapped(c, port)
		return
	}
	if t.Layer() == route.LayerHTTP {
		rt := route.Route{Target: t, Port: port, Mapped: true, Local: localAddr(c)}
		if r.parker.Arrives(t) {
			r.parker.OnArrival(c, rt)
			return
		}
		// The HTTP server owns the connection from here; it is tracked by
		// the server's own Shutdown.
		r.httpConns.Push(&park.Conn{Conn: c, Route: rt})
		return
	}
	r.tcp.Serve(c, t)
}

// localAddr is the IP address c arrived at; the zero Addr if it has none.
func localAddr(c net.Conn) netip.Addr {
	if a, ok := c.LocalAddr().(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			return ip.Unmap()
		}
	}
	return netip.Addr{}
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
			r.httpConns.Push(&park.Conn{Conn: c, Route: route.Route{Port: port, Local: localAddr(c)}, Replay: br})
			return
		}
	}
	r.metrics.reject(types.NamespacedName{}, ReasonUnmappedPort)
	r.opts.Log.V(1).Info("refused connection on unmapped port", "port", port)
	_ = c.Close()
}
