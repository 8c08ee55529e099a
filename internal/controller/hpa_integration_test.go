//go:build integration

package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/hpacustody"
	"elasti.dev/elasti/internal/controller/plan"
	"elasti.dev/elasti/internal/scaling"
)

// The tests here play the HPA controller, which envtest does not run: they
// write the HPA's status (its readings) through the status subresource.

const queueMetric = "queue_depth"

// hpaSpec is an autoscaling/v2 HPA on Deployment target with minReplicas
// min and an External metric, plus any extra metrics.
func hpaSpec(ns, name, target string, min int32, extra ...autoscalingv2.MetricSpec) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: target},
			MinReplicas:    ptr.To(min),
			MaxReplicas:    5,
			Metrics: append([]autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ExternalMetricSourceType,
				External: &autoscalingv2.ExternalMetricSource{
					Metric: autoscalingv2.MetricIdentifier{Name: queueMetric},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("10"))},
				},
			}}, extra...),
		},
	}
}

// createHPA creates an HPA. An API server that refuses minReplicas 0 (the
// HPAScaleToZero feature gate is off: Kubernetes before 1.37 by default)
// skips the test: there is then no HPA for Elasti to hold.
func createHPA(t *testing.T, h *autoscalingv2.HorizontalPodAutoscaler) {
	t.Helper()
	err := k8s.Create(context.Background(), h)
	if apierrors.IsInvalid(err) && ptr.Deref(h.Spec.MinReplicas, 1) == 0 && strings.Contains(err.Error(), "minReplicas") {
		t.Skipf("kube-apiserver %s refuses an HPA with minReplicas 0 (feature gate HPAScaleToZero off; on by default from 1.37): %v", env.Version, err)
	}
	if err != nil {
		t.Fatalf("create HPA %s: %v", h.Name, err)
	}
}

func getHPA(t *testing.T, ns, name string) *autoscalingv2.HorizontalPodAutoscaler {
	t.Helper()
	h := &autoscalingv2.HorizontalPodAutoscaler{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, h); err != nil {
		t.Fatalf("get HPA %s/%s: %v", ns, name, err)
	}
	return h
}

// setHPAReading writes the HPA's status as the HPA controller would after
// reading its External metric: one reading per metric.
func setHPAReading(t *testing.T, ns, name, value string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		h := getHPA(t, ns, name)
		h.Status.CurrentReplicas = 1
		h.Status.DesiredReplicas = 1
		h.Status.CurrentMetrics = []autoscalingv2.MetricStatus{{
			Type: autoscalingv2.ExternalMetricSourceType,
			External: &autoscalingv2.ExternalMetricStatus{
				Metric:  autoscalingv2.MetricIdentifier{Name: queueMetric},
				Current: autoscalingv2.MetricValueStatus{AverageValue: ptr.To(resource.MustParse(value))},
			},
		}}
		h.Status.Conditions = []autoscalingv2.HorizontalPodAutoscalerCondition{{
			Type: autoscalingv2.ScalingActive, Status: "True", Reason: "ValidMetricFound", LastTransitionTime: metav1.Now(),
		}}
		return k8s.Status().Update(context.Background(), h)
	})
	if err != nil {
		t.Fatalf("write HPA %s status: %v", name, err)
	}
}

// setHPAMin sets the HPA's minReplicas, as its owner (or a GitOps tool)
// would.
func setHPAMin(t *testing.T, ns, name string, min int32) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		h := getHPA(t, ns, name)
		h.Spec.MinReplicas = ptr.To(min)
		return k8s.Update(context.Background(), h)
	})
	if err != nil {
		t.Fatalf("set minReplicas of HPA %s to %d: %v", name, min, err)
	}
}

// wantHPA checks an HPA's minReplicas and whether the custody annotations
// are on it (naming custodian).
func wantHPA(ns, name string, min int32, custodian string) func() error {
	return func() error {
		h := &autoscalingv2.HorizontalPodAutoscaler{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, h); err != nil {
			return err
		}
		got := ptr.Deref(h.Spec.MinReplicas, 1)
		floor, held := h.Annotations[contract.AnnotationHPAMinReplicas]
		switch {
		case got != min:
			return fmt.Errorf("HPA %s minReplicas %d, want %d (annotations %v)", name, got, min, h.Annotations)
		case custodian == "" && (held || h.Annotations[contract.AnnotationHPACustodian] != ""):
			return fmt.Errorf("HPA %s still carries the custody annotations: %v", name, h.Annotations)
		case custodian != "" && (floor != "0" || h.Annotations[contract.AnnotationHPACustodian] != custodian):
			return fmt.Errorf("HPA %s annotations %v, want %s=0 and %s=%s", name, h.Annotations,
				contract.AnnotationHPAMinReplicas, contract.AnnotationHPACustodian, custodian)
		}
		return nil
	}
}

