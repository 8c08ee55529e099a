//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/controller"
)

// cpuHPA is an HPA on the pods' CPU, as metrics-server reports it: 50% of
// the 50m each pod requests, from 1 to 3 replicas, with no stabilization
// window either way, so that the test sees both moves within minutes.
func cpuHPA(ns, app string) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: ns},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: app},
			MinReplicas:    ptr.To[int32](1),
			MaxReplicas:    3,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{
					Name:   corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)},
				},
			}},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp:   &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0)},
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0)},
			},
		},
	}
}

// TestCPUHPAWithMetricsServer: a real HPA on CPU, fed by the cluster's
// metrics-server (built from the Go module proxy, reading the kubelet's
// resource metrics), on a target Elasti put to sleep and woke. Once awake,
// CPU load (a GET of /burn?ms=40 every 100 ms, about 0.4 CPU against the
// 25m per pod the HPA aims at) makes the HPA scale the target to 3; without
// the load it scales back to 1. Elasti leaves it alone meanwhile: no replica
// change but the HPA's (each one a SuccessfulRescale Event), no Woke or
// ScaledToZero after the wake, the target never at zero.
func TestCPUHPAWithMetricsServer(t *testing.T) {
	t.Parallel()
	e := Get(t)
	e.InstallElasti(t)
	ns := e.NewNamespace(t)
	d := DemoAppDeployment(ns, "demoapp", 1)
	d.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}
	svc := DemoAppService(ns, "demoapp")
	e.Create(t, d, svc, cpuHPA(ns, "demoapp"))
	e.WaitReadyEndpoints(t, ns, "demoapp", 1, 2*time.Minute)
	es := e.ElastiServiceFor(ns, "demoapp", IdleQuery)
	es.Spec.Autoscaler = &elastiv1alpha1.AutoscalerRef{Type: elastiv1alpha1.AutoscalerHPA, Name: "demoapp"}
	e.Create(t, es)
	e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)

	e.SetQuery(t, ns, "demoapp", BusyQuery)
	ctx, cancel := context.WithTimeout(context.Background(), wakeTimeout)
	defer cancel()
	url := httpURL(svc.Spec.ClusterIP, DemoHTTPPort)
	if _, err := GetWith(ctx, e.LongHTTPClient(), url, ""); err != nil {
		t.Fatalf("request at zero: %v", err)
	}
	e.WaitAwake(t, ns, "demoapp", time.Minute)
	before := wakesAndSleeps(t, e, ns, "demoapp")
	timeline := recordReplicas(t, e, ns, "demoapp")
	start := time.Now()
	stop := steadyGETs(e, strings.TrimSuffix(url, "/")+"/burn?ms=40")
	waitHPAReplicas(t, e, ns, "demoapp", "demoapp", 3, 3*time.Minute)
	up := time.Since(start)
	errs := stop()
	loadEnd := time.Now()
	waitHPAReplicas(t, e, ns, "demoapp", "demoapp", 1, 3*time.Minute)
	t.Logf("HPA on CPU: 3 replicas %s into the load, back to 1 %s after it stopped; replicas: %s",
		up.Round(time.Second), time.Since(loadEnd).Round(time.Second), timeline)
	onlyTheHPAScaled(t, e, ns, "demoapp", timeline, errs, before)
}

// steadyGETs sends a GET of url every 100 ms, bounded to 4 minutes. stop
// ends it and returns the requests that failed. On the demo app's
// /burn?ms=40 it is about 0.4 CPU of load.
func steadyGETs(e *Env, url string) (stop func() []error) {
	start := time.Now()
	return every(100*time.Millisecond, func(ctx context.Context) error {
		if time.Since(start) > 4*time.Minute {
			return nil
		}
		_, err := GetWith(ctx, e.HTTPClient(), url, "")
		return err
	})
}

// waitHPAReplicas waits until the Deployment ns/app has want replicas,
// saying meanwhile what the HPA ns/hpa measures and wants.
func waitHPAReplicas(t *testing.T, e *Env, ns, hpa, app string, want int32, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, time.Second, func(ctx context.Context) error {
		h, err := e.Clientset.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, hpa, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n, _, err := e.Replicas(ctx, ns, app)
		if err != nil {
			return err
		}
		if n != want {
			return fmt.Errorf("%d replicas, want %d; HPA %s: %s, desired %d", n, want, hpa, hpaMetric(h), h.Status.DesiredReplicas)
		}
		return nil
	})
}

// hpaMetric says what an HPA's first metric reads: a CPU utilization or an
// External metric's average value.
func hpaMetric(h *autoscalingv2.HorizontalPodAutoscaler) string {
	if len(h.Status.CurrentMetrics) == 0 {
		return "no metric yet"
	}
	switch m := h.Status.CurrentMetrics[0]; {
	case m.Resource != nil:
		return fmt.Sprintf("CPU %d%% of requests", ptr.Deref(m.Resource.Current.AverageUtilization, -1))
	case m.External != nil && m.External.Current.AverageValue != nil:
		return fmt.Sprintf("%s %s per pod", m.External.Metric.Name, m.External.Current.AverageValue)
	}
	return "a metric of another kind"
}

// wakesAndSleeps counts Elasti's Woke and ScaledToZero Events for the
// ElastiService ns/name.
func wakesAndSleeps(t *testing.T, e *Env, ns, name string) int {
	t.Helper()
	woke, err := e.EventCount(context.Background(), ns, name, controller.EventWoke)
	if err != nil {
		t.Fatal(err)
	}
	slept, err := e.EventCount(context.Background(), ns, name, controller.EventScaledToZero)
	if err != nil {
		t.Fatal(err)
	}
	return woke + slept
}

// onlyTheHPAScaled checks that while an HPA scaled the target of the
// ElastiService ns/name, recorded by timeline: no load request failed, the
// target never went to zero, every replica change was an HPA's (one
// SuccessfulRescale Event each, counted over ns) and Elasti neither woke
// nor slept it (before is wakesAndSleeps when the load began).
func onlyTheHPAScaled(t *testing.T, e *Env, ns, name string, timeline *replicaTimeline, errs []error, before int) {
	t.Helper()
	changes := timeline.finish()
	for i, err := range errs {
		if i == 5 {
			t.Errorf("... %d load requests failed in all", len(errs))
			break
		}
		t.Errorf("load request: %v", err)
	}
	if sleeps, _ := sleepsAndWakes(changes); sleeps > 0 {
		t.Errorf("the target went to zero while the HPA scaled it: %s", timeline)
	}
	evs, err := e.Clientset.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.kind=HorizontalPodAutoscaler,reason=SuccessfulRescale"})
	if err != nil {
		t.Fatal(err)
	}
	rescales := 0
	for _, ev := range evs.Items {
		rescales += int(ev.Count)
	}
	if moves := len(changes) - 1; rescales < moves {
		t.Errorf("%d replica changes (%s) but %d SuccessfulRescale Events from the HPA", moves, timeline, rescales)
	}
	if after := wakesAndSleeps(t, e, ns, name); after != before {
		t.Errorf("Elasti woke or slept the target while the HPA scaled it: %d Woke/ScaledToZero Events before, %d after", before, after)
	}
}
