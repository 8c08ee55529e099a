package upstream

import (
	"context"
	"net"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"elasti.dev/elasti/internal/resolver/endpoints"
	"elasti.dev/elasti/internal/resolver/resolvertest"
	"elasti.dev/elasti/internal/resolver/route"
)

// The Transport's dial is where the destination is chosen: it must dial
// nothing for a request the hold has not released.
func TestDialContextNeedsReleasedRoute(t *testing.T) {
	svc := types.NamespacedName{Namespace: "ns", Name: "web"}
	e := endpoints.New()
	e.Update(resolvertest.Slice("ns", "web-1", "web", "http", 80, resolvertest.ReadyEP("10.0.0.1")))
	dialed := 0
	d := &Dialer{
		endpoints:      e,
		clock:          clock.RealClock{},
		attemptTimeout: time.Second,
		dialFunc: func(context.Context, string, string) (net.Conn, error) {
			dialed++
			c, peer := net.Pipe()
			_ = peer.Close()
			return c, nil
		},
	}
	target := route.Target{Service: svc, PortName: "http"}
	tests := []struct {
		name     string
		ctx      context.Context
		wantDial bool
	}{
		{name: "no route", ctx: context.Background()},
		{name: "mapped, still held", ctx: route.With(context.Background(), route.Route{Target: target, Mapped: true})},
		{name: "released", ctx: route.WithRelease(route.With(context.Background(), route.Route{Target: target, Mapped: true}), route.Release{Dest: target, Deadline: time.Now().Add(time.Minute)}), wantDial: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dialed = 0
			c, err := d.DialContext(tt.ctx, "tcp", "anything:80")
			if c != nil {
				_ = c.Close()
			}
			if got := err == nil && dialed == 1; got != tt.wantDial {
				t.Errorf("dialContext: err %v, dials %d; want a dial: %v", err, dialed, tt.wantDial)
			}
		})
	}
}
