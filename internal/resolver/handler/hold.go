package handler

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/go-logr/logr"

	"elasti.dev/elasti/internal/resolver/hold"
	"elasti.dev/elasti/internal/resolver/park"
	"elasti.dev/elasti/internal/resolver/route"
)

// holdUntilReady holds a request until its Target can take it, through the
// hold's one entry (park.Parker.Enter), and answers what ends a hold
// early. A request let through goes on with its Release in its context.
type holdUntilReady struct {
	next   http.Handler
	parker *park.Parker
	rec    Recorder
	log    logr.Logger
	// retryAfter is sent with 503 when a hold queue is full.
	retryAfter time.Duration
	// readAhead bounds what is read ahead of a held HTTP/1.x body.
	readAhead int
}

func (h *holdUntilReady) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	rt, ok := routed(w, req, h.log)
	if !ok {
		return
	}
	t := rt.Target
	var body *park.HeldBody
	var watch hold.Watch
	if readsAhead(req) {
		watch = func() <-chan error {
			if req.ContentLength > int64(h.readAhead) {
				// Known to pass the bound: no need to read it.
				ch := make(chan error, 1)
				ch <- hold.ErrReadAheadFull
				return ch
			}
			body = park.ReadAhead(req.Body, h.readAhead, req.ContentLength)
			return body.Watch()
		}
	}
	rel, err, parked := h.parker.Enter(w, req, rt, watch)
	if parked {
		// The connection is the resolver's now; the request comes back
		// through the server with its outcome.
		return
	}
	if body != nil {
		if err == nil {
			err = body.Release()
		}
		if err != nil {
			abandonBody(w, body)
		}
	}
	switch {
	case err == nil:
	case errors.Is(err, hold.ErrQueueFull), errors.Is(err, hold.ErrReadAheadFull):
		w.Header().Set("Retry-After", strconv.Itoa(int((h.retryAfter+time.Second-1)/time.Second)))
		msg := "elasti resolver: too many requests are waiting for this service to wake; retry later"
		if errors.Is(err, hold.ErrReadAheadFull) {
			// The unread rest of the body must not be taken for the
			// next request on this connection.
			w.Header().Set("Connection", "close")
			msg = fmt.Sprintf("elasti resolver: this service is waking up, and request bodies over %d bytes are not held; retry later", h.readAhead)
		}
		http.Error(w, msg, http.StatusServiceUnavailable)
		return
	case errors.Is(err, hold.ErrHoldTimeout):
		http.Error(w, "elasti resolver: the service did not become ready within the hold timeout", http.StatusGatewayTimeout)
		return
	case errors.Is(err, hold.ErrStopping):
		h.rec.Draining(t.ElastiService)
		w.Header().Set("Retry-After", "1")
		http.Error(w, "elasti resolver: shutting down", http.StatusServiceUnavailable)
		return
	default:
		// The client went away (ErrClientGone): nothing is forwarded.
		h.log.V(1).Info("request abandoned while held", "elastiservice", t.ElastiService.String(), "reason", err.Error())
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
	// rel.Dest is t, or t pointed at its fallback Service.
	rel.Done = req.Context().Done()
	h.next.ServeHTTP(w, req.WithContext(route.WithRelease(req.Context(), rel)))
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
func abandonBody(w http.ResponseWriter, body *park.HeldBody) {
	body.Abandon()
	if body.StillReading() {
		_ = http.NewResponseController(w).SetReadDeadline(time.Unix(1, 0))
	}
}
