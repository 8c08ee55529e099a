package resolver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"time"
)

type connInfoKey struct{}

// newServer is the one L7 server behind every HTTP resolver port. It speaks
// HTTP/1.1 and cleartext HTTP/2 with prior knowledge (h2c, gRPC), and learns
// each connection's Target from the mappedConn it was handed.
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
		ErrorLog:          r.stdLogger(),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if mc, ok := c.(*mappedConn); ok {
				return context.WithValue(ctx, connInfoKey{}, mc)
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
//  3. holdUntilReady - holds while the Target has no ready endpoint and
//     starts activation; 503 when the hold queue is full, 504 on timeout;
//  4. r.proxy - reverse-proxies to a ready pod and asks the client to
//     reconnect (Connection: close, or GOAWAY on HTTP/2).
func (r *Resolver) httpHandler() http.Handler {
	h := r.proxy
	h = r.holdUntilReady(h)
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
		mc, _ := req.Context().Value(connInfoKey{}).(*mappedConn)
		if mc == nil || !mc.mapped {
			port := int32(0)
			if mc != nil {
				port = mc.port
			}
			r.metrics.reject(mc.targetOrZero().ElastiService, ReasonUnmappedPort)
			w.Header().Set("Connection", "close")
			http.Error(w, fmt.Sprintf("elasti resolver: port %d is not mapped to any Service; no ElastiService claims it in status.proxyPorts", port), http.StatusNotFound)
			return
		}
		if req.Method == http.MethodConnect {
			r.metrics.reject(mc.target.ElastiService, ReasonBadRequest)
			http.Error(w, "elasti resolver: CONNECT is not proxied", http.StatusMethodNotAllowed)
			return
		}
		next.ServeHTTP(w, req)
	})
}

func (c *mappedConn) targetOrZero() Target {
	if c == nil {
		return Target{}
	}
	return c.target
}

func (r *Resolver) holdUntilReady(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		t := req.Context().Value(connInfoKey{}).(*mappedConn).target
		deadline, err := r.hold(req.Context(), t)
		switch {
		case err == nil:
		case errors.Is(err, ErrQueueFull):
			w.Header().Set("Retry-After", strconv.Itoa(int((r.opts.RetryAfter+time.Second-1)/time.Second)))
			http.Error(w, "elasti resolver: too many requests are waiting for this service to wake; retry later", http.StatusServiceUnavailable)
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
			// The client went away; nobody reads an answer.
			r.opts.Log.V(1).Info("request abandoned while held", "elastiservice", t.ElastiService.String(), "reason", err.Error())
			return
		}
		// Streams go both ways at once (gRPC-style bidi over HTTP/1.1,
		// echo uploads): without this, net/http may cut the request body
		// once the response starts. HTTP/2 is full duplex already.
		_ = http.NewResponseController(w).EnableFullDuplex()
		ctx := withDialPlan(req.Context(), dialPlan{target: t, deadline: deadline, done: req.Context().Done()})
		next.ServeHTTP(w, req.WithContext(ctx))
	})
}

// newProxy is the reverse proxy to the pods. The upstream URL's host names
// the Target's connection pool only; the dial goes to a ready endpoint chosen
// by the dialer, so no request can steer the resolver anywhere else.
func (r *Resolver) newProxy() http.Handler {
	h1 := &http.Transport{
		Proxy:                 nil, // never an environment proxy: pods are dialed directly
		DialContext:           r.dialer.dialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
	}
	var h2only http.Protocols
	h2only.SetUnencryptedHTTP2(true)
	h2 := &http.Transport{
		Proxy:              nil,
		DialContext:        r.dialer.dialContext,
		Protocols:          &h2only,
		IdleConnTimeout:    90 * time.Second,
		DisableCompression: true,
	}
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			p, _ := pr.In.Context().Value(dialPlanKey{}).(dialPlan)
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = p.target.portKey()
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
		Transport: roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			p, _ := req.Context().Value(dialPlanKey{}).(dialPlan)
			// gRPC and h2c ports, and clients that already speak HTTP/2
			// cleartext, go upstream over HTTP/2; the rest over HTTP/1.1,
			// which also carries WebSocket upgrades.
			if p.target.H2C() || req.ProtoMajor == 2 {
				return h2.RoundTrip(req)
			}
			return h1.RoundTrip(req)
		}),
		// Zero, not -1: ReverseProxy already flushes every write at once for
		// responses of unknown length (chunked, gRPC streams) and for SSE.
		// A -1 here would also flush the headers of a bodiless response on
		// a timer racing the handler, which splits a gRPC trailers-only
		// answer (grpc-status in the only HEADERS frame) into headers and
		// an empty end of stream that clients reject.
		FlushInterval: 0,
		ErrorLog:      r.stdLogger(),
		ModifyResponse: func(res *http.Response) error {
			p, _ := res.Request.Context().Value(dialPlanKey{}).(dialPlan)
			r.metrics.Forwarded.WithLabelValues(p.target.ElastiService.Namespace, p.target.ElastiService.Name).Inc()
			// The target has a ready endpoint, so the client should reach it
			// straight through the Service from now on. 101 must keep its
			// "Connection: Upgrade".
			if res.StatusCode != http.StatusSwitchingProtocols {
				res.Header.Set("Connection", "close")
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, req *http.Request, err error) {
			p, _ := req.Context().Value(dialPlanKey{}).(dialPlan)
			if req.Context().Err() != nil {
				r.opts.Log.V(1).Info("client went away during forwarding", "elastiservice", p.target.ElastiService.String())
				return
			}
			r.metrics.reject(p.target.ElastiService, ReasonDialFailed)
			r.opts.Log.Error(err, "forwarding failed", "elastiservice", p.target.ElastiService.String())
			status := http.StatusBadGateway
			if errors.Is(err, ErrNoEndpoint) || errors.Is(err, context.DeadlineExceeded) {
				status = http.StatusGatewayTimeout
			}
			http.Error(w, "elasti resolver: "+http.StatusText(status), status)
		},
	}
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
