package main

import (
	"fmt"
	"net/http"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// newHTTPHandler serves "/" (the pod's name), "/healthz", "/metrics" and,
// when enabled, the WebSocket echo at "/ws". Requests to "/" and "/ws" count
// in http_requests_total.
func newHTTPHandler(name string, ws bool) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "http_requests_total",
		Help: "HTTP requests served, by method and status code.",
	}, []string{"method", "code"})
	reg.MustRegister(requests)

	mux := http.NewServeMux()
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "hello from %s: %s %s\n", name, r.Method, r.URL.Path)
	})
	mux.Handle("/", promhttp.InstrumentHandlerCounter(requests, hello))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if ws {
		mux.Handle("/ws", promhttp.InstrumentHandlerCounter(requests, http.HandlerFunc(wsEcho)))
	}
	return mux
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
