//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/metricsapi"
	"elasti.dev/elasti/internal/testenv/estest"
	"elasti.dev/elasti/test/cluster"
)

// externalMetricsAPI is held by the tests that need external.metrics.k8s.io
// to be one server's for their whole run: TestHPAMinReplicasZeroWithElasti
// reads the Prometheus adapter's, TestHPAOnElastiMetrics registers
// Elasti's. The cluster has one APIService for the group.
var externalMetricsAPI sync.Mutex

// useExternalMetrics holds externalMetricsAPI until the test ends.
func useExternalMetrics(t *testing.T) {
	t.Helper()
	externalMetricsAPI.Lock()
	t.Cleanup(externalMetricsAPI.Unlock)
}

// registerElastiMetricsAPI makes Elasti's operator (installed with
// config/metrics-api) the server of external.metrics.k8s.io, as a user who
// applies config/metrics-api/apiservice.yaml does, until the test ends; it
// then registers the previous server again. Hold externalMetricsAPI.
func registerElastiMetricsAPI(t *testing.T, e *Env) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	restore, err := e.Cluster.TakeAPIService(ctx, cluster.ExternalMetricsAPIService,
		filepath.Join(e.Cluster.RepoRoot, "config", "metrics-api", "apiservice.yaml"), "elasti-metrics-api")
	if restore != nil {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if err := restore(ctx); err != nil {
				t.Errorf("give external.metrics.k8s.io back: %v", err)
			}
		})
	}
	if err != nil {
		t.Fatalf("register Elasti's metrics API: %v", err)
	}
}

