package handler

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/go-logr/logr"

	"elasti.dev/elasti/internal/resolver/route"
)

// recoverPanics answers 500 for a request whose handler panicked, instead
// of killing the connection without a word.
type recoverPanics struct {
	next http.Handler
	log  logr.Logger
}

func (h *recoverPanics) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			// ReverseProxy aborts a broken stream this way on purpose.
			if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
				panic(v)
			}
			h.log.Error(fmt.Errorf("panic: %v", v), "request handler panicked")
			http.Error(w, "internal resolver error", http.StatusInternalServerError)
		}
	}()
	h.next.ServeHTTP(w, req)
}

// requireMapping lets through only requests on a port that maps to a
// Target, and refuses CONNECT: the resolver is no open proxy.
type requireMapping struct {
	next http.Handler
	rec  Recorder
}

func (h *requireMapping) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	// Without a route (a connection that did not come through the
	// resolver's accept loops) the zero route is unmapped, on port 0.
	rt, _ := route.From(req.Context())
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
	h.next.ServeHTTP(w, req)
}
