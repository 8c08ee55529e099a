package resolver

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/resolver/ports"
	"elasti.dev/elasti/internal/resolver/resolvertest"
)

// fallbackProxy is a spec.proxy with a fallback to websvc-static after the
// given time.
func fallbackProxy(after string) *elastiv1alpha1.ProxySpec {
	return &elastiv1alpha1.ProxySpec{HoldTimeout: "1m", Fallback: &elastiv1alpha1.Fallback{Service: "websvc-static", After: after}}
}

func (h *harness) fallbackCount(es, reason string) float64 {
	return testutil.ToFloat64(h.r.metrics.Fallback.WithLabelValues("ns", es, reason))
}

// post sends a POST with body on c, on a keep-alive connection.
func post(c *http.Client, url, body string) result {
	resp, err := c.Post(url, "text/plain", strings.NewReader(body))
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return result{status: resp.StatusCode, body: string(b), header: resp.Header, err: err}
}

// A held request goes to the fallback Service once its hold has lasted
// fallback.after; later requests go there at once, without being held; and
// once the target is ready, new requests reach the target again. HTTP/1.1
// keep-alive clients, with and without a body.
func TestFallbackAfterDeadlineHTTP(t *testing.T) {
	h := newHarness(t, 1, nil)
	target, fallback := newRecordingUpstream(t), newRecordingUpstream(t)
	h.ready("websvc-static", "websvc-static-abc", "http", fallback.addr())
	h.mapPort("web", "websvc", fallbackProxy("300ms"), h.proxyPort(0, "http", ""))
	c := h.client()
	url := "http://" + h.addr(0) + "/order"

	start := time.Now()
	r := post(c, url, "item=42")
	if r.err != nil || r.status != http.StatusOK || r.body != "POST 7" {
		t.Fatalf("held POST: status %d body %q err %v; want 200 from the fallback", r.status, r.body, r.err)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Fatalf("the POST went to the fallback after %s; it must be held for fallback.after (300ms) first", waited)
	}
	if got := fallback.requests(); len(got) != 1 || got[0].body != "item=42" {
		t.Fatalf("fallback executed %+v; want the POST once with its body", got)
	}
	if h.act.count("ns/web") == 0 {
		t.Fatal("no activation call: the target must still be woken while the fallback serves")
	}
	if got := h.fallbackCount("web", FallbackDeadline); got != 1 {
		t.Fatalf("fallback_total{reason=deadline} = %v, want 1", got)
	}

	// The next request goes to the fallback at once: the Service is in
	// fallback until its target has been ready.
	start = time.Now()
	r = get(c, context.Background(), url, nil)
	if r.err != nil || r.status != http.StatusOK || r.body != "GET 0" {
		t.Fatalf("GET in fallback: status %d body %q err %v", r.status, r.body, r.err)
	}
	if waited := time.Since(start); waited >= 300*time.Millisecond {
		t.Fatalf("the GET waited %s; in fallback it must not be held again", waited)
	}
	if got := h.fallbackCount("web", FallbackActive); got != 1 {
		t.Fatalf("fallback_total{reason=active} = %v, want 1", got)
	}
	if len(target.requests()) != 0 {
		t.Fatalf("the target executed %+v before it was ready", target.requests())
	}

	// The target is ready: new requests reach it, and the fallback is left.
	h.ready("websvc", "websvc-abc", "http", target.addr())
	for range 3 {
		if r := post(c, url, "item=7"); r.err != nil || r.status != http.StatusOK {
			t.Fatalf("POST once ready: status %d err %v", r.status, r.err)
		}
	}
	if got := len(target.requests()); got != 3 {
		t.Fatalf("target executed %d requests once ready, want 3", got)
	}
	if got := len(fallback.requests()); got != 2 {
		t.Fatalf("fallback executed %d requests in all, want 2: none once the target is ready", got)
	}
	// The target sleeps again: the fallback episode ended with the wake,
	// so a new request is held for fallback.after again.
	h.endpoints.Delete("ns", "websvc-abc")
	start = time.Now()
	if r := get(c, context.Background(), url, nil); r.err != nil || r.status != http.StatusOK {
		t.Fatalf("GET after the next sleep: status %d err %v", r.status, r.err)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Fatalf("after the target had been ready, a new request went to the fallback after %s; it must be held for fallback.after again", waited)
	}
}

// A fallback Service without a ready endpoint is never sent anything:
// requests stay held, and the target's first ready endpoint releases them.
func TestFallbackWithoutEndpointKeepsHolding(t *testing.T) {
	h := newHarness(t, 1, nil)
	target := newRecordingUpstream(t)
	h.mapPort("web", "websvc", fallbackProxy("100ms"), h.proxyPort(0, "http", ""))
	// The fallback's slice lists an endpoint that is not ready.
	h.endpoints.Update(resolvertest.Slice("ns", "websvc-static-abc", "websvc-static", "http", 8080, resolvertest.Endpoint{IP: "127.0.0.1"}))

	done := make(chan result, 1)
	go func() { done <- post(h.client(), "http://"+h.addr(0)+"/order", "item=1") }()
	h.eventually("the request is held", func() bool { return h.held("web") == 1 })
	select {
	case r := <-done:
		t.Fatalf("request answered %d %q without a ready fallback endpoint; it must stay held", r.status, r.body)
	case <-time.After(500 * time.Millisecond): // five times fallback.after
	}
	h.ready("websvc", "websvc-abc", "http", target.addr())
	r := <-done
	if r.err != nil || r.status != http.StatusOK || r.body != "POST 6" {
		t.Fatalf("held POST: status %d body %q err %v; want 200 from the target", r.status, r.body, r.err)
	}
	if got := h.fallbackCount("web", FallbackDeadline) + h.fallbackCount("web", FallbackActive); got != 0 {
		t.Fatalf("fallback_total = %v, want 0", got)
	}
}

