package upstream

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"

	"elasti.dev/elasti/internal/resolver/hold"
	"elasti.dev/elasti/internal/resolver/route"
)

// The L7 forwarding path, twin of TCP's dial and splice: once the hold has
// released a request, Proxy.Forward reverse-proxies it to a ready pod of
// its Target and streams the answer back.

// Recorder takes what forwarding counts (the resolver's metrics).
type Recorder interface {
	// Forwarded counts a request or connection forwarded to a pod.
	Forwarded(es types.NamespacedName)
	// ForwardLatency records how long a forwarded HTTP request took from
	// the start of forwarding to the pod's response headers.
	ForwardLatency(es types.NamespacedName, d time.Duration)
	// DialFailed counts a request or connection that no pod took.
	DialFailed(es types.NamespacedName)
	// Draining counts a connection refused because the resolver stops.
	Draining(es types.NamespacedName)
}

// Proxy forwards released HTTP requests to ready pods.
type Proxy struct {
	pools     upstreams
	endpoints Endpoints
	// pacer gives the requests a hold released their turns.
	pacer *hold.Pacer
	rec   Recorder
	log   logr.Logger
	// errorLog takes net/http's own error logs.
	errorLog *log.Logger
}

// NewProxy forwards through d, picking HTTP/2 endpoints of eps, and
// paces released bursts with pacer.
func NewProxy(d *Dialer, eps Endpoints, pacer *hold.Pacer, rec Recorder, logger logr.Logger, errorLog *log.Logger) *Proxy {
	return &Proxy{pools: newUpstreams(d.DialContext), endpoints: eps, pacer: pacer, rec: rec, log: logger, errorLog: errorLog}
}

// CloseIdle closes the kept-alive pod connections no request is using.
func (p *Proxy) CloseIdle() { p.pools.closeIdle() }

// upstreams are the connection pools to the pods, shared by every request
// and every Target. Both dial through the Dialer (see DialContext for why
// the destination is chosen there).
type upstreams struct {
	h1 *http.Transport
	h2 *http.Transport
}

func newUpstreams(dial func(ctx context.Context, network, addr string) (net.Conn, error)) upstreams {
	var h2only http.Protocols
	h2only.SetUnencryptedHTTP2(true)
	return upstreams{
		h1: &http.Transport{
			Proxy:                 nil, // never an environment proxy: pods are dialed directly
			DialContext:           dial,
			MaxIdleConns:          1024,
			MaxIdleConnsPerHost:   256,
			IdleConnTimeout:       90 * time.Second,
			ExpectContinueTimeout: time.Second,
			DisableCompression:    true,
		},
		h2: &http.Transport{
			Proxy:              nil,
			DialContext:        dial,
			Protocols:          &h2only,
			IdleConnTimeout:    90 * time.Second,
			DisableCompression: true,
		},
	}
}

// closeIdle closes the kept-alive pod connections no request is using.
func (u upstreams) closeIdle() {
	u.h1.CloseIdleConnections()
	u.h2.CloseIdleConnections()
}

// copyBuffers lends ReverseProxy the buffers it copies bodies through. Left
// to itself, it allocates 32 KiB per request: half of every byte a
// forwarded request allocated in BenchmarkHTTPForward.
var copyBuffers httputil.BufferPool = &bufferPool{size: 32 << 10}

type bufferPool struct {
	size int
	pool sync.Pool
}

func (p *bufferPool) Get() []byte {
	if b, ok := p.pool.Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, p.size)
}

func (p *bufferPool) Put(b []byte) {
	if cap(b) < p.size {
		return
	}
	b = b[:p.size]
	p.pool.Put(&b)
}

// pick chooses the pool: gRPC and h2c ports, and clients that already speak
// HTTP/2 cleartext, go upstream over HTTP/2; the rest over HTTP/1.1, which
// also carries WebSocket upgrades. multiplexed says the pool is HTTP/2.
func (u upstreams) pick(t route.Target, req *http.Request) (rt http.RoundTripper, multiplexed bool) {
	if t.H2C() || req.ProtoMajor == 2 {
		return u.h2, true
	}
	return u.h1, false
}

// Forward serves req, which the hold released as rel, through a reverse
// proxy bound to rel.Dest, so that no step of the proxying has to look the
// destination up again. A request that lived a cold start first waits for
// its turn of the release pacer, unless it holds one already (rel.Turn).
func (p *Proxy) Forward(w http.ResponseWriter, req *http.Request, rel route.Release) {
	transport, multiplexed := p.pools.pick(rel.Dest, req)
	host := rel.Dest.PortKey()
	if multiplexed {
		// An HTTP/2 connection carries every request of its pool key, so
		// keyed by the Service port all of them would reach one pod. Keyed
		// by a ready endpoint chosen per request, the pool keeps one
		// connection per pod and requests rotate across them, as new
		// HTTP/1.1 connections do. The dialer still dials only ready
		// endpoints; if none is left, it waits as for HTTP/1.1.
		if addr, ok := p.endpoints.Next(rel.Dest.Service, rel.Dest.PortName); ok {
			host = addr
		}
	}
	coldStart := ""
	turnDone := func() {}
	if rel.ColdStart {
		coldStart = formatColdStart(rel.Waited)
		// A parked request waited for its turn while parked.
		done := rel.Turn
		if done == nil {
			var ok bool
			done, ok = p.pacer.Wait(req.Context().Done(), rel.Dest.ElastiService)
			if !ok {
				// The client left while the burst ahead of it was
				// forwarded: nothing of its request reached the target.
				p.log.V(1).Info("client went away while waiting for its turn", "elastiservice", rel.Dest.ElastiService.String())
				return
			}
		}
		defer done()
		turnDone = done
	}
	p.reverseProxy(rel.Dest, transport, host, coldStart, turnDone, time.Now()).ServeHTTP(w, req)
}

