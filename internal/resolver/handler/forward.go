package handler

import (
	"net/http"

	"github.com/go-logr/logr"

	"elasti.dev/elasti/internal/resolver/route"
	"elasti.dev/elasti/internal/resolver/upstream"
)

// forward is the last handler of the chain: it hands the request, with the
// Release the hold gave it, to the proxy.
type forward struct {
	proxy *upstream.Proxy
	log   logr.Logger
}

func (h *forward) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	rel, ok := route.ReleaseFrom(req.Context())
	if !ok {
		misrouted(w, h.log)
		return
	}
	h.proxy.Forward(w, req, rel)
}