// eventsOf returns the Events with reason on an ElastiService.
func eventsOf(t *testing.T, ns, name, reason string) []eventsv1.Event {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := k8s.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatalf("list Events: %v", err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Reason == reason && e.Regarding.Name == name {
			out = append(out, e)
		}
	}
	return out
}

func withHPA(name string) func(*elastiv1alpha1.ElastiService) {
	return func(es *elastiv1alpha1.ElastiService) {
		es.Spec.Autoscaler = &elastiv1alpha1.AutoscalerRef{Type: elastiv1alpha1.AutoscalerHPA, Name: name}
	}
}

func withoutTriggers(es *elastiv1alpha1.ElastiService) { es.Spec.Triggers = nil }

// workload creates a Deployment with one ready replica behind a Service of
// the same name, and the HPA h on it.
func workload(t *testing.T, ns, name string, h *autoscalingv2.HorizontalPodAutoscaler) {
	t.Helper()
	createHPA(t, h) // first: a skip leaves nothing behind
	createDeployment(t, ns, name, 1)
	createReleasedService(t, ns, name)
	setOwnSlice(t, ns, name, true)
}

// createReleasedService creates a Service that is deleted when the test
// ends. The test API server's Service IP range (a /24) is shared by the
// whole package, and other tests fill most of it.
func createReleasedService(t *testing.T, ns, name string) {
	t.Helper()
	createService(t, ns, name)
	t.Cleanup(func() {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if err := k8s.Delete(context.Background(), svc); client.IgnoreNotFound(err) != nil {
			t.Errorf("delete Service %s: %v", name, err)
		}
	})
}

// TestHPAFloorRaised: an HPA at minReplicas 0 on an External metric is
// taken into custody: minReplicas 1, the owner's 0 recorded, and an Event
// naming the HPA.
func TestHPAFloorRaised(t *testing.T) {
	op := startOperator(t, operatorOptions{triggers: newFakeTriggers(scaling.StateActive)})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	workload(t, op.ns, "web", hpaSpec(op.ns, "web", "web", 0))
	createES(t, op.ns, "web", "web", "web", withHPA("web"))

	eventually(t, wait, "floor raised", wantHPA(op.ns, "web", 1, "web"))
	eventually(t, wait, "HPAFloorRaised Event", wantEvent(op.ns, "web", hpacustody.EventFloorRaised))
	ev := eventsOf(t, op.ns, "web", hpacustody.EventFloorRaised)[0]
	if ev.Type != "Normal" || !strings.Contains(ev.Note, "HPA web") {
		t.Errorf("Event %s %q: want a Normal Event naming HPA web", ev.Type, ev.Note)
	}
	// Active triggers: nothing else changes.
	never(t, 2*time.Second, "target and floor stay", func() error {
		if err := wantReplicas(op.ns, "web", 1)(); err != nil {
			return err
		}
		return wantHPA(op.ns, "web", 1, "web")()
	})
}

// writeLog records, in order, the writes the operator sends that succeed:
// proxy EndpointSlice creations (by Service) and /scale writes (by target).
type writeLog struct {
	mu      sync.Mutex
	entries []string
}

func (w *writeLog) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		entry := ""
		switch {
		case req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/endpointslices") && req.Body != nil:
			body, err := io.ReadAll(req.Body)
			_ = req.Body.Close()
			if err != nil {
				return nil, err
			}
			req = req.Clone(req.Context())
			req.Body = io.NopCloser(bytes.NewReader(body))
			s := &discoveryv1.EndpointSlice{}
			if json.Unmarshal(body, s) == nil && s.Labels[contract.LabelManagedBy] == contract.ManagedBy {
				entry = "slice " + s.Labels[discoveryv1.LabelServiceName]
			}
		case req.Method == http.MethodPatch && strings.HasSuffix(req.URL.Path, "/scale"):
			parts := strings.Split(req.URL.Path, "/")
			entry = "scale " + parts[len(parts)-2]
		}
		resp, err := next.RoundTrip(req)
		if entry != "" && err == nil && resp.StatusCode < 300 {
			w.mu.Lock()
			w.entries = append(w.entries, entry)
			w.mu.Unlock()
		}
		return resp, err
	})
}

