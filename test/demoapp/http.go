package main

import (
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// RequestIDHeader names a request in the ledger.
const RequestIDHeader = "X-Request-Id"

// PeerHeader, on every answer of "/", is the address the request came from
// (no port): a test behind a front door tells by it whether the front door
// sent the request to the pod itself or through a resolver.
const PeerHeader = "X-Demoapp-Peer"

// newHTTPHandler serves "/" (the pod's name, and the size and SHA-256 of any
// body; the client's address in PeerHeader), "/healthz", "/metrics", "/burn" (CPU work, for an HPA on CPU) and, when enabled, the WebSocket echo at
// "/ws" (open ones counted in websocket_connections_open) and the relay at
// "/relay" (relay.go). Requests to "/", "/ws" and "/relay" count in
// http_requests_total; requests to "/" are recorded in the ledger (by
// X-Request-Id) once their body is read.
// While draining is set, every answer carries Connection: close, so a
// keep-alive client opens its next request on a new connection, which
// kube-proxy routes away from this terminating pod.
func newHTTPHandler(name string, ws, relay bool, executed *ledger, draining *atomic.Bool) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "http_requests_total",
		Help: "HTTP requests served, by method and status code.",
	}, []string{"method", "code"})
	reg.MustRegister(requests)
	// A WebSocket counts in http_requests_total only when it closes; this
	// gauge says how many are open now, for a trigger that keeps the app
	// awake while one is (docs/configuration.md, "Open connections").
	openWS := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "websocket_connections_open",
		Help: "WebSocket connections open now.",
	})
	reg.MustRegister(openWS)

	mux := http.NewServeMux()
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
			return
		}
		executed.record("http", r.Header.Get(RequestIDHeader))
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			w.Header().Set(PeerHeader, host)
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "hello from %s: %s %s\n", name, r.Method, r.URL.Path)
		if n > 0 {
			fmt.Fprintf(w, "body %d bytes sha256 %x\n", n, h.Sum(nil))
		}
	})
	mux.Handle("/", promhttp.InstrumentHandlerCounter(requests, hello))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.Handle("/burn", promhttp.InstrumentHandlerCounter(requests, http.HandlerFunc(burn)))
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if relay {
		// Counted like "/": a relay pod stands for a load balancer whose
		// request rate an HPA can scale on, even while its backend is at zero.
		mux.Handle("/relay", promhttp.InstrumentHandlerCounter(requests, relayHandler()))
	}
	if ws {
		mux.Handle("/ws", promhttp.InstrumentHandlerInFlight(openWS, promhttp.InstrumentHandlerCounter(requests, http.HandlerFunc(wsEcho))))
	}
	if draining == nil {
		return mux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if draining.Load() {
			w.Header().Set("Connection", "close")
		}
		mux.ServeHTTP(w, r)
	})
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

// wsEcho sends every WebSocket message back with its type.
func wsEcho(w http.ResponseWriter, r *http.Request) {
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // Upgrade has answered the client already.
	}
	defer conn.Close()
	for {
		typ, msg, err := conn.ReadMessage()
		if err != nil {
			return
		}
		if err := conn.WriteMessage(typ, msg); err != nil {
			return
		}
	}
}

// maxBurn bounds one /burn request's work.
const maxBurn = time.Second

// burn keeps one CPU busy for ?ms= milliseconds (1 to 1000), then answers
// with the pod's work done: load for an HPA that scales on CPU.
func burn(w http.ResponseWriter, r *http.Request) {
	ms, err := strconv.Atoi(r.URL.Query().Get("ms"))
	d := time.Duration(ms) * time.Millisecond
	if err != nil || d <= 0 || d > maxBurn {
		http.Error(w, fmt.Sprintf("ms must be a whole number of milliseconds from 1 to %d", maxBurn.Milliseconds()), http.StatusBadRequest)
		return
	}
	end := time.Now().Add(d)
	n := 0
	for time.Now().Before(end) {
		n++
	}
	fmt.Fprintf(w, "burned %s (%d rounds)\n", d, n)
}
