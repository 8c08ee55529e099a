package resolver

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// TestColdStartMetricCountsServedHoldsOnly: a held request that the woken
// target serves is observed in elasti_resolver_cold_start_seconds; one
// whose hold timed out is in the hold duration only.
func TestColdStartMetricCountsServedHoldsOnly(t *testing.T) {
	h := newHarness(t, 2, nil)
	up := echoUpstream(t)
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	h.mapPort("api", "apisvc", &elastiv1alpha1.ProxySpec{HoldTimeout: "300ms"}, h.proxyPort(1, "http", ""))

	if r := get(h.client(), context.Background(), "http://"+h.addr(1)+"/", nil); r.status != http.StatusGatewayTimeout {
		t.Fatalf("status %d err %v, want 504", r.status, r.err)
	}
	h.servedAfterHold(t, up, 0)
	h.eventually("the hold is observed", func() bool { return testutil.CollectAndCount(h.r.metrics.HoldDuration) == 2 })
	if n := testutil.CollectAndCount(h.r.metrics.ColdStart); n != 1 {
		t.Errorf("%d cold-start series, want 1 (ns/web only)", n)
	}
	if n := testutil.CollectAndCount(h.r.metrics.ColdStart.MustCurryWith(map[string]string{"namespace": "ns", "elastiservice": "web"})); n != 1 {
		t.Errorf("no cold-start series for ns/web")
	}
}

// TestForwardLatencyExcludesTheHold: elasti_resolver_forward_latency_seconds
// counts the pod's answer time of a held request and not its hold.
func TestForwardLatencyExcludesTheHold(t *testing.T) {
	const podTime, hold = 50 * time.Millisecond, 400 * time.Millisecond
	h := newHarness(t, 1, nil)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(podTime)
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(up.Close)
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	h.servedAfterHold(t, up, hold)
	var m dto.Metric
	if err := h.r.metrics.ForwardLatency.WithLabelValues("ns", "web").(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	hist := m.GetHistogram()
	if hist.GetSampleCount() != 1 {
		t.Fatalf("%d forward latency samples, want 1", hist.GetSampleCount())
	}
	if got := time.Duration(hist.GetSampleSum() * float64(time.Second)); got < podTime || got >= hold {
		t.Errorf("forward latency %v, want the pod's %v and not the %v hold", got, podTime, hold)
	}
}

// servedAfterHold sends a GET to the first port, mapped to ElastiService web
// of Service websvc, and requires that it is held and, once websvc gets up
// as its ready endpoint hold later, answered with a 200.
func (h *harness) servedAfterHold(t *testing.T, up *httptest.Server, hold time.Duration) {
	t.Helper()
	done := make(chan result, 1)
	go func() { done <- get(h.client(), context.Background(), "http://"+h.addr(0)+"/", nil) }()
	h.eventually("the request is held", func() bool { return h.held("web") == 1 })
	time.Sleep(hold)
	h.ready("websvc", "websvc-abc", "http", upstreamAddr(up))
	select {
	case r := <-done:
		if r.err != nil || r.status != http.StatusOK {
			t.Fatalf("status %d err %v, want 200", r.status, r.err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("held request was not released")
	}
}
