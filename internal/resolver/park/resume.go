package park

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"

	"elasti.dev/elasti/internal/resolver/route"
)

// resumption is a parked request's hold outcome, waiting for the first
// request read from its connection once that is back with the server.
type resumption struct {
	taken atomic.Bool
	// rel is the hold's release; its Turn ends the release pacer's turn
	// the request waited for while parked, nil if it needs none.
	rel route.Release
	err error
	// settled ends the parked request's count (Config.Track) once the
	// server has it in hand: reading it (http.StateActive), or done with
	// the connection. From then on the server's Shutdown waits for it.
	settled func()
}

// take returns the outcome once; later requests on the connection, and
// a nil resumption, get false.
func (s *resumption) take() (rel route.Release, err error, ok bool) {
	if s == nil || !s.taken.CompareAndSwap(false, true) {
		return route.Release{}, nil, false
	}
	return s.rel, s.err, true
}

// abandon gives back the turn of an outcome nobody will take.
func (s *resumption) abandon() {
	if s.taken.CompareAndSwap(false, true) && s.rel.Turn != nil {
		s.rel.Turn()
	}
}

// ConnState is the server's ConnState hook: a resumed connection stops
// counting as parked once the server has left StateNew with it, and one
// that closes before its request was read gives back its turn.
func ConnState(c net.Conn, st http.ConnState) {
	mc, ok := c.(*Conn)
	if !ok || mc.resume == nil || st == http.StateNew {
		return
	}
	if st == http.StateClosed || st == http.StateHijacked {
		mc.resume.abandon()
	}
	mc.resume.settled()
}

// ConnContext is the server's ConnContext hook: every request carries its
// connection, for WatchClient; on a connection handed over as a Conn, also
// its Route (route.With) and, if it was parked, its hold's outcome, which
// the first request read from it takes (Parker.Enter).
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	ctx = context.WithValue(ctx, socketKey{}, c)
	mc, ok := c.(*Conn)
	if !ok {
		return ctx
	}
	ctx = route.With(ctx, mc.Route)
	if mc.resume != nil {
		ctx = context.WithValue(ctx, resumptionKey{}, mc.resume)
	}
	return ctx
}

type resumptionKey struct{}

// resumptionFrom returns the outcome ctx's connection brought back from
// parking, or nil.
func resumptionFrom(ctx context.Context) *resumption {
	s, _ := ctx.Value(resumptionKey{}).(*resumption)
	return s
}
