//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/apimachinery/pkg/api/meta"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/controller"
)

// OpenConnectionsQuery is docs/configuration.md's recipe for a target that
// must stay awake while a connection is open: the request rate plus the
// highest count of open WebSockets over the last 10 s (the demo app's
// websocket_connections_open gauge), each term defaulting to 0.
func OpenConnectionsQuery(ns, app string) string {
	return fmt.Sprintf(`(sum(rate(http_requests_total{namespace=%q,app=%q}[10s])) or vector(0))`+
		` + (sum(max_over_time(websocket_connections_open{namespace=%q,app=%q}[10s])) or vector(0))`, ns, app, ns, app)
}

// TestOpenWebSocketKeepsAwakeWithConnectionQuery: the triggers alone decide
// when a target sleeps, so an open WebSocket that sends little does not
// keep it awake by itself (a request-rate query reads it as idle, and the
// socket is cut with the pod). With the documented recipe, a query that
// also counts open connections, a WebSocket held open through the Service
// keeps the demo app up for several cooldowns, and the app sleeps once
// the socket closes.
func TestOpenWebSocketKeepsAwakeWithConnectionQuery(t *testing.T) {
	e := Get(t)
	ns, _ := sleepyDemoApp(t, e, func(string) string { return BusyQuery })
	url := "ws://" + net.JoinHostPort("demoapp."+ns+".svc.cluster.local", fmt.Sprint(DemoHTTPPort)) + "/ws"
	d := websocket.Dialer{NetDialContext: e.Dialer.DialContext, HandshakeTimeout: 30 * time.Second}
	var conn *websocket.Conn
	Eventually(t, time.Minute, 500*time.Millisecond, func(ctx context.Context) error {
		c, _, err := d.DialContext(ctx, url, nil)
		conn = c
		return err
	})
	defer conn.Close()
	echo := func(msg string) error {
		_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if err := conn.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
			return err
		}
		_, got, err := conn.ReadMessage()
		if err == nil && string(got) != msg {
			err = fmt.Errorf("echo returned %q, want %q", got, msg)
		}
		return err
	}
	if err := echo("open"); err != nil {
		t.Fatal(err)
	}

	e.SetQuery(t, ns, "demoapp", OpenConnectionsQuery(ns, "demoapp"))
	// Cooldown 5 s, polling 1 s, grace 2 s: 25 s are several chances to
	// sleep. The query must have been evaluated as busy meanwhile, not
	// merely skipped.
	StableFor(t, 25*time.Second, time.Second, func(ctx context.Context) error {
		n, _, err := e.Replicas(ctx, ns, "demoapp")
		if err == nil && n == 0 {
			err = fmt.Errorf("scaled to zero while a WebSocket is open")
		}
		return err
	})
	es, err := e.GetElastiService(context.Background(), ns, "demoapp")
	if err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionIdle); c == nil || c.Reason != controller.ReasonTriggerActive {
		t.Fatalf("Idle condition %+v, want reason %s (the open WebSocket counted)", c, controller.ReasonTriggerActive)
	}
	if err := echo("still open"); err != nil {
		t.Fatalf("the WebSocket was cut while it kept the app awake: %v", err)
	}

	conn.Close()
	e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)
}
