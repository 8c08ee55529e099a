package route

import (
	"context"
	"net/netip"
	"time"
)

// Route is where an accepted connection's port leads. The server puts it
// in the context of every request on the connection (park.ConnContext),
// and nothing changes it afterwards: what the hold decides for a request
// travels apart, in its Release.
type Route struct {
	// Target is what the connection's port maps to; zero when unmapped.
	Target Target
	// Port is the local resolver port the connection arrived on.
	Port int32
	// Mapped says the port map named a Target for Port. An unmapped
	// connection is still served, but only ever gets a 404 (or 421).
	Mapped bool
	// Local is the address the connection arrived at: the resolver pod's
	// own, since kube-proxy's translation happens before. A request that
	// names it in Host was addressed to the resolver itself, not to a
	// Service (handler.Hosts.Misdirected).
	Local netip.Addr
}

// Release is what the hold adds to a request it lets through: where it
// goes, how long the dial that follows may take and whether it lived a cold
// start. The context is the only channel that reaches from the handler
// chain into the Transport's dial, which is why it travels there.
//
// The hold sets Dest, Deadline, ColdStart and Waited; the hold's handler
// adds Done and, for a request that waited for its turn while parked, Turn.
// The dialer reads Dest, Deadline and Done, the forwarding the rest.
type Release struct {
	// Dest is the request's Target, or that Target pointed at its fallback
	// Service; it has a ready endpoint.
	Dest Target
	// Deadline ends the dial at the hold timeout.
	Deadline time.Time
	// Done is the request's cancellation. The Transport detaches dials from
	// the request's context, so the dial watches it explicitly.
	Done <-chan struct{}
	// ColdStart says the request was held until its target woke, for
	// Waited; its answer then carries the cold start header.
	ColdStart bool
	Waited    time.Duration
	// Turn ends the release pacer's turn a parked request already holds;
	// nil for the others, which wait for theirs when forwarded.
	Turn func()
}

type routeKey struct{}

type releaseKey struct{}

// With returns ctx carrying rt.
func With(ctx context.Context, rt Route) context.Context {
	return context.WithValue(ctx, routeKey{}, rt)
}

// From returns the Route ctx carries, and false if it carries none.
func From(ctx context.Context) (Route, bool) {
	rt, ok := ctx.Value(routeKey{}).(Route)
	return rt, ok
}

// WithRelease returns ctx carrying rel: the request was let through.
func WithRelease(ctx context.Context, rel Release) context.Context {
	return context.WithValue(ctx, releaseKey{}, rel)
}

// ReleaseFrom returns the Release ctx carries, and false while the hold
// has not let its request through.
func ReleaseFrom(ctx context.Context) (Release, bool) {
	rel, ok := ctx.Value(releaseKey{}).(Release)
	return rel, ok
}
