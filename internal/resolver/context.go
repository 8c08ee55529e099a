package resolver

import (
	"context"
	"time"
)

// route is the one value an L7 request carries through its context: where
// its port leads and, once the hold has let it through, how long the dial
// that follows may take and whether the request lived a cold start. The
// context is the only channel that reaches from the http.Server's
// per-connection hook, through the handler chain, into the Transport's
// dial, which is why this lives there and nowhere else.
//
// The server sets it per connection from the mappedConn (newServer);
// holdUntilReady adds the dial bounds and the cold start per request; the
// dialer reads the bounds, and forward the cold start.
type route struct {
	// target is what the connection's port maps to; zero when unmapped.
	target Target
	// port is the local resolver port the connection arrived on.
	port int32
	// mapped says the port map named a Target for port. An unmapped
	// connection is still served, but only ever gets a 404.
	mapped bool
	// resume is the outcome of the hold of a parked request on this
	// connection, taken by the first request read from it (park.go).
	resume *resumption

	// released says the hold let the request through: target has a
	// ready endpoint, and deadline and done bound the dial.
	released bool
	// deadline ends the dial at the hold timeout.
	deadline time.Time
	// done is the request's cancellation. The Transport detaches dials from
	// the request's context, so the dial watches it explicitly.
	done <-chan struct{}
	// coldStart says the request was held until its target woke, for
	// waited; its answer then carries HeaderColdStart.
	coldStart bool
	waited    time.Duration
	// turn ends the release pacer's turn a parked request already holds;
	// nil for the others, which wait for theirs in forward.
	turn func()
}

type routeKey struct{}

// withRoute returns ctx carrying rt, replacing any route it carried.
func withRoute(ctx context.Context, rt route) context.Context {
	return context.WithValue(ctx, routeKey{}, rt)
}

// routeFrom returns the route ctx carries, and false if it carries none.
func routeFrom(ctx context.Context) (route, bool) {
	rt, ok := ctx.Value(routeKey{}).(route)
	return rt, ok
}
