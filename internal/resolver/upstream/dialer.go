package upstream

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"elasti.dev/elasti/internal/resolver/route"
)

// ErrNoEndpoint means no ready endpoint accepted a connection before the
// deadline.
var ErrNoEndpoint = errors.New("no ready endpoint accepted the connection")

// Endpoints is what forwarding needs of the endpoint source
// (endpoints.Endpoints): the order in which to try a Service port's ready
// endpoints, one of them chosen in turn, and an event at each change.
type Endpoints interface {
	Candidates(svc types.NamespacedName, portName, prefer string) []string
	Next(svc types.NamespacedName, portName string) (string, bool)
	Changed(svc types.NamespacedName) <-chan struct{}
}

// Dialer connects to a ready endpoint of a Target. An endpoint can be listed
// ready a moment before it accepts connections, or go away between the event
// and the dial, so a refused dial moves on to the next ready endpoint; when
// every one refused, the dialer waits for the next endpoint event or a short
// backoff, whichever comes first, and tries again until the deadline.
type Dialer struct {
	endpoints Endpoints
	clock     clock.Clock
	// dialFunc makes one TCP connection; injected so tests can stand in
	// for pod networking.
	dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)
	// attemptTimeout bounds one TCP connect.
	attemptTimeout time.Duration
	retryMin       time.Duration
	retryMax       time.Duration
}

// NewDialer dials ready endpoints of eps with dial, each attempt bounded by
// attemptTimeout.
func NewDialer(eps Endpoints, clk clock.Clock, dial func(ctx context.Context, network, addr string) (net.Conn, error), attemptTimeout time.Duration) *Dialer {
	return &Dialer{
		endpoints:      eps,
		clock:          clk,
		dialFunc:       dial,
		attemptTimeout: attemptTimeout,
		retryMin:       25 * time.Millisecond,
		retryMax:       time.Second,
	}
}

// DialContext is the http.Transport's DialContext, and the one place where
// an L7 request's destination is chosen. It is chosen here, not in the
// request's URL, for two reasons. Nothing a client sends (Host, URI) can
// then steer the resolver anywhere but a ready endpoint of the Target its
// port maps to, so the resolver is no open proxy. And the Transport pools
// connections by URL host, which only names the Service port (PortKey):
// each new connection picks the next ready endpoint, spreading load, and a
// refused dial moves on to another endpoint inside the Transport, where
// ReverseProxy would otherwise answer 502 at once.
//
// The HTTP/2 pool is keyed by endpoint instead (see Proxy.Forward), so that
// its multiplexed connections spread over the pods too; addr then names the
// endpoint chosen for the request, and it is tried first. It is only ever a
// preference among the ready endpoints: an address that is not one of them
// is never dialed.
func (d *Dialer) DialContext(ctx context.Context, _, addr string) (net.Conn, error) {
	rel, ok := route.ReleaseFrom(ctx)
	if !ok {
		return nil, errors.New("dial without a target: the resolver only dials ready endpoints of mapped Services")
	}
	ctx, cancel := context.WithDeadline(ctx, rel.Deadline)
	defer cancel()
	if rel.Done != nil {
		go func() {
			select {
			case <-rel.Done:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	return d.Dial(ctx, rel.Dest, addr)
}

// Dial connects to one ready endpoint of t before ctx ends, trying prefer
// first while it is one of them.
func (d *Dialer) Dial(ctx context.Context, t route.Target, prefer string) (net.Conn, error) {
	backoff := d.retryMin
	var lastErr error
	for {
		changed := d.endpoints.Changed(t.Service)
		candidates := d.endpoints.Candidates(t.Service, t.PortName, prefer)
		for _, addr := range candidates {
			actx, cancel := context.WithTimeout(ctx, d.attemptTimeout)
			c, err := d.dialFunc(actx, "tcp", addr)
			cancel()
			if err == nil {
				return c, nil
			}
			lastErr = err
			if ctx.Err() != nil {
				break
			}
		}
		if ctx.Err() != nil {
			if lastErr == nil {
				lastErr = ctx.Err()
			}
			return nil, fmt.Errorf("dial %s port %q: %w: %w", t.Service, t.PortName, ErrNoEndpoint, lastErr)
		}
		if len(candidates) == 0 {
			// Nothing to try: only an endpoint event can help.
			select {
			case <-changed:
			case <-ctx.Done():
			}
			continue
		}
		select {
		case <-changed:
		case <-d.clock.After(backoff):
			backoff = min(2*backoff, d.retryMax)
		case <-ctx.Done():
		}
	}
}
