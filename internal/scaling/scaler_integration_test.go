//go:build integration

package scaling_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/scaling"
	"elasti.dev/elasti/internal/scaling/scalingtest"
	"elasti.dev/elasti/internal/testenv"
	"elasti.dev/elasti/internal/testenv/estest"
)

var k8s client.Client

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{KEDAAndRollouts: true}, func(e *testenv.Env) { k8s = e.Client })
}

func namespace(t *testing.T, name string) string {
	t.Helper()
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

func podTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.invalid/c:1"}}},
	}
}

// TestScaleThroughScaleSubresource scales a Deployment, a StatefulSet and an
// Argo Rollout (its real CRD) through /scale.
func TestScaleThroughScaleSubresource(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "scale-kinds")
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}
	objs := []client.Object{
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "d"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(2)), Selector: sel, Template: podTemplate("x")}},
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"}, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(int32(2)), Selector: sel, Template: podTemplate("x")}},
		&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
			"metadata": map[string]any{"namespace": ns, "name": "r"},
			"spec": map[string]any{"replicas": int64(2), "selector": map[string]any{"matchLabels": map[string]any{"app": "x"}},
				"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "x"}},
					"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "example.invalid/c:1"}}}},
				"strategy": map[string]any{"canary": map[string]any{}}},
		}},
	}
	for _, o := range objs {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatalf("create %s: %v", o.GetName(), err)
		}
	}
	s := &scaling.Scaler{Client: k8s}
	for _, ref := range []elastiv1alpha1.ScaleTargetRef{
		{APIVersion: "apps/v1", Kind: "Deployment", Name: "d"},
		{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "s"},
		{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: "r"},
	} {
		if n, err := s.Replicas(ctx, ns, ref); err != nil || n != 2 {
			t.Fatalf("%s replicas: %d %v", ref.Kind, n, err)
		}
		for _, want := range []int32{0, 3} {
			if err := s.Scale(ctx, ns, ref, want); err != nil {
				t.Fatalf("scale %s to %d: %v", ref.Kind, want, err)
			}
			if n, err := s.Replicas(ctx, ns, ref); err != nil || n != want {
				t.Fatalf("%s after scaling to %d: %d %v", ref.Kind, want, n, err)
			}
		}
		// At 3, a scale from zero leaves the target alone; at 0 it scales.
		if scaled, err := s.ScaleFromZero(ctx, ns, ref, 1); err != nil || scaled {
			t.Fatalf("%s at 3: ScaleFromZero = %v, %v; want false, nil", ref.Kind, scaled, err)
		}
		if n, err := s.Replicas(ctx, ns, ref); err != nil || n != 3 {
			t.Fatalf("%s after a refused scale from zero: %d %v; want 3", ref.Kind, n, err)
		}
		if err := s.Scale(ctx, ns, ref, 0); err != nil {
			t.Fatal(err)
		}
		if scaled, err := s.ScaleFromZero(ctx, ns, ref, 2); err != nil || !scaled {
			t.Fatalf("%s at 0: ScaleFromZero = %v, %v; want true, nil", ref.Kind, scaled, err)
		}
		if n, err := s.Replicas(ctx, ns, ref); err != nil || n != 2 {
			t.Fatalf("%s after a scale from zero to 2: %d %v", ref.Kind, n, err)
		}
	}
	if _, err := s.ScaleFromZero(ctx, ns, elastiv1alpha1.ScaleTargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "missing"}, 1); !apierrors.IsNotFound(err) {
		t.Errorf("scale a missing target from zero: %v; want NotFound", err)
	}
	_, err := s.Replicas(ctx, ns, elastiv1alpha1.ScaleTargetRef{APIVersion: "example.com/v1", Kind: "Widget", Name: "w"})
	if !errors.Is(err, scaling.ErrTargetKindUnknown) {
		t.Errorf("unknown kind: %v", err)
	}
	_, err = s.Replicas(ctx, ns, elastiv1alpha1.ScaleTargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "missing"})
	if !apierrors.IsNotFound(err) {
		t.Errorf("missing target: %v", err)
	}
}

// TestKEDAPause pauses and unpauses a ScaledObject of KEDA's real CRD, and
// leaves a pause someone else set alone.
func TestKEDAPause(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "keda")
	newSO := func(name string, ann map[string]string) {
		so := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"scaleTargetRef": map[string]any{"name": "d"},
			"triggers":       []any{map[string]any{"type": "cpu", "metricType": "Utilization", "metadata": map[string]any{"value": "50"}}},
		}}}
		so.SetGroupVersionKind(scaling.ScaledObjectGVK)
		so.SetNamespace(ns)
		so.SetName(name)
		so.SetAnnotations(ann)
		if err := k8s.Create(ctx, so); err != nil {
			t.Fatal(err)
		}
	}
	annotations := func(name string) map[string]string {
		so := &unstructured.Unstructured{}
		so.SetGroupVersionKind(scaling.ScaledObjectGVK)
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, so); err != nil {
			t.Fatal(err)
		}
		return so.GetAnnotations()
	}
	a := &scaling.Autoscalers{Reader: k8s, Writer: k8s}
	newSO("mine", map[string]string{"keep": "me"})
	if found, err := a.PauseKEDA(ctx, ns, "mine"); err != nil || !found {
		t.Fatalf("pause: %v %v", found, err)
	}
	if ann := annotations("mine"); ann[scaling.KEDAPausedReplicasAnnotation] != "0" || ann[contract.AnnotationKEDAPaused] != "true" || ann["keep"] != "me" {
		t.Fatalf("after pause: %v", ann)
	}
	if _, err := a.PauseKEDA(ctx, ns, "mine"); err != nil {
		t.Fatalf("pause twice: %v", err)
	}
	if err := a.UnpauseKEDA(ctx, ns, "mine"); err != nil {
		t.Fatal(err)
	}
	if ann := annotations("mine"); len(ann) != 1 || ann["keep"] != "me" {
		t.Fatalf("after unpause: %v", ann)
	}

	newSO("theirs", map[string]string{scaling.KEDAPausedReplicasAnnotation: "2"})
	if _, err := a.PauseKEDA(ctx, ns, "theirs"); err != nil {
		t.Fatal(err)
	}
	if err := a.UnpauseKEDA(ctx, ns, "theirs"); err != nil {
		t.Fatal(err)
	}
	if ann := annotations("theirs"); ann[scaling.KEDAPausedReplicasAnnotation] != "2" || ann[contract.AnnotationKEDAPaused] != "" {
		t.Fatalf("someone else's pause changed: %v", ann)
	}
	if found, err := a.PauseKEDA(ctx, ns, "missing"); err != nil || found {
		t.Fatalf("missing ScaledObject: %v %v", found, err)
	}

	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "h"}, Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "d"},
		MinReplicas:    ptr.To(int32(3)), MaxReplicas: 5,
	}}
	if err := k8s.Create(ctx, hpa); err != nil {
		t.Fatal(err)
	}
	if n, err := a.HPAMinReplicas(ctx, ns, "h"); err != nil || n != 3 {
		t.Fatalf("HPA min: %d %v", n, err)
	}
	if n, err := a.HPAMinReplicas(ctx, ns, "nope"); err != nil || n != 0 {
		t.Fatalf("missing HPA: %d %v", n, err)
	}
}

