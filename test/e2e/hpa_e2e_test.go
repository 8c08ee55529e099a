//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/test/cluster"
)

// requestRateHPA is an HPA on the cluster's External metric
// http_requests_per_second (the demo app's request rate over one minute,
// through Prometheus and the Prometheus adapter) with a target of 4 requests
// a second per replica, up to 3 replicas, and minReplicas min. It scales down
// after 20 s of stable recommendations instead of the default 5 minutes, so
// that the test sees it within a few minutes.
func requestRateHPA(ns, app string, min int32) *autoscalingv2.HorizontalPodAutoscaler {
	return ZeroHPA(ns, app, min, 3, autoscalingv2.MetricIdentifier{
		Name:     cluster.ExternalRequestRate,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
	}, "4", 20)
}

// TestHPAMinReplicasZeroWithElasti: an HPA at minReplicas 0 on a real
// External metric, and an ElastiService naming it, without triggers of its
// own. Elasti takes the last step (docs/hpa.md): it raises the HPA's floor to
// 1, and puts the target to sleep, proxy first, once the HPA's metric reads
// zero. Over a load and two bursts:
//
//   - under load the HPA scales the target 1 → N, and Elasti leaves it be;
//   - once the traffic stops the target goes to zero, once;
//   - each burst of traffic at zero wakes it once, at Elasti's cold start,
//     and the HPA never takes it back to zero while requests are held;
//
// and not one keep-alive POST fails or runs twice.
func TestHPAMinReplicasZeroWithElasti(t *testing.T) {
	t.Parallel()
	e := Get(t)
	l := newLedger(t)
	ns, ip := demoApp(t, e, l.mount)
	url := httpURL(ip, DemoHTTPPort)
	answers(t, e, url, 30*time.Second)
	// The Prometheus adapter's external.metrics.k8s.io, not Elasti's.
	useExternalMetrics(t)
	ctx := context.Background()
	hpas := e.Clientset.AutoscalingV2().HorizontalPodAutoscalers(ns)

	e.Create(t, requestRateHPA(ns, "demoapp", 0))
	es := e.ElastiServiceFor(ns, "demoapp", IdleQuery)
	es.Spec.Triggers = nil // the HPA's metric alone says when the target is idle
	es.Spec.Autoscaler = &elastiv1alpha1.AutoscalerRef{Type: elastiv1alpha1.AutoscalerHPA, Name: "demoapp"}
	e.Create(t, es)
	Eventually(t, time.Minute, 200*time.Millisecond, func(ctx context.Context) error {
		h, err := hpas.Get(ctx, "demoapp", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas != 1 || h.Annotations[contract.AnnotationHPAMinReplicas] != "0" {
			return fmt.Errorf("HPA minReplicas %v, annotations %v: Elasti has not taken the last step over", h.Spec.MinReplicas, h.Annotations)
		}
		return nil
	})
	t.Log("Elasti raised the HPA's floor to 1 and recorded the user's 0")

	timeline := recordReplicas(t, e, ns, "demoapp")
	start := time.Now()

	// Load: 6 keep-alive clients, 5 POSTs a second each (30 a second, the
	// HPA wants 8 replicas and gets its maximum, 3), for at most 90 s.
	load := startKeepAliveFleet(e, url, 6, 200*time.Millisecond, 6*5*90)
	Eventually(t, 3*time.Minute, time.Second, func(ctx context.Context) error {
		n, _, err := e.Replicas(ctx, ns, "demoapp")
		if err == nil && n < 2 {
			err = fmt.Errorf("the HPA has the target at %d replicas under load, want 2 or more", n)
		}
		return err
	})
	t.Logf("under load the HPA scaled the target to 2+ replicas (%s): %s", time.Since(start).Round(time.Second), timeline)
	time.Sleep(10 * time.Second)
	load.finish()

	// Quiet: the rate over one minute falls to zero, the HPA comes back
	// to its floor, and Elasti puts the target to sleep.
	e.WaitAsleep(t, ns, "demoapp", 5*time.Minute)
	t.Logf("asleep %s after the load stopped", time.Since(start).Round(time.Second))

	// Bursts at zero: 3 clients, 5 POSTs a second each, for 15 s, then
	// quiet until the target sleeps again. Two bursts show that each one
	// wakes the target once and is followed by one sleep. The test used to
	// send bursts until ten minutes had passed (three or four); the minutes
	// were not the point, and among the parallel tests it was the longest by
	// far. Each burst takes about two minutes, most of it the one-minute rate
	// of the HPA's metric falling back to zero.
	const bursts = 2
	var bad []postResult
	var ok []postResult
	ok = append(ok, load.ok...)
	bad = append(bad, load.bad...)
	for i := 1; i <= bursts; i++ {
		t0 := time.Now()
		first := postOnce(ctx, e.LongHTTPClient(), url)
		coldStart := time.Since(t0)
		if first.err != nil {
			bad = append(bad, first)
		} else {
			ok = append(ok, first)
		}
		burst := startKeepAliveFleet(e, url, 3, 200*time.Millisecond, 3*5*15)
		time.Sleep(15 * time.Second)
		burst.finish()
		ok = append(ok, burst.ok...)
		bad = append(bad, burst.bad...)
		t.Logf("burst %d at %s: first request answered in %s (woken from zero), %d POSTs",
			i, t0.Sub(start).Round(time.Second), coldStart.Round(time.Millisecond), len(burst.ok)+len(burst.bad)+1)
		e.WaitAsleep(t, ns, "demoapp", 5*time.Minute)
	}
	changes := timeline.finish()
	t.Logf("replica timeline over %s: %s", time.Since(start).Round(time.Second), timeline)

	maxReplicas := int32(0)
	for _, c := range changes {
		maxReplicas = max(maxReplicas, c.replicas)
	}
	if maxReplicas < 2 {
		t.Errorf("the HPA never scaled the target above %d replicas", maxReplicas)
	}
	// One sleep after the load, then one wake and one sleep per burst: a
	// flap (an extra wake and sleep) or a burst that did not wake shows here.
	if sleeps, wakes := sleepsAndWakes(changes); sleeps != bursts+1 || wakes != bursts {
		t.Errorf("%d sleeps and %d wakes for %d bursts, want %d and %d: %s", sleeps, wakes, bursts, bursts+1, bursts, timeline)
	}
	t.Logf("%d POSTs in all: %d ok, %d failed", len(ok)+len(bad), len(ok), len(bad))
	for _, r := range bad {
		t.Errorf("POST sent %s into the test failed: %v", r.at.Sub(start).Round(time.Millisecond), r.err)
	}
	checkLedger(t, t.Errorf, l, ok)

	// The HPA's own floor comes back when the ElastiService goes.
	e.DeleteAndWait(t, es, 2*time.Minute)
	Eventually(t, time.Minute, 200*time.Millisecond, func(ctx context.Context) error {
		h, err := hpas.Get(ctx, "demoapp", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas != 0 || h.Annotations[contract.AnnotationHPAMinReplicas] != "" {
			return fmt.Errorf("HPA minReplicas %v, annotations %v after the ElastiService was deleted, want 0 and no annotation", h.Spec.MinReplicas, h.Annotations)
		}
		return nil
	})
}
