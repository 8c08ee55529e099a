//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/api/meta"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/controller/plan"
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
	t.Parallel()
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

	// Switch the trigger only once Prometheus has scraped the open socket:
	// a new pod's first scrape can come a few seconds after the socket
	// opened, and until then the query reads 0 (idle).
	Eventually(t, time.Minute, 500*time.Millisecond, func(ctx context.Context) error {
		v, err := e.PromValue(ctx, OpenConnectionsQuery(ns, "demoapp"))
		if err == nil && v < 1 {
			err = fmt.Errorf("Prometheus does not see the open WebSocket yet (query reads %v)", v)
		}
		return err
	})
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
	if c := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionIdle); c == nil || c.Reason != plan.ReasonTriggerActive {
		t.Fatalf("Idle condition %+v, want reason %s (the open WebSocket counted)", c, plan.ReasonTriggerActive)
	}
	if err := echo("still open"); err != nil {
		t.Fatalf("the WebSocket was cut while it kept the app awake: %v", err)
	}

	conn.Close()
	e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)
}

// PromValue evaluates query on the cluster's Prometheus now and returns its
// single value (an error for an empty or multi-sample result).
func (e *Env) PromValue(ctx context.Context, query string) (float64, error) {
	c, err := promapi.NewClient(promapi.Config{
		Address:      e.Cluster.PrometheusURL(),
		RoundTripper: &http.Transport{DialContext: e.Dialer.DialContext, Proxy: nil},
	})
	if err != nil {
		return 0, err
	}
	v, _, _, err := promv1.NewAPI(c).Query(ctx, query, time.Now())
	if err != nil {
		return 0, err
	}
	vec, ok := v.(model.Vector)
	if !ok || len(vec) != 1 {
		return 0, fmt.Errorf("query %s: want one sample, got %s", query, v)
	}
	return float64(vec[0].Value), nil
}
