package resolver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/go-logr/logr"
)

// newServer is the one L7 server behind every HTTP resolver port. It speaks
// HTTP/1.1 and cleartext HTTP/2 with prior knowledge (h2c, gRPC), and puts
// each connection's route, from the mappedConn it was handed, in the context
// of every request on that connection.
func (r *Resolver) newServer() *http.Server {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Server{
		Handler:           r.httpHandler(),
		Protocols:         &protocols,
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: r.opts.MaxConcurrentStreams},
		ReadHeaderTimeout: r.opts.ReadHeaderTimeout,
		IdleTimeout:       r.opts.IdleTimeout,
		MaxHeaderBytes:    r.opts.MaxHeaderBytes,
		ErrorLog:          r.errorLog,
		ConnState:         connState,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if mc, ok := c.(*mappedConn); ok {
				return withRoute(ctx, route{target: mc.target, port: mc.port, mapped: mc.mapped, resume: mc.resume})
			}
			return ctx
		},
	}
}

// httpHandler builds the L7 handler chain, here and nowhere else. A request
// passes through, in this order (the first runs first):
//
//  1. recoverPanics - a bug answers 500 for that request instead of killing
//     the connection without a word;
//  2. requireMapping - the connection's port must map to a Target, else 404;
//  3. answerStatic - answers a request that a static response rule of the
//     ElastiService matches, without holding, waking or reporting it; see
//     staticresponse.go;
//  4. answerWakingPage - with spec.proxy.wakingPage, answers a browser's
//     page load at once with a page that reloads itself while the Target
//     has no ready endpoint; it wakes the Target as a held request does,
//     but is not held; see wakingpage.go;
//  5. holdUntilReady - holds while the Target has no ready endpoint and
//     starts activation; 503 when the hold queue is full, 504 on timeout;
//     with spec.proxy.fallback, points the request at the fallback Service
//     when the target does not come up in time (fallback.go). A bodiless
//     HTTP/1.x request is held parked, outside net/http, and comes back
//     through the server with the hold's outcome (park.go);
//  6. r.forward - reverse-proxies to a ready pod and asks the client to
//     reconnect (Connection: close, or GOAWAY on HTTP/2); an answer to a
//     request that waited for its Target to wake says how long, in
//     Elasti-Cold-Start; see proxy.go.
func (r *Resolver) httpHandler() http.Handler {
	h := http.Handler(http.HandlerFunc(r.forward))
	h = r.holdUntilReady(h)
	h = r.answerWakingPage(h)
	h = r.answerStatic(h)
	h = r.requireMapping(h)
	h = recoverPanics(r, h)
	return h
}

func recoverPanics(r *Resolver, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				// ReverseProxy aborts a broken stream this way on purpose.
				if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
					panic(v)
				}
				r.opts.Log.Error(fmt.Errorf("panic: %v", v), "request handler panicked")
				http.Error(w, "internal resolver error", http.StatusInternalServerError)
			}
		}()
		next.ServeHTTP(w, req)
	})
}

func (r *Resolver) requireMapping(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// Without a route (a connection that did not come through the
		// resolver's accept loops) the zero route is unmapped, on port 0.
		rt, _ := routeFrom(req.Context())
		if !rt.mapped {
			r.metrics.reject(rt.target.ElastiService, ReasonUnmappedPort)
			w.Header().Set("Connection", "close")
			http.Error(w, fmt.Sprintf("elasti resolver: port %d is not mapped to any Service; no ElastiService claims it in status.proxyPorts", rt.port), http.StatusNotFound)
			return
		}
		if req.Method == http.MethodConnect {
			r.metrics.reject(rt.target.ElastiService, ReasonBadRequest)
			http.Error(w, "elasti resolver: CONNECT is not proxied", http.StatusMethodNotAllowed)
			return
		}
		next.ServeHTTP(w, req)
	})
}

// errMisrouted means a request reached a handler without the route the
// handlers before it guarantee: a bug in how the chain is built.
var errMisrouted = errors.New("request reached a handler without the route the chain guarantees")

// misrouted answers such a request as recoverPanics would answer a bug.
func (r *Resolver) misrouted(w http.ResponseWriter) {
	r.opts.Log.Error(errMisrouted, "request handler chain is misbuilt")
	http.Error(w, "internal resolver error", http.StatusInternalServerError)
}

