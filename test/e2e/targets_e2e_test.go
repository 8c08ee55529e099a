//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// statefulSetReplicas reads a StatefulSet's spec.replicas through /scale.
func (e *Env) statefulSetReplicas(ctx context.Context, ns, name string) (int32, error) {
	s, err := e.Clientset.AppsV1().StatefulSets(ns).GetScale(ctx, name, metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	return s.Spec.Replicas, nil
}

// waitAsleepAt waits until ElastiService name is asleep by a target that
// Asleep cannot read: proxy mode and one proxy slice with ready resolvers,
// none of the Service's own endpoints left, kube-proxy caught up, and the
// target at zero, which notAtZero checks (it says why not, or "").
func (e *Env) waitAsleepAt(t *testing.T, ns, name string, notAtZero func(ctx context.Context) (string, error)) {
	t.Helper()
	Eventually(t, 2*time.Minute, 200*time.Millisecond, func(ctx context.Context) error {
		es, err := e.GetElastiService(ctx, ns, name)
		if err != nil {
			return err
		}
		if es.Status.Mode != elastiv1alpha1.ModeProxy {
			return fmt.Errorf("mode %q, want proxy (conditions %s)", es.Status.Mode, conditions(es))
		}
		slices, err := e.ProxySlices(ctx, ns, es.Spec.Service)
		if err != nil {
			return err
		}
		if len(slices) != 1 || readyIn(slices[0]) == 0 {
			return fmt.Errorf("%d proxy slices, want 1 with ready resolvers", len(slices))
		}
		why, err := notAtZero(ctx)
		if err != nil {
			return err
		}
		if why != "" {
			return fmt.Errorf("%s, want 0", why)
		}
		left, err := e.ownEndpoints(ctx, ns, es.Spec.Service)
		if err != nil {
			return err
		}
		if left > 0 {
			return fmt.Errorf("service still lists %d endpoints of its own pods", left)
		}
		return e.kubeProxyConverged(ctx, ns, es.Spec.Service)
	})
}

// wakeWithRequest makes the trigger busy, wakes the sleeping demoapp of ns
// (a kind of target) with a GET to its ClusterIP, which the answer from the
// pod must begin with wantBody, and waits until it is awake.
func (e *Env) wakeWithRequest(t *testing.T, ns, clusterIP, kind, wantBody string) {
	t.Helper()
	e.SetQuery(t, ns, "demoapp", BusyQuery)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), wakeTimeout)
	defer cancel()
	body, err := GetWith(ctx, e.LongHTTPClient(), httpURL(clusterIP, DemoHTTPPort), "")
	if err != nil {
		t.Fatalf("request at zero: %v", err)
	}
	if !strings.HasPrefix(body, wantBody) {
		t.Errorf("body %q, want one beginning %q", body, wantBody)
	}
	t.Logf("%s woken and answered in %s", kind, time.Since(start).Round(time.Millisecond))
	e.WaitAwake(t, ns, "demoapp", time.Minute)
}

// TestStatefulSetTarget: a StatefulSet sleeps and is woken by a request.
func TestStatefulSetTarget(t *testing.T) {
	t.Parallel()
	e := Get(t)
	e.InstallElasti(t)
	ns := e.NewNamespace(t)
	d := DemoAppDeployment(ns, "demoapp", 1)
	sts := &appsv1.StatefulSet{
		ObjectMeta: d.ObjectMeta,
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To[int32](1),
			ServiceName:         "demoapp",
			Selector:            d.Spec.Selector,
			Template:            d.Spec.Template,
			PodManagementPolicy: appsv1.ParallelPodManagement,
		},
	}
	svc := DemoAppService(ns, "demoapp")
	e.Create(t, sts, svc)
	e.WaitReadyEndpoints(t, ns, "demoapp", 1, 2*time.Minute)
	es := e.ElastiServiceFor(ns, "demoapp", IdleQuery)
	es.Spec.ScaleTargetRef = elastiv1alpha1.ScaleTargetRef{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "demoapp"}
	e.Create(t, es)

	// Asleep: proxy mode and slice, the StatefulSet at 0, its pod gone and
	// kube-proxy caught up.
	e.waitAsleepAt(t, ns, "demoapp", func(ctx context.Context) (string, error) {
		n, err := e.statefulSetReplicas(ctx, ns, "demoapp")
		if err == nil && n != 0 {
			return fmt.Sprintf("statefulset at %d replicas", n), nil
		}
		return "", err
	})
	e.wakeWithRequest(t, ns, svc.Spec.ClusterIP, "StatefulSet", "hello from demoapp-0")
	if n, err := e.statefulSetReplicas(context.Background(), ns, "demoapp"); err != nil || n != 1 {
		t.Errorf("statefulset at %d replicas after the wake (err %v), want 1", n, err)
	}
}