// proxyBeforeScale checks that the first successful /scale write to target
// came after a proxy slice for service was created.
func (w *writeLog) proxyBeforeScale(service, target string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	sliced := false
	for _, e := range w.entries {
		switch e {
		case "slice " + service:
			sliced = true
		case "scale " + target:
			if !sliced {
				return fmt.Errorf("%s scaled before a proxy slice for %s was created: %v", target, service, w.entries)
			}
			return nil
		}
	}
	return fmt.Errorf("no scale of %s seen: %v", target, w.entries)
}

// TestHPAMetricsDecideSleep: while an HPA is in custody, the target sleeps
// only once the HPA's own readings are zero: with no triggers the HPA
// decides alone; beside triggers, all must say idle. A nonzero reading keeps
// the target up long past the cooldown. The proxy slice goes in before the
// scale to zero.
func TestHPAMetricsDecideSleep(t *testing.T) {
	trig := &perESTriggers{state: map[string]scaling.State{"paired": scaling.StateIdle, "vetoed": scaling.StateActive}}
	log := &writeLog{}
	cfg := rest.CopyConfig(env.Config)
	cfg.ContentType = "application/json" // so that the log can read the slices
	cfg.Wrap(log.wrap)
	op := startOperator(t, operatorOptions{triggers: trig, rest: cfg})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	// alone: no triggers, the HPA decides. paired: an idle trigger and the
	// HPA. vetoed: an active trigger and the HPA.
	for _, name := range []string{"alone", "paired", "vetoed"} {
		workload(t, op.ns, name, hpaSpec(op.ns, name, name, 0))
		setHPAReading(t, op.ns, name, "4")
	}
	createES(t, op.ns, "alone", "alone", "alone", withHPA("alone"), withoutTriggers)
	createES(t, op.ns, "paired", "paired", "paired", withHPA("paired"))
	createES(t, op.ns, "vetoed", "vetoed", "vetoed", withHPA("vetoed"))
	for _, name := range []string{"alone", "paired", "vetoed"} {
		eventually(t, wait, name+": floor raised", wantHPA(op.ns, name, 1, name))
	}
	eventually(t, wait, "the HPA's reading shows in Idle", wantCondition(op.ns, "alone", elastiv1alpha1.ConditionIdle, metav1.ConditionFalse, plan.ReasonTriggerActive))

	// The cooldown is 1 s: well past it, a nonzero reading keeps all three up.
	never(t, 4*time.Second, "nonzero readings keep the targets up", func() error {
		for _, name := range []string{"alone", "paired", "vetoed"} {
			if err := wantReplicas(op.ns, name, 1)(); err != nil {
				return err
			}
			if err := wantProxySlices(op.ns, name, 0)(); err != nil {
				return err
			}
		}
		return nil
	})

	for _, name := range []string{"alone", "paired", "vetoed"} {
		setHPAReading(t, op.ns, name, "0")
	}
	for _, name := range []string{"alone", "paired"} {
		eventually(t, wait, name+" asleep", wantReplicas(op.ns, name, 0))
		eventually(t, wait, name+" in proxy mode", wantCondition(op.ns, name, elastiv1alpha1.ConditionActive, metav1.ConditionFalse, contract.ReasonScaledToZero))
		if err := wantProxySlices(op.ns, name, 1)(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if err := log.proxyBeforeScale(name, name); err != nil {
			t.Error(err)
		}
		if err := wantHPA(op.ns, name, 1, name)(); err != nil {
			t.Errorf("asleep: %v", err)
		}
	}
	if err := wantReplicas(op.ns, "vetoed", 1)(); err != nil {
		t.Errorf("an active trigger beside a zero HPA reading: %v", err)
	}

	// The wake scales to the floor the HPA now has: 1.
	res, err := op.waker.Wake(ctxT(t), types.NamespacedName{Namespace: op.ns, Name: "alone"})
	if err != nil || res.Replicas != 1 {
		t.Fatalf("wake: %+v %v", res, err)
	}
}

// TestHPAFloorRevertedIsRaisedAgain: a floor set back to 0 (a GitOps tool
// syncing its manifest) is raised again at once, through the HPA watch:
// the polling interval is an hour and the cooldown 15 minutes here, so no
// poll comes in the test's time.
func TestHPAFloorRevertedIsRaisedAgain(t *testing.T) {
	op := startOperator(t, operatorOptions{
		triggers: newFakeTriggers(scaling.StateIdle),
		cfg:      func(c *Config) { c.PollingInterval = time.Hour },
	})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	workload(t, op.ns, "web", hpaSpec(op.ns, "web", "web", 0))
	createES(t, op.ns, "web", "web", "web", withHPA("web"), func(es *elastiv1alpha1.ElastiService) { es.Spec.CooldownPeriod = 900 })
	eventually(t, wait, "floor raised", wantHPA(op.ns, "web", 1, "web"))
	// Let the reconciles of the creation settle, so that only the HPA
	// watch can bring the operator back.
	never(t, 2*time.Second, "floor held", wantHPA(op.ns, "web", 1, "web"))

	for i := range 2 {
		setHPAMin(t, op.ns, "web", 0)
		start := time.Now()
		eventually(t, 10*time.Second, fmt.Sprintf("revert %d raised again", i+1), wantHPA(op.ns, "web", 1, "web"))
		t.Logf("revert %d undone in %s", i+1, time.Since(start).Round(time.Millisecond))
	}
	eventually(t, wait, "an Event for each raise", func() error {
		if n := len(eventsOf(t, op.ns, "web", hpacustody.EventFloorRaised)); n == 0 {
			return fmt.Errorf("no %s Event", hpacustody.EventFloorRaised)
		}
		return nil
	})
}

// TestHPAOwnerFloorEndsCustody: an owner who sets minReplicas to 3 keeps
// their floor; the custody ends and its annotations go.
func TestHPAOwnerFloorEndsCustody(t *testing.T) {
	op := startOperator(t, operatorOptions{triggers: newFakeTriggers(scaling.StateActive)})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	workload(t, op.ns, "web", hpaSpec(op.ns, "web", "web", 0))
	createES(t, op.ns, "web", "web", "web", withHPA("web"))
	eventually(t, wait, "floor raised", wantHPA(op.ns, "web", 1, "web"))

	setHPAMin(t, op.ns, "web", 3)
	eventually(t, wait, "custody ended", wantHPA(op.ns, "web", 3, ""))
	eventually(t, wait, "HPAFloorReleased Event", wantEvent(op.ns, "web", hpacustody.EventFloorReleased))
	never(t, 2*time.Second, "the owner's 3 stands", wantHPA(op.ns, "web", 3, ""))
}

// TestHPAFloorRestoredOnRelease: deleting the ElastiService gives the HPA
// its 0 back, and so does an ElastiService that stops naming the HPA.
func TestHPAFloorRestoredOnRelease(t *testing.T) {
	op := startOperator(t, operatorOptions{triggers: newFakeTriggers(scaling.StateActive)})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	workload(t, op.ns, "deleted", hpaSpec(op.ns, "deleted", "deleted", 0))
	workload(t, op.ns, "renamed", hpaSpec(op.ns, "renamed", "renamed", 0))
	createES(t, op.ns, "deleted", "deleted", "deleted", withHPA("deleted"))
	createES(t, op.ns, "renamed", "renamed", "renamed", withHPA("renamed"))
	eventually(t, wait, "deleted: floor raised", wantHPA(op.ns, "deleted", 1, "deleted"))
	eventually(t, wait, "renamed: floor raised", wantHPA(op.ns, "renamed", 1, "renamed"))

	if err := k8s.Delete(context.Background(), getES(t, op.ns, "deleted")); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "ElastiService gone", wantGone(op.ns, "deleted"))
	if err := wantHPA(op.ns, "deleted", 0, "")(); err != nil {
		t.Errorf("after the deletion: %v", err)
	}

	// Retried on a conflict: the operator writes the status meanwhile.
	updateES(t, op.ns, "renamed", func(es *elastiv1alpha1.ElastiService) { es.Spec.Autoscaler = nil })
	eventually(t, wait, "renamed: floor restored", wantHPA(op.ns, "renamed", 0, ""))

	// An HPA deleted while held: the ElastiService's deletion still
	// completes.
	workload(t, op.ns, "gone", hpaSpec(op.ns, "gone", "gone", 0))
	createES(t, op.ns, "gone", "gone", "gone", withHPA("gone"))
	eventually(t, wait, "gone: floor raised", wantHPA(op.ns, "gone", 1, "gone"))
	if err := k8s.Delete(context.Background(), getHPA(t, op.ns, "gone")); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(context.Background(), getES(t, op.ns, "gone")); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "ElastiService without its HPA gone", wantGone(op.ns, "gone"))
}

