package resolver

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"sync"
	"time"
)

// The L7 forwarding path, twin of serveTCP's dial and splice: once the hold
// has released a request, forward reverse-proxies it to a ready pod of its
// Target and streams the answer back.

// upstreams are the connection pools to the pods, shared by every request
// and every Target. Both dial through the dialer (see dialContext for why
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
func (u upstreams) pick(t Target, req *http.Request) (rt http.RoundTripper, multiplexed bool) {
	if t.H2C() || req.ProtoMajor == 2 {
		return u.h2, true
	}
	return u.h1, false
}

// forward is the last handler of the chain. It reads the request's route
// once and serves the request through a reverse proxy bound to it, so that
// no step of the proxying has to look the route up again.
func (r *Resolver) forward(w http.ResponseWriter, req *http.Request) {
	rt, ok := routeFrom(req.Context())
	if !ok || !rt.released {
		r.misrouted(w)
		return
	}
	transport, multiplexed := r.upstreams.pick(rt.target, req)
	host := rt.target.portKey()
	if multiplexed {
		// An HTTP/2 connection carries every request of its pool key, so
		// keyed by the Service port all of them would reach one pod. Keyed
		// by a ready endpoint chosen per request, the pool keeps one
		// connection per pod and requests rotate across them, as new
		// HTTP/1.1 connections do. The dialer still dials only ready
		// endpoints; if none is left, it waits as for HTTP/1.1.
		if addr, ok := r.endpoints.Next(rt.target.Service, rt.target.PortName); ok {
			host = addr
		}
	}
	coldStart := ""
	turnDone := func() {}
	if rt.coldStart {
		coldStart = formatColdStart(rt.waited)
		// A parked request waited for its turn while parked (park.go).
		done := rt.turn
		if done == nil {
			var ok bool
			done, ok = r.pacer.wait(req.Context().Done(), rt.target.ElastiService)
			if !ok {
				// The client left while the burst ahead of it was
				// forwarded: nothing of its request reached the target.
				r.opts.Log.V(1).Info("client went away while waiting for its turn", "elastiservice", rt.target.ElastiService.String())
				return
			}
		}
		defer done()
		turnDone = done
	}
	r.reverseProxy(rt.target, transport, host, coldStart, turnDone, time.Now()).ServeHTTP(w, req)
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

// reverseProxy forwards to t through transport, under the pool key host;
// coldStart, unless empty, is the answer's HeaderColdStart; turnDone is
// called once the response headers are in, or forwarding failed; started is
// when forwarding began, after any hold and turn. It is cheap to build: the
// pools live in transport, and the proxy itself holds no state.
func (r *Resolver) reverseProxy(t Target, transport http.RoundTripper, host, coldStart string, turnDone func(), started time.Time) *httputil.ReverseProxy {
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
		ErrorLog:      r.errorLog,
		ModifyResponse: func(res *http.Response) error {
			turnDone()
			r.metrics.ForwardLatency.WithLabelValues(es.Namespace, es.Name).Observe(time.Since(started).Seconds())
			r.metrics.Forwarded.WithLabelValues(es.Namespace, es.Name).Inc()
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
				r.opts.Log.V(1).Info("client went away during forwarding", "elastiservice", es.String())
				return
			}
			r.metrics.reject(es, ReasonDialFailed)
			r.opts.Log.Error(err, "forwarding failed", "elastiservice", es.String())
			status := http.StatusBadGateway
			if errors.Is(err, ErrNoEndpoint) || errors.Is(err, context.DeadlineExceeded) {
				status = http.StatusGatewayTimeout
			}
			http.Error(w, "elasti resolver: "+http.StatusText(status), status)
		},
	}
}