// A held request whose fallback gets its first ready endpoint after the
// deadline goes there on that endpoint event.
func TestFallbackEndpointArrivingLateReleasesHeld(t *testing.T) {
	h := newHarness(t, 1, nil)
	fallback := newRecordingUpstream(t)
	h.mapPort("web", "websvc", fallbackProxy("50ms"), h.proxyPort(0, "http", ""))
	done := make(chan result, 1)
	go func() { done <- get(h.client(), context.Background(), "http://"+h.addr(0)+"/", nil) }()
	h.eventually("the request is held", func() bool { return h.held("web") == 1 })
	time.Sleep(200 * time.Millisecond) // past fallback.after, with no fallback endpoint
	h.ready("websvc-static", "websvc-static-abc", "http", fallback.addr())
	if r := <-done; r.err != nil || r.status != http.StatusOK {
		t.Fatalf("status %d err %v; want 200 from the fallback", r.status, r.err)
	}
	if got := len(fallback.requests()); got != 1 {
		t.Fatalf("fallback executed %d requests, want 1", got)
	}
}

// When the operator says the wake failed (FallbackActive=True), held
// requests go to the fallback at once, without waiting for fallback.after,
// and so do new ones; gRPC-style h2c too.
func TestFallbackWhenOperatorSaysWakeFailed(t *testing.T) {
	h := newHarness(t, 1, nil)
	fallback := newRecordingUpstream(t)
	h.ready("websvc-static", "websvc-static-abc", "http", fallback.addr())
	es := resolvertest.ElastiService("ns", "web", "websvc", fallbackProxy("1h"), h.proxyPort(0, "http", ""))
	es.Spec.Proxy.HoldTimeout = "2h" // only the test's own bound applies
	h.ports.Set(es)

	done := make(chan result, 1)
	go func() { done <- get(h.client(), context.Background(), "http://"+h.addr(0)+"/", nil) }()
	h.eventually("the request is held", func() bool { return h.held("web") == 1 })

	failed := es.DeepCopy()
	meta.SetStatusCondition(&failed.Status.Conditions, metav1.Condition{
		Type: elastiv1alpha1.ConditionFallbackActive, Status: metav1.ConditionTrue, Reason: "PodsUnschedulable", Message: "0/3 nodes are available",
	})
	h.ports.Set(failed)
	if r := <-done; r.err != nil || r.status != http.StatusOK {
		t.Fatalf("held GET: status %d err %v; want 200 from the fallback once the operator says the wake failed", r.status, r.err)
	}
	r := get(h2cClient(), context.Background(), "http://"+h.addr(0)+"/", nil)
	if r.err != nil || r.status != http.StatusOK {
		t.Fatalf("new h2c GET: status %d err %v", r.status, r.err)
	}
	if got := fallback.requests(); len(got) != 2 || got[1].proto != "HTTP/2.0" {
		t.Fatalf("fallback executed %+v; want both requests, the second over HTTP/2", got)
	}
	if got := h.fallbackCount("web", FallbackActive); got != 2 {
		t.Fatalf("fallback_total{reason=active} = %v, want 2", got)
	}
}

// A held TCP connection goes to the fallback after fallback.after, with the
// bytes it sent while held; once the target is ready, new connections reach
// the target.
func TestFallbackTCP(t *testing.T) {
	h := newHarness(t, 1, nil)
	target, fallback := newTCPRecorder(t), newTCPRecorder(t)
	h.ready("dbsvc-static", "dbsvc-static-abc", "", fallback.addr())
	h.ports.Set(resolvertest.ElastiService("ns", "db", "dbsvc",
		&elastiv1alpha1.ProxySpec{Fallback: &elastiv1alpha1.Fallback{Service: "dbsvc-static", After: "200ms"}},
		elastiv1alpha1.ProxyPort{Port: 5432, Protocol: "TCP", ResolverPort: int32(h.base)}))

	c := dialRaw(t, h.addr(0))
	if _, err := c.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "hello\n" {
		t.Fatalf("echo through the fallback: %q, %v", line, err)
	}
	if fallback.connections() != 1 || target.connections() != 0 {
		t.Fatalf("connections: fallback %d target %d; want 1 and 0", fallback.connections(), target.connections())
	}

	h.ready("dbsvc", "dbsvc-abc", "", target.addr())
	c2 := dialRaw(t, h.addr(0))
	if _, err := c2.Write([]byte("again\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(c2).ReadString('\n'); err != nil || line != "again\n" {
		t.Fatalf("echo through the target: %q, %v", line, err)
	}
	if target.connections() != 1 {
		t.Fatalf("target connections %d, want 1 once ready", target.connections())
	}
}

// The fallback Service's slices are followed while the ElastiService
// naming it has a port: its endpoints can only be known if they are
// watched.
func TestFallbackServiceSlicesFollowed(t *testing.T) {
	pm := ports.NewPortMap()
	pm.Set(resolvertest.ElastiService("ns", "web", "websvc", fallbackProxy("30s"), elastiv1alpha1.ProxyPort{Name: "http", Port: 80, Protocol: "TCP", ResolverPort: 20001}))
	got, _ := pm.Services()
	for _, svc := range []string{"websvc", "websvc-static"} {
		if _, ok := got[types.NamespacedName{Namespace: "ns", Name: svc}]; !ok {
			t.Errorf("services() = %v, want %s followed", got, svc)
		}
	}
}