// TestHPAOnCPUNotHeld: an HPA at minReplicas 0 with a CPU metric beside its
// External one is not taken into custody, and neither is one at
// minReplicas 2: both are left exactly as they are, without an Event.
func TestHPAOnCPUNotHeld(t *testing.T) {
	op := startOperator(t, operatorOptions{triggers: newFakeTriggers(scaling.StateActive)})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	cpu := autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: "cpu", Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](80)},
	}}
	workload(t, op.ns, "cpu", hpaSpec(op.ns, "cpu", "cpu", 0, cpu))
	workload(t, op.ns, "two", hpaSpec(op.ns, "two", "two", 2))
	createES(t, op.ns, "cpu", "cpu", "cpu", withHPA("cpu"))
	createES(t, op.ns, "two", "two", "two", withHPA("two"))
	eventually(t, wait, "reconciled", wantCondition(op.ns, "cpu", elastiv1alpha1.ConditionReady, metav1.ConditionTrue, ""))
	eventually(t, wait, "reconciled", wantCondition(op.ns, "two", elastiv1alpha1.ConditionReady, metav1.ConditionTrue, ""))
	never(t, 3*time.Second, "HPAs left alone", func() error {
		if err := wantHPA(op.ns, "cpu", 0, "")(); err != nil {
			return err
		}
		return wantHPA(op.ns, "two", 2, "")()
	})
	for _, name := range []string{"cpu", "two"} {
		if ev := eventsOf(t, op.ns, name, hpacustody.EventFloorRaised); len(ev) != 0 {
			t.Errorf("%s: unexpected Events %+v", name, ev)
		}
	}
}