func (r *Resolver) holdUntilReady(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rt, ok := routeFrom(req.Context())
		if !ok || !rt.mapped {
			r.misrouted(w)
			return
		}
		t := rt.target
		var body *heldBody
		var watch watchFunc
		if readsAhead(req) {
			watch = func() <-chan error {
				if req.ContentLength > int64(r.opts.ReadAheadBytes) {
					// Known to pass the bound: no need to read it.
					ch := make(chan error, 1)
					ch <- ErrReadAheadFull
					return ch
				}
				body = readAhead(req.Body, r.opts.ReadAheadBytes, req.ContentLength)
				return body.watch()
			}
		}
		end, turn, err, resumed := rt.resume.take()
		if !resumed {
			passed := false
			if watch == nil && r.parks(req) {
				// Only a request that must wait is parked.
				if end, passed = r.passes(t); !passed && r.park(w, req, rt) {
					// The connection is the resolver's now; the request
					// comes back through the server with its outcome.
					return
				}
			}
			if !passed {
				end, err = r.hold(req.Context(), t, watch)
			}
		}
		if body != nil {
			if err == nil {
				err = body.release()
			}
			if err != nil {
				r.abandonBody(w, body)
			}
		}
		switch {
		case err == nil:
		case errors.Is(err, ErrQueueFull), errors.Is(err, ErrReadAheadFull):
			w.Header().Set("Retry-After", strconv.Itoa(int((r.opts.RetryAfter+time.Second-1)/time.Second)))
			msg := "elasti resolver: too many requests are waiting for this service to wake; retry later"
			if errors.Is(err, ErrReadAheadFull) {
				// The unread rest of the body must not be taken for the
				// next request on this connection.
				w.Header().Set("Connection", "close")
				msg = fmt.Sprintf("elasti resolver: this service is waking up, and request bodies over %d bytes are not held; retry later", r.opts.ReadAheadBytes)
			}
			http.Error(w, msg, http.StatusServiceUnavailable)
			return
		case errors.Is(err, ErrHoldTimeout):
			http.Error(w, "elasti resolver: the service did not become ready within the hold timeout", http.StatusGatewayTimeout)
			return
		case errors.Is(err, ErrStopping):
			r.metrics.reject(t.ElastiService, ReasonDraining)
			w.Header().Set("Retry-After", "1")
			http.Error(w, "elasti resolver: shutting down", http.StatusServiceUnavailable)
			return
		default:
			// The client went away (ErrClientGone): nothing is forwarded.
			r.opts.Log.V(1).Info("request abandoned while held", "elastiservice", t.ElastiService.String(), "reason", err.Error())
			if body != nil {
				// A body that failed mid-way may also be a malformed one
				// from a client still there: it must not get net/http's
				// implicit 200.
				w.Header().Set("Connection", "close")
				http.Error(w, "elasti resolver: the request body ended early", http.StatusBadRequest)
			}
			return
		}
		if body != nil {
			req.Body = body
		}
		// Streams go both ways at once (gRPC-style bidi over HTTP/1.1,
		// echo uploads): without this, net/http may cut the request body
		// once the response starts. HTTP/2 is full duplex already.
		_ = http.NewResponseController(w).EnableFullDuplex()
		// end.dest is t, or t pointed at its fallback Service.
		rt.target, rt.released, rt.deadline, rt.done = end.dest, true, end.deadline, req.Context().Done()
		rt.coldStart, rt.waited, rt.turn = end.coldStart, end.waited, turn
		next.ServeHTTP(w, req.WithContext(withRoute(req.Context(), rt)))
	})
}

// readsAhead says whether a held request must have its body read ahead to
// be watched: HTTP/1.x with a body. Without a body net/http already watches
// the connection; HTTP/2 cancels the request's context when its stream is
// reset or its connection closes, whatever was read.
func readsAhead(req *http.Request) bool {
	return req.ProtoMajor == 1 && req.Body != nil && req.Body != http.NoBody && req.ContentLength != 0
}

// abandonBody stops a read-ahead that will not be forwarded. A read still
// in progress is cut by a read deadline, so that net/http's own close of the
// body, after the handler, does not wait on the client.
func (r *Resolver) abandonBody(w http.ResponseWriter, body *heldBody) {
	body.abandon()
	if body.stillReading() {
		_ = http.NewResponseController(w).SetReadDeadline(time.Unix(1, 0))
	}
}

// logWriter adapts the standard library's error logs to logr at V(1): they
// are per-connection noise (bad handshakes, resets), not operator news.
type logWriter struct{ log logr.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.V(1).Info("http server", "detail", string(p))
	return len(p), nil
}
