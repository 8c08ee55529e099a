package route

import (
	"context"
	"testing"
)

func TestRouteFromContext(t *testing.T) {
	if _, ok := From(context.Background()); ok {
		t.Fatal("From found a route in a bare context")
	}
	want := Route{Target: Target{PortName: "http"}, Port: 20001, Mapped: true}
	got, ok := From(With(context.Background(), want))
	if !ok || got.Target != want.Target || got.Port != want.Port || got.Mapped != want.Mapped {
		t.Fatalf("From = %+v, %v; want %+v, true", got, ok, want)
	}
}
