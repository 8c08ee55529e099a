package resolver

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

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
	done := make(chan result, 1)
	go func() { done <- get(h.client(), context.Background(), "http://"+h.addr(0)+"/", nil) }()
	h.eventually("the request is held", func() bool { return h.held("web") == 1 })
	h.ready("websvc", "websvc-abc", "http", upstreamAddr(up))
	select {
	case r := <-done:
		if r.err != nil || r.status != http.StatusOK {
			t.Fatalf("status %d err %v, want 200", r.status, r.err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("held request was not released")
	}
	h.eventually("the hold is observed", func() bool { return testutil.CollectAndCount(h.r.metrics.HoldDuration) == 2 })
	if n := testutil.CollectAndCount(h.r.metrics.ColdStart); n != 1 {
		t.Errorf("%d cold-start series, want 1 (ns/web only)", n)
	}
	if n := testutil.CollectAndCount(h.r.metrics.ColdStart.MustCurryWith(map[string]string{"namespace": "ns", "elastiservice": "web"})); n != 1 {
		t.Errorf("no cold-start series for ns/web")
	}
}
