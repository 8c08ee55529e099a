package handler

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
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
	// readAhead bounds what is read ahead of a held HTTP/1.x body, within
	// what budget has left for all holds together.
	readAhead int
	budget    *park.Budget
}

// errNoStreamShare refuses a held HTTP/2 stream with a body when the
// read-ahead budget has less than its window left.
var errNoStreamShare = fmt.Errorf("%w: the read-ahead budget has no share left for an HTTP/2 stream's window", hold.ErrResolverFull)

func (h *holdUntilReady) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	rt, ok := routed(w, req, h.log)
	if !ok {
		return
	}
	t := rt.Target
	var body *park.HeldBody
	// reserved is body's share of the read-ahead budget, given back when
	// the request is done with (bodies are never parked, so that is here).
	reserved := 0
	defer func() { h.budget.Give(reserved) }()
	stopWatch := func() {}
	watched := false
	var watch hold.Watch
	if req.ProtoMajor == 1 {
		// HTTP/2 cancels the request's context when its stream is reset
		// or its connection closes, whatever was read; an HTTP/1.x client
		// is watched on its socket, whatever it sent after its request
		// (docs/resolver.md, "Held means watched").
		watch = func() <-chan error {
			watched = true
			gone := make(chan error, 1)
			left := func(err error) {
				select {
				case gone <- err:
				default:
				}
			}
			if stop, ok := park.WatchClient(req.Context(), left); ok {
				stopWatch = stop
			}
			if readsAhead(req) {
				// A spent budget reads nothing ahead: the body waits in
				// the socket, and the watch still sees the client go.
				if reserved = h.budget.Take(h.readAhead); reserved > 0 {
					body = park.ReadAhead(req.Body, reserved, req.ContentLength, left)
				}
			}
			return gone
		}
	} else if hasBody(req) {
		// An HTTP/2 stream's window (the read-ahead bound) is granted when
		// the stream opens, so its client may send that much while held
		// whatever the budget has left: a held stream with a body takes a
		// whole share, and one that finds less is refused as at the
		// resolver's total, with 503 and Retry-After (gRPC: UNAVAILABLE).
		watch = func() <-chan error {
			gone := make(chan error, 1)
			if reserved = h.budget.Take(h.readAhead); reserved < h.readAhead {
				gone <- errNoStreamShare
			}
			return gone
		}
	}
	rel, err, parked := h.parker.Enter(w, req, rt, watch)
	stopWatch()
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
	if err != nil && hasBody(req) && (body == nil || !body.Complete()) {
		// The unread rest of the body must not be taken for the next
		// request on this connection.
		w.Header().Set("Connection", "close")
	}
	switch {
	case err == nil:
	case errors.Is(err, hold.ErrQueueFull), errors.Is(err, hold.ErrResolverFull):
		if errors.Is(err, errNoStreamShare) {
			// The hold counted the others when it refused them.
			h.rec.Refused(t.ElastiService, err)
		}
		w.Header().Set("Retry-After", strconv.Itoa(int((h.retryAfter+time.Second-1)/time.Second)))
		msg := "elasti resolver: too many requests are waiting for this service to wake; retry later"
		if errors.Is(err, hold.ErrResolverFull) {
			msg = "elasti resolver: this resolver holds as many requests as it may; retry later"
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
	if watched && hasBody(req) {
		// What the client sent while held, past the bound, still waits on
		// its socket, and so may its close.
		req.Body = park.GuardEnd(req.Body, park.ClientSocket(req.Context()))
	}
	// Streams go both ways at once (gRPC-style bidi over HTTP/1.1,
	// echo uploads): without this, net/http may cut the request body
	// once the response starts. HTTP/2 is full duplex already.
	_ = http.NewResponseController(w).EnableFullDuplex()
	// rel.Dest is t, or t pointed at its fallback Service.
	rel.Done = req.Context().Done()
	h.next.ServeHTTP(w, req.WithContext(route.WithRelease(req.Context(), rel)))
}

// hasBody says whether req has a body (HTTP/1.x: a length or chunked).
func hasBody(req *http.Request) bool {
	return req.Body != nil && req.Body != http.NoBody && req.ContentLength != 0
}

// readsAhead says whether a held request has its body read ahead: HTTP/1.x
// with a body, unless the client waits for "100 Continue" before sending
// it. Reading that body would make net/http send the 100 Continue, and the
// body would come to the resolver instead of the pod; it is read only once
// the request is forwarded. A client that tires of waiting and sends it
// anyway is held with backpressure all the same: nothing reads it.
func readsAhead(req *http.Request) bool {
	return req.ProtoMajor == 1 && hasBody(req) && !strings.EqualFold(req.Header.Get("Expect"), "100-continue")
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