// HeaderColdStart is set on the answer to a request that was held until its
// target woke, to how long it was held: API clients can tell a slow answer
// from a cold start. Requests forwarded at once, and those sent to a
// fallback Service, do not get it.
const HeaderColdStart = "Elasti-Cold-Start"

// formatColdStart writes d in seconds with milliseconds, such as "1.234s"
// or "0.080s": one shape for every value, which Go's time.ParseDuration
// also reads.
func formatColdStart(d time.Duration) string {
	return strconv.FormatFloat(d.Round(time.Millisecond).Seconds(), 'f', 3, 64) + "s"
}

// PodClosedMessage is the body of the 502 that answers a request whose
// pod closed the connection before answering it, as a pod that shuts down
// does with its kept-alive connections (docs/architecture.md, "Forwarding").
// The pod may have run the request, so the resolver does not send it again;
// neither would a client that met the same close on its own keep-alive
// connection to the pod.
const PodClosedMessage = "elasti resolver: the pod closed the connection before answering; the request may have run and is not sent again"

// podClosed reports whether err is the pod closing (or resetting) the
// connection before its answer began. net.ErrClosed is the same close seen
// from the request's write: the Transport's read of the connection met the
// pod's close first and closed it under the body being written (seen on a
// busy machine: "readfrom ...: use of closed network connection").
func podClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, net.ErrClosed)
}

// reverseProxy forwards to t through transport, under the pool key host;
// coldStart, unless empty, is the answer's HeaderColdStart; turnDone is
// called once the response headers are in, or forwarding failed; started is
// when forwarding began, after any hold and turn. It is cheap to build: the
// pools live in transport, and the proxy itself holds no state.
func (p *Proxy) reverseProxy(t route.Target, transport http.RoundTripper, host, coldStart string, turnDone func(), started time.Time) *httputil.ReverseProxy {
	es := t.ElastiService
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = host
			// The query goes on byte for byte, as it would reach the pod in
			// serve mode: ReverseProxy re-encodes one it cannot parse
			// (sorted, re-escaped, bad pairs dropped), which breaks signed
			// URLs. The resolver never reads the query itself.
			pr.Out.URL.RawQuery = pr.In.URL.RawQuery
			// Out.Host stays In.Host: the pod sees the Host the client sent.
			// The resolver sits transparently in the Service's path, so what
			// an ingress in front already set is kept and extended.
			if xff, ok := pr.In.Header["X-Forwarded-For"]; ok {
				pr.Out.Header["X-Forwarded-For"] = xff
			}
			pr.SetXForwarded()
			for _, k := range []string{"X-Forwarded-Host", "X-Forwarded-Proto"} {
				if v := pr.In.Header.Get(k); v != "" {
					pr.Out.Header.Set(k, v)
				}
			}
		},
		Transport:  transport,
		BufferPool: copyBuffers,
		// Zero, not -1: ReverseProxy already flushes every write at once for
		// responses of unknown length (chunked, gRPC streams) and for SSE.
		// A -1 here would also flush the headers of a bodiless response on
		// a timer racing the handler, which splits a gRPC trailers-only
		// answer (grpc-status in the only HEADERS frame) into headers and
		// an empty end of stream that clients reject.
		FlushInterval: 0,
		ErrorLog:      p.errorLog,
		ModifyResponse: func(res *http.Response) error {
			turnDone()
			p.rec.ForwardLatency(es, time.Since(started))
			p.rec.Forwarded(es)
			// The target has a ready endpoint, so the client should reach it
			// straight through the Service from now on. 101 must keep its
			// "Connection: Upgrade".
			if res.StatusCode != http.StatusSwitchingProtocols {
				res.Header.Set("Connection", "close")
			}
			// An extra response header is harmless to every protocol the
			// path carries: a WebSocket 101, gRPC (it is metadata, and a
			// trailers-only answer stays one HEADERS frame) and SSE.
			if coldStart != "" {
				res.Header.Set(HeaderColdStart, coldStart)
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, req *http.Request, err error) {
			turnDone()
			if req.Context().Err() != nil {
				p.log.V(1).Info("client went away during forwarding", "elastiservice", es.String())
				return
			}
			p.rec.DialFailed(es)
			if podClosed(err) {
				// The pod's termination race, one hop later: a pod that
				// shuts down closes its kept-alive connections, and the
				// resolver's request met one as it closed. net/http has
				// already retried what it may (a request it knows to be
				// idempotent, or one of which nothing was written); any
				// other may have run, so it is answered, not sent again.
				p.log.V(1).Info("the pod closed the connection before answering", "elastiservice", es.String(), "error", err.Error())
				http.Error(w, PodClosedMessage, http.StatusBadGateway)
				return
			}
			p.log.Error(err, "forwarding failed", "elastiservice", es.String())
			status := http.StatusBadGateway
			if errors.Is(err, ErrNoEndpoint) || errors.Is(err, context.DeadlineExceeded) {
				status = http.StatusGatewayTimeout
			}
			http.Error(w, "elasti resolver: "+http.StatusText(status), status)
		},
	}
}