// TestHPATarget: a Deployment that an HPA (minReplicas 1) also scales sleeps
// and wakes; the HPA stays in place, leaves the target alone at zero, and
// after the wake the replicas hold still at minTargetReplicas.
func TestHPATarget(t *testing.T) {
	t.Parallel()
	e := Get(t)
	e.InstallElasti(t)
	ns := e.NewNamespace(t)
	d := DemoAppDeployment(ns, "demoapp", 1)
	d.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("10m"),
	}
	svc := DemoAppService(ns, "demoapp")
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "demoapp", Namespace: ns},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "demoapp"},
			MinReplicas:    ptr.To[int32](1),
			MaxReplicas:    3,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ResourceMetricSourceType,
				Resource: &autoscalingv2.ResourceMetricSource{
					Name:   corev1.ResourceCPU,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](80)},
				},
			}},
		},
	}
	e.Create(t, d, svc, hpa)
	e.WaitReadyEndpoints(t, ns, "demoapp", 1, 2*time.Minute)
	es := e.ElastiServiceFor(ns, "demoapp", IdleQuery)
	es.Spec.Autoscaler = &elastiv1alpha1.AutoscalerRef{Type: elastiv1alpha1.AutoscalerHPA, Name: "demoapp"}
	e.Create(t, es)

	e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)
	hpaPresent := func(ctx context.Context) error {
		_, err := e.Clientset.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "demoapp", metav1.GetOptions{})
		return err
	}
	// At zero the HPA is inert: nothing scales the target back up.
	StableFor(t, 8*time.Second, 500*time.Millisecond, func(ctx context.Context) error {
		if err := hpaPresent(ctx); err != nil {
			return fmt.Errorf("HPA: %w", err)
		}
		n, _, err := e.Replicas(ctx, ns, "demoapp")
		if err == nil && n != 0 {
			err = fmt.Errorf("target at %d replicas while asleep", n)
		}
		return err
	})

	e.SetQuery(t, ns, "demoapp", BusyQuery)
	ctx, cancel := context.WithTimeout(context.Background(), wakeTimeout)
	defer cancel()
	start := time.Now()
	if _, err := GetWith(ctx, e.LongHTTPClient(), httpURL(svc.Spec.ClusterIP, DemoHTTPPort), ""); err != nil {
		t.Fatalf("request at zero: %v", err)
	}
	t.Logf("woken and answered in %s", time.Since(start).Round(time.Millisecond))
	e.WaitAwake(t, ns, "demoapp", time.Minute)

	// No fight: the replicas and the Deployment's spec hold still for at
	// least 10 s and until the HPA has seen the awake target (its status
	// says 1 current replica; it resyncs every 15 s).
	_, gen, err := e.Replicas(context.Background(), ns, "demoapp")
	if err != nil {
		t.Fatal(err)
	}
	woke := time.Now()
	var h *autoscalingv2.HorizontalPodAutoscaler
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		n, g, err := e.Replicas(ctx, ns, "demoapp")
		if err == nil {
			h, err = e.Clientset.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "demoapp", metav1.GetOptions{})
		}
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if n != 1 || g != gen {
			t.Fatalf("%s after the wake: %d replicas (want 1), generation %d -> %d", time.Since(woke).Round(time.Millisecond), n, gen, g)
		}
		if time.Since(woke) > 10*time.Second && h.Status.CurrentReplicas == 1 {
			break
		}
		if time.Since(woke) > 90*time.Second {
			t.Fatalf("the HPA never saw the awake target: status %+v", h.Status)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("stable at 1 replica for %s; HPA: current %d, desired %d replicas", time.Since(woke).Round(time.Second), h.Status.CurrentReplicas, h.Status.DesiredReplicas)
}