// TestHPAFloorNotRaisedKeepsTargetAwake: an operator that may not patch
// HPAs reports it, and keeps a target awake that idle triggers would put to
// sleep: the HPA could take it to zero before the proxy is in place.
func TestHPAFloorNotRaisedKeepsTargetAwake(t *testing.T) {
	user := fmt.Sprintf("elasti-no-hpa-patch-%d", time.Now().UnixNano()%100000)
	op := startOperator(t, operatorOptions{triggers: newFakeTriggers(scaling.StateIdle), rest: operatorWithoutHPAPatch(t, user)})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	workload(t, op.ns, "web", hpaSpec(op.ns, "web", "web", 0))
	createDeployment(t, op.ns, "plain", 1)
	createReleasedService(t, op.ns, "plain")
	createES(t, op.ns, "web", "web", "web", withHPA("web"))
	// The same operator still puts a target without an HPA to sleep.
	createES(t, op.ns, "plain", "plain", "plain")

	eventually(t, wait, "HPAFloorNotRaised Event", wantEvent(op.ns, "web", hpacustody.EventFloorNotRaised))
	if ev := eventsOf(t, op.ns, "web", hpacustody.EventFloorNotRaised)[0]; ev.Type != "Warning" {
		t.Errorf("Event type %s, want Warning", ev.Type)
	}
	eventually(t, wait, "Idle says why", wantCondition(op.ns, "web", elastiv1alpha1.ConditionIdle, metav1.ConditionFalse, hpacustody.ReasonFloorNotRaised))
	eventually(t, wait, "plain asleep", wantReplicas(op.ns, "plain", 0))
	never(t, 3*time.Second, "the target stays awake", func() error {
		if err := wantReplicas(op.ns, "web", 1)(); err != nil {
			return err
		}
		return wantHPA(op.ns, "web", 0, "")()
	})
}

// operatorWithoutHPAPatch returns a rest.Config impersonating a user with
// what the operator needs, but only get, list and watch on HPAs.
func operatorWithoutHPAPatch(t *testing.T, user string) *rest.Config {
	t.Helper()
	all := []string{"*"}
	mustCreate(t, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "pods", "events", "namespaces"}, Verbs: all},
			{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: all},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: all},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments", "deployments/scale"}, Verbs: all},
			{APIGroups: []string{"elasti.dev"}, Resources: all, Verbs: all},
			{APIGroups: []string{"autoscaling"}, Resources: []string{"horizontalpodautoscalers"}, Verbs: []string{"get", "list", "watch"}},
		},
	})
	mustCreate(t, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	})
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return cfg
}
