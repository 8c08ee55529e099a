package handler

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/go-logr/logr"

	"elasti.dev/elasti/internal/resolver/route"
)

// requireMapping lets through only requests on a port that maps to a
// Target whose Host does not name another Service, and refuses CONNECT:
// the resolver is no open proxy.
type requireMapping struct {
	next  http.Handler
	rec   Recorder
	hosts Hosts
}

func (h *requireMapping) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	// Without a route (a connection that did not come through the
	// resolver's accept loops) the zero route is unmapped, on port 0.
	rt, _ := route.From(req.Context())
	if !rt.Mapped && addressedToResolver(req.Host, rt.Local) {
		// Addressed to the resolver pod itself: the same answer as on a
		// mapped port, so that a scan of the range tells nothing.
		h.misdirected(w, rt)
		return
	}
	if !rt.Mapped {
		h.rec.Unmapped(rt.Target.ElastiService)
		w.Header().Set("Connection", "close")
		http.Error(w, fmt.Sprintf("elasti resolver: port %d is not mapped to any Service; no ElastiService claims it in status.proxyPorts", rt.Port), http.StatusNotFound)
		return
	}
	if req.Method == http.MethodConnect {
		h.rec.BadRequest(rt.Target.ElastiService)
		http.Error(w, "elasti resolver: CONNECT is not proxied", http.StatusMethodNotAllowed)
		return
	}
	if h.hosts.Misdirected(req.Host, rt) {
		h.misdirected(w, rt)
		return
	}
	h.next.ServeHTTP(w, req)
}

// misdirected answers a request whose Host names another Service, or the
// resolver pod itself. The answer says nothing of where the port leads,
// or whether it leads anywhere: only that it is not where the request
// meant to go.
func (h *requireMapping) misdirected(w http.ResponseWriter, rt route.Route) {
	h.rec.Misdirected(rt.Target.ElastiService)
	w.Header().Set("Connection", "close")
	http.Error(w, "elasti resolver: this port does not serve the Service named in Host; the request was not forwarded", http.StatusMisdirectedRequest)
}

// errMisrouted means a request reached a handler without the route the
// handlers before it guarantee: a bug in how the chain is built.
var errMisrouted = errors.New("request reached a handler without the route the chain guarantees")

// routed is the one guard of the handlers after requireMapping: it returns
// the request's mapped Route, or answers the request as recoverPanics would
// answer a bug and returns false.
func routed(w http.ResponseWriter, req *http.Request, log logr.Logger) (route.Route, bool) {
	rt, ok := route.From(req.Context())
	if !ok || !rt.Mapped {
		misrouted(w, log)
		return rt, false
	}
	return rt, true
}

// misrouted answers a request the chain should never have let through.
func misrouted(w http.ResponseWriter, log logr.Logger) {
	log.Error(errMisrouted, "request handler chain is misbuilt")
	http.Error(w, "internal resolver error", http.StatusInternalServerError)
}
