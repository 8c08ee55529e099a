package resolver

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/resolver/resolvertest"
)

// getStepping makes a request on a fresh connection while moving clk on by
// the unmapped-port wait every few milliseconds, so that a connection
// waiting on the fake clock for a mapping gives up.
func (h *harness) getStepping(clk *clocktesting.FakeClock, url string) result {
	done := make(chan result, 1)
	go func() { done <- get(h.client(), context.Background(), url, nil) }()
	for {
		select {
		case r := <-done:
			return r
		case <-time.After(5 * time.Millisecond):
			clk.Step(h.r.opts.Ports.UnmappedWait)
		}
	}
}

// TestPortServedOnlyInProxyMode: a resolver port leads to its Service only
// while the ElastiService is in proxy mode, plus the linger after it goes
// back to serve mode; at any other time it is unmapped, so the resolver is
// no way around a NetworkPolicy that guards the Service's pods.
func TestPortServedOnlyInProxyMode(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	h := newHarness(t, 1, func(o *Options) {
		o.Clock = clk
		o.Ports.ReleasedPortLinger = 30 * time.Second
	})
	up := echoUpstream(t)
	h.ready("websvc", "websvc-abc", "http", upstreamAddr(up))
	inModeWeb := func(mode elastiv1alpha1.Mode) *elastiv1alpha1.ElastiService {
		return resolvertest.InMode(resolvertest.ElastiService("ns", "web", "websvc", nil, h.proxyPort(0, "http", "")), mode)
	}
	url := "http://" + h.addr(0) + "/"
	unmapped := func(when string, r result) {
		t.Helper()
		if r.err != nil || r.status != http.StatusNotFound || !strings.Contains(r.body, "not mapped") {
			t.Fatalf("%s: status %d body %q err %v; want the unmapped-port 404", when, r.status, r.body, r.err)
		}
	}
	served := func(when string, r result) {
		t.Helper()
		if r.err != nil || r.status != http.StatusOK {
			t.Fatalf("%s: status %d body %q err %v; want the pod's answer", when, r.status, r.body, r.err)
		}
	}

	h.ports.Set(inModeWeb(elastiv1alpha1.ModeServe))
	unmapped("in serve mode", h.getStepping(clk, url))

	h.ports.Set(inModeWeb(elastiv1alpha1.ModeProxy))
	served("in proxy mode", get(h.client(), context.Background(), url, nil))

	// Back to serve: routing still converging, so the port lingers.
	h.ports.Set(inModeWeb(elastiv1alpha1.ModeServe))
	served("during the linger", get(h.client(), context.Background(), url, nil))
	clk.Step(29 * time.Second)
	served("just before the linger ends", get(h.client(), context.Background(), url, nil))

	clk.Step(time.Second)
	unmapped("after the linger", h.getStepping(clk, url))
}

// TestMetricSeriesDeletedWithElastiService: every series of a deleted
// ElastiService goes once its ports have stopped lingering (traffic in the
// linger is still counted under its name); other ElastiServices keep
// theirs.
func TestMetricSeriesDeletedWithElastiService(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	h := newHarness(t, 2, func(o *Options) { o.Clock = clk })
	up := echoUpstream(t)
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	h.mapPort("api", "apisvc", nil, h.proxyPort(1, "http", ""))
	h.ready("websvc", "websvc-abc", "http", upstreamAddr(up))
	h.ready("apisvc", "apisvc-abc", "http", upstreamAddr(up))
	for i := range 2 {
		if r := get(h.client(), context.Background(), "http://"+h.addr(i)+"/", nil); r.err != nil || r.status != http.StatusOK {
			t.Fatalf("request on port %d: status %d err %v", i, r.status, r.err)
		}
	}
	h.eventually("both traffic reports are counted", func() bool {
		return testutil.CollectAndCount(h.r.metrics.Activations) == 2
	})
	// A series in every per-ElastiService metric, for both.
	m := h.r.metrics
	for _, es := range []string{"web", "api"} {
		m.reject(types.NamespacedName{Namespace: "ns", Name: es}, ReasonQueueFull)
		m.TimedOut.WithLabelValues("ns", es).Inc()
		m.Held.WithLabelValues("ns", es).Set(0)
		m.HoldDuration.WithLabelValues("ns", es).Observe(1)
		m.ColdStart.WithLabelValues("ns", es).Observe(1)
		m.StaticResponses.WithLabelValues("ns", es, "healthz").Inc()
	}
	vecs := map[string]prometheus.Collector{
		"held": m.Held, "hold_duration": m.HoldDuration, "cold_start": m.ColdStart, "forwarded": m.Forwarded,
		"rejected": m.Rejected, "timed_out": m.TimedOut, "activations": m.Activations,
		"static_responses": m.StaticResponses,
	}
	counts := func(want int) bool {
		for _, c := range vecs {
			if testutil.CollectAndCount(c) != want {
				return false
			}
		}
		return true
	}
	if !counts(2) {
		t.Fatal("the fixture lacks a series")
	}

	h.ports.Delete(types.NamespacedName{Namespace: "ns", Name: "web"})
	if !counts(2) {
		t.Error("series deleted while the ElastiService's port still lingers")
	}
	clk.Step(DefaultReleasedPortLinger)
	h.eventually("web's series are deleted once its port stopped lingering", func() bool { return counts(1) })
	for name, c := range vecs {
		if n := testutil.CollectAndCount(c); n != 1 {
			t.Errorf("%s: %d series left, want api's only", name, n)
		}
	}
	if v := testutil.ToFloat64(m.Forwarded.WithLabelValues("ns", "api")); v != 1 {
		t.Errorf("api's forwarded count = %v, want 1", v)
	}
}