// TestPrometheusEvaluatorAgainstRealPrometheus: idle, active and unhealthy
// results from the real server.
func TestPrometheusEvaluatorAgainstRealPrometheus(t *testing.T) {
	_, prom := scalingtest.StartForTest(t, 2)
	ev := &scaling.Evaluator{DefaultServerAddress: prom.URL}
	es := func(query, threshold string) *elastiv1alpha1.ElastiService {
		es := estest.New("", "", estest.Cooldown(5), estest.Prometheus("", query, threshold))
		es.Spec.Triggers[0].Metadata.UptimeFilter = `job="prometheus"`
		return es
	}
	if r := ev.Evaluate(context.Background(), es("elasti_test_value", "1")); r.State != scaling.StateActive {
		t.Errorf("value 2 >= 1: %+v", r)
	}
	if r := ev.Evaluate(context.Background(), es("elasti_test_value", "2.5")); r.State != scaling.StateIdle {
		t.Errorf("value 2 < 2.5: %+v", r)
	}
	if r := ev.Evaluate(context.Background(), es("elasti_no_such_metric", "1")); r.Reason != scaling.ReasonEmptyResult {
		t.Errorf("empty: %+v", r)
	}
	if r := ev.Evaluate(context.Background(), es("rate(", "1")); r.Reason != scaling.ReasonQueryFailed {
		t.Errorf("bad query: %+v", r)
	}
	prom.Stop()
	if r := ev.Evaluate(context.Background(), es("elasti_test_value", "2.5")); r.Reason != scaling.ReasonPrometheusUnreachable {
		t.Errorf("stopped Prometheus: %+v", r)
	}
}

// TestPodMetricsEvaluatorAgainstRealAPIServer: the Service's own
// EndpointSlices, listed from a real API server by their service-name
// label, lead to the pod's page; the proxy slice beside them is not
// scraped. The API server refuses loopback endpoint addresses, so the pod
// is 10.1.2.3 and the transport dials 127.0.0.1 for it, and nothing else.
func TestPodMetricsEvaluatorAgainstRealAPIServer(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, "pod-metrics")
	var requests atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "# TYPE http_requests_total counter\nhttp_requests_total{code=\"200\"} %d\n", requests.Load())
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	port := int32(ln.Addr().(*net.TCPAddr).Port)

	for _, s := range []*discoveryv1.EndpointSlice{
		{
			ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "web-own", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.1.2.3"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "web-0", UID: "pod-uid"}}},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-proxy", Labels: map[string]string{
				discoveryv1.LabelServiceName: "web", contract.LabelManagedBy: contract.ManagedBy,
			}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.9.9.9"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		},
	} {
		if err := k8s.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(start)
	podAddr := fmt.Sprintf("10.1.2.3:%d", port)
	transport := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr != podAddr {
			return nil, fmt.Errorf("the test dials only %s, not %s", podAddr, addr)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, ln.Addr().String())
	}}
	ev := &scaling.Evaluator{Endpoints: k8s, Clock: clk, Transport: transport}
	es := estest.New(ns, "web", estest.Cooldown(60))
	es.Spec.Triggers = []elastiv1alpha1.ScaleTrigger{{Type: elastiv1alpha1.TriggerTypePodMetrics, Metadata: elastiv1alpha1.TriggerMetadata{
		MetricName: "http_requests_total", Port: port, Threshold: ptr.To(elastiv1alpha1.Threshold("0.1")),
	}}}
	requests.Store(40)
	if r := ev.Evaluate(ctx, es); r.State != scaling.StateActive || !strings.Contains(r.Message, "not enough history yet") {
		t.Fatalf("first scrape: %+v", r)
	}
	requests.Store(45) // 5 in 60 s, below 0.1/s
	clk.SetTime(start.Add(time.Minute))
	if r := ev.Evaluate(ctx, es); r.State != scaling.StateIdle {
		t.Fatalf("after a window: %+v", r)
	}
	requests.Store(60) // 15 in the next 60 s: 0.25/s
	clk.SetTime(start.Add(2 * time.Minute))
	if r := ev.Evaluate(ctx, es); r.State != scaling.StateActive {
		t.Fatalf("busy: %+v", r)
	}
}
