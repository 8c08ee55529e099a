package resolver

import (
	"context"
	"net"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

func TestRouteFromContext(t *testing.T) {
	if _, ok := routeFrom(context.Background()); ok {
		t.Fatal("routeFrom found a route in a bare context")
	}
	want := route{target: Target{PortName: "http"}, port: 20001, mapped: true}
	got, ok := routeFrom(withRoute(context.Background(), want))
	if !ok || got.target != want.target || got.port != want.port || got.mapped != want.mapped {
		t.Fatalf("routeFrom = %+v, %v; want %+v, true", got, ok, want)
	}
}

// The Transport's dial is where the destination is chosen: it must dial
// nothing for a request the hold has not released.
func TestDialContextNeedsReleasedRoute(t *testing.T) {
	svc := types.NamespacedName{Namespace: "ns", Name: "web"}
	e := NewEndpoints()
	e.Update(slice("ns", "web-1", "web", "http", 80, readyEP("10.0.0.1")))
	dialed := 0
	d := &dialer{
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
	target := Target{Service: svc, PortName: "http"}
	tests := []struct {
		name     string
		ctx      context.Context
		wantDial bool
	}{
		{name: "no route", ctx: context.Background()},
		{name: "mapped, still held", ctx: withRoute(context.Background(), route{target: target, mapped: true})},
		{name: "released", ctx: withRoute(context.Background(), route{target: target, mapped: true, released: true, deadline: time.Now().Add(time.Minute)}), wantDial: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dialed = 0
			c, err := d.dialContext(tt.ctx, "tcp", "anything:80")
			if c != nil {
				_ = c.Close()
			}
			if got := err == nil && dialed == 1; got != tt.wantDial {
				t.Errorf("dialContext: err %v, dials %d; want a dial: %v", err, dialed, tt.wantDial)
			}
		})
	}
}