// TestHPAOnElastiMetrics (docs/hpa.md#elastis-own-metrics): an HPA at
// minReplicas 0 whose one metric is Elasti's elasti_requests_per_second,
// served by the operator through the aggregation layer, with Prometheus and
// its adapter out of the path (external.metrics.k8s.io is Elasti's for the
// test). The ElastiService names the HPA and has one podMetrics trigger
// (the app's own counter, scraped by the operator), which is also where the
// rate comes from while the target serves. Over five bursts of keep-alive
// POSTs:
//
//   - each burst wakes the target once, and under it the HPA scales the
//     target to 2 or more replicas on Elasti's rate; in the last, the
//     target is in the cooldown after its wake (900 s, the default), when
//     Elasti decides no sleep but still measures the rate;
//   - after each burst the target goes back to zero, once;
//
// and not one POST fails or runs twice.
func TestHPAOnElastiMetrics(t *testing.T) {
	t.Parallel()
	e := Get(t)
	l := newLedger(t)
	ns, ip := demoApp(t, e, l.mount)
	url := httpURL(ip, DemoHTTPPort)
	// The demo app creates its counter's series on its first request.
	answers(t, e, url, 30*time.Second)
	useExternalMetrics(t)
	registerElastiMetricsAPI(t, e)
	ctx := context.Background()
	hpas := e.Clientset.AutoscalingV2().HorizontalPodAutoscalers(ns)

	e.Create(t, estest.New(ns, "demoapp", estest.Cooldown(5),
		estest.PodMetrics("http_requests_total", DemoHTTPTarget, "0.01"), estest.HPA("demoapp")))
	// 4 requests a second per replica, up to 3, down after 20 s of
	// stable recommendations.
	e.Create(t, ZeroHPA(ns, "demoapp", 0, 3, ElastiRate("demoapp"), "4", 20))
	// The HPA reads Elasti's metric (no FailedGetExternalMetric), and
	// Elasti holds its floor at 1 for the last step.
	Eventually(t, 2*time.Minute, time.Second, func(ctx context.Context) error {
		h, err := hpas.Get(ctx, "demoapp", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas != 1 || h.Annotations[contract.AnnotationHPAMinReplicas] != "0" {
			return fmt.Errorf("HPA minReplicas %v, annotations %v: Elasti has not taken the last step over", h.Spec.MinReplicas, h.Annotations)
		}
		for _, m := range h.Status.CurrentMetrics {
			if m.External != nil && m.External.Metric.Name == metricsapi.MetricRate {
				return nil
			}
		}
		for _, c := range h.Status.Conditions {
			if c.Type == autoscalingv2.ScalingActive {
				return fmt.Errorf("the HPA has no reading of %s yet: ScalingActive %s, %s: %s", metricsapi.MetricRate, c.Status, c.Reason, c.Message)
			}
		}
		return fmt.Errorf("the HPA has no reading of %s yet", metricsapi.MetricRate)
	})
	if v, err := ElastiMetric(ctx, e.Cluster, ns, "demoapp", metricsapi.MetricAwake); err != nil || v != 1 {
		t.Errorf("%s while the target serves: %v, %v; want 1", metricsapi.MetricAwake, v, err)
	}
	t.Log("the HPA reads Elasti's request rate; Elasti raised its floor to 1")

	timeline := recordReplicas(t, e, ns, "demoapp")
	start := time.Now()
	e.WaitAsleep(t, ns, "demoapp", 5*time.Minute)
	t.Logf("asleep %s after the HPA was created", time.Since(start).Round(time.Second))
	for _, m := range []string{metricsapi.MetricAwake, metricsapi.MetricHeld, metricsapi.MetricRate} {
		if v, err := ElastiMetric(ctx, e.Cluster, ns, "demoapp", m); err != nil || v != 0 {
			t.Errorf("%s at rest: %v, %v; want 0", m, v, err)
		}
	}

	// Bursts at zero: 6 clients, 5 POSTs a second each (30 a second: the
	// HPA wants 8 replicas and gets its maximum, 3), until the target has
	// 2 or more replicas and for 10 s after; then quiet until it sleeps.
	// Five bursts, each with its sleep about 1.5 minutes: bursts over
	// about 8 minutes.
	const bursts = 5
	var ok, bad []postResult
	for i := 1; i <= bursts; i++ {
		// The last burst comes with the default 900 s cooldown: it wakes
		// the target into a cooldown, when no sleep is decided, and the
		// HPA must still get Elasti's rate. The others keep 5 s so that
		// the test is not spent waiting for sleeps.
		last := i == bursts
		if last {
			setCooldown(t, e, ns, "demoapp", 900)
		}
		t0 := time.Now()
		burst := startKeepAliveFleet(e, url, 6, 200*time.Millisecond, 6*5*180)
		Eventually(t, 3*time.Minute, time.Second, func(ctx context.Context) error {
			n, _, err := e.Replicas(ctx, ns, "demoapp")
			if err == nil && n < 2 {
				err = fmt.Errorf("burst %d: the target has %d replicas under load, want 2 or more", i, n)
			}
			return err
		})
		rate, err := ElastiMetric(ctx, e.Cluster, ns, "demoapp", metricsapi.MetricRate)
		if err != nil || rate <= 0 {
			t.Errorf("burst %d: %s under load: %v, %v; want more than 0", i, metricsapi.MetricRate, rate, err)
		}
		scaledOut := time.Since(t0)
		time.Sleep(10 * time.Second)
		burst.finish()
		if last {
			setCooldown(t, e, ns, "demoapp", 5)
		}
		ok = append(ok, burst.ok...)
		bad = append(bad, burst.bad...)
		t.Logf("burst %d at %s: 2+ replicas after %s (Elasti's rate then %.1f/s), %d POSTs",
			i, t0.Sub(start).Round(time.Second), scaledOut.Round(time.Second), rate, len(burst.ok)+len(burst.bad))
		e.WaitAsleep(t, ns, "demoapp", 5*time.Minute)
	}
	changes := timeline.finish()
	t.Logf("replica timeline over %s: %s", time.Since(start).Round(time.Second), timeline)

	// One sleep before the bursts, then one wake and one sleep per burst.
	if sleeps, wakes := sleepsAndWakes(changes); sleeps != bursts+1 || wakes != bursts {
		t.Errorf("%d sleeps and %d wakes for %d bursts, want %d and %d: %s", sleeps, wakes, bursts, bursts+1, bursts, timeline)
	}
	t.Logf("%d POSTs in all: %d ok, %d failed", len(ok)+len(bad), len(ok), len(bad))
	for _, r := range bad {
		t.Errorf("POST sent %s into the test failed: %v", r.at.Sub(start).Round(time.Millisecond), r.err)
	}
	checkLedger(t, t.Errorf, l, ok)
}

// setCooldown sets the ElastiService's cooldownPeriod.
func setCooldown(t *testing.T, e *Env, ns, name string, seconds int32) {
	t.Helper()
	e.UpdateElastiService(t, ns, name, func(es *elastiv1alpha1.ElastiService) { es.Spec.CooldownPeriod = seconds })
}
