package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/scaling"
	"elasti.dev/elasti/internal/sleepgate"
)

var webTarget = elastiv1alpha1.ScaleTargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}

func externalMetric(name string) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
		Metric: autoscalingv2.MetricIdentifier{Name: name},
		Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("10"))},
	}}
}

func objectMetric(name string) autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
		DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "Service", Name: "web"},
		Metric:          autoscalingv2.MetricIdentifier{Name: name},
		Target:          autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: ptr.To(resource.MustParse("1"))},
	}}
}

func cpuMetric() autoscalingv2.MetricSpec {
	return autoscalingv2.MetricSpec{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: "cpu", Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](80)},
	}}
}

func externalReading(name string, value, average *resource.Quantity) autoscalingv2.MetricStatus {
	return autoscalingv2.MetricStatus{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricStatus{
		Metric: autoscalingv2.MetricIdentifier{Name: name}, Current: autoscalingv2.MetricValueStatus{Value: value, AverageValue: average},
	}}
}

func objectReading(name string, value *resource.Quantity) autoscalingv2.MetricStatus {
	return autoscalingv2.MetricStatus{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricStatus{
		Metric: autoscalingv2.MetricIdentifier{Name: name}, Current: autoscalingv2.MetricValueStatus{Value: value},
	}}
}

func q(s string) *resource.Quantity { return ptr.To(resource.MustParse(s)) }

// newHPA returns HPA web on Deployment web with minReplicas min (nil:
// unset) and the metrics given.
func newHPA(min *int32, metrics ...autoscalingv2.MetricSpec) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "web"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    min, MaxReplicas: 5, Metrics: metrics,
		},
	}
}

func held(h *autoscalingv2.HorizontalPodAutoscaler, custodian string) *autoscalingv2.HorizontalPodAutoscaler {
	h.Annotations = map[string]string{contract.AnnotationHPAMinReplicas: "0", contract.AnnotationHPACustodian: custodian}
	return h
}

func TestCustodyStep(t *testing.T) {
	ext := externalMetric("queue")
	for _, tc := range []struct {
		name     string
		hpa      *autoscalingv2.HorizontalPodAutoscaler
		eligible bool
		want     hpaStep
	}{
		{"floor 0 on External metrics: take custody", newHPA(ptr.To[int32](0), ext), true, hpaRaise},
		{"floor 0 but a CPU metric: left alone", newHPA(ptr.To[int32](0), ext, cpuMetric()), false, hpaLeave},
		{"floor 1, not held: left alone", newHPA(ptr.To[int32](1), ext), true, hpaLeave},
		{"floor unset (1), not held: left alone", newHPA(nil, ext), true, hpaLeave},
		{"floor 3, not held: left alone", newHPA(ptr.To[int32](3), ext), true, hpaLeave},
		{"held at 1: kept", held(newHPA(ptr.To[int32](1), ext), "web"), true, hpaKeep},
		{"held, set back to 0: raised again", held(newHPA(ptr.To[int32](0), ext), "web"), true, hpaRaise},
		{"held by another name: taken over", held(newHPA(ptr.To[int32](1), ext), "old"), true, hpaRaise},
		{"held, owner set 2: custody ends", held(newHPA(ptr.To[int32](2), ext), "web"), true, hpaEnd},
		{"held, owner set 3 and a CPU metric: custody ends, 3 stands", held(newHPA(ptr.To[int32](3), ext, cpuMetric()), "web"), false, hpaEnd},
		{"held, a CPU metric added: floor restored", held(newHPA(ptr.To[int32](1), ext, cpuMetric()), "web"), false, hpaRestore},
	} {
		if got := custodyStep(tc.hpa, "web", tc.eligible); got != tc.want {
			t.Errorf("%s: step %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestCustodyEligible(t *testing.T) {
	other := newHPA(ptr.To[int32](0), externalMetric("queue"))
	other.Spec.ScaleTargetRef.Name = "api"
	v1beta := newHPA(ptr.To[int32](0), externalMetric("queue"))
	v1beta.Spec.ScaleTargetRef.APIVersion = "apps/v1beta1"
	for _, tc := range []struct {
		name string
		hpa  *autoscalingv2.HorizontalPodAutoscaler
		want bool
	}{
		{"External", newHPA(ptr.To[int32](0), externalMetric("queue")), true},
		{"Object and External", newHPA(ptr.To[int32](0), objectMetric("rps"), externalMetric("queue")), true},
		{"External and CPU", newHPA(ptr.To[int32](0), externalMetric("queue"), cpuMetric()), false},
		{"CPU alone", newHPA(ptr.To[int32](1), cpuMetric()), false},
		{"no metrics", newHPA(ptr.To[int32](0)), false},
		{"another target", other, false},
		{"same group, another version", v1beta, true},
	} {
		if got := custodyEligible(tc.hpa, webTarget); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestHPAMetricsVerdict(t *testing.T) {
	two := func(readings ...autoscalingv2.MetricStatus) *autoscalingv2.HorizontalPodAutoscaler {
		h := newHPA(ptr.To[int32](1), externalMetric("queue"), objectMetric("rps"))
		h.Status.CurrentMetrics = readings
		return h
	}
	for _, tc := range []struct {
		name string
		hpa  *autoscalingv2.HorizontalPodAutoscaler
		want scaling.State
	}{
		{"every reading zero", two(externalReading("queue", nil, q("0")), objectReading("rps", q("0"))), scaling.StateIdle},
		{"zero value and zero average", two(externalReading("queue", q("0"), q("0")), objectReading("rps", q("0m"))), scaling.StateIdle},
		{"one reading above zero", two(externalReading("queue", nil, q("0")), objectReading("rps", q("250m"))), scaling.StateActive},
		{"average above zero beside a zero value", two(externalReading("queue", q("0"), q("1")), objectReading("rps", q("0"))), scaling.StateActive},
		{"a reading missing", two(externalReading("queue", nil, q("0"))), scaling.StateUnhealthy},
		{"no status yet", two(), scaling.StateUnhealthy},
		{"a reading of another type (failed metric)", two(externalReading("queue", nil, q("0")), autoscalingv2.MetricStatus{}), scaling.StateUnhealthy},
		{"a reading without a value", two(externalReading("queue", nil, nil), objectReading("rps", q("0"))), scaling.StateUnhealthy},
	} {
		got := hpaMetricsVerdict(tc.hpa, time.Now(), time.Time{})
		if got.State != tc.want {
			t.Errorf("%s: %+v, want %s", tc.name, got, tc.want)
		}
		if got.State == scaling.StateUnhealthy && got.Reason != ReasonHPAMetricsUnavailable {
			t.Errorf("%s: reason %q", tc.name, got.Reason)
		}
	}
}

func TestIdleVerdict(t *testing.T) {
	idle := &scaling.Result{State: scaling.StateIdle, Message: "all 1 triggers report idle"}
	active := &scaling.Result{State: scaling.StateActive, Message: "trigger 0: busy"}
	hpaIdle := &scaling.Result{State: scaling.StateIdle, Message: "every metric of HPA web reads zero"}
	hpaActive := &scaling.Result{State: scaling.StateActive, Message: "HPA web: metric 0 (External queue) does not read zero"}
	hpaNone := &scaling.Result{State: scaling.StateUnhealthy, Reason: ReasonHPAMetricsUnavailable, Message: "HPA web reports 0 readings for its 1 metrics"}
	for _, tc := range []struct {
		name string
		o    observed
		want *scaling.Result
	}{
		{"nothing evaluated", observed{}, nil},
		{"triggers alone", observed{triggers: active}, active},
		{"HPA not held is not heard", observed{triggers: idle, hpa: hpaObserved{metrics: hpaActive}}, idle},
		{"HPA alone", observed{noTriggers: true, hpa: hpaObserved{custody: true, metrics: hpaIdle}}, hpaIdle},
		{"both idle", observed{triggers: idle, hpa: hpaObserved{custody: true, metrics: hpaIdle}},
			&scaling.Result{State: scaling.StateIdle, Message: "all 1 triggers report idle; every metric of HPA web reads zero"}},
		{"HPA active", observed{triggers: idle, hpa: hpaObserved{custody: true, metrics: hpaActive}}, hpaActive},
		{"HPA without readings", observed{triggers: active, hpa: hpaObserved{custody: true, metrics: hpaNone}}, hpaNone},
	} {
		if diff := cmp.Diff(tc.want, tc.o.idleVerdict()); diff != "" {
			t.Errorf("%s: (-want +got)\n%s", tc.name, diff)
		}
	}
}

// TestGateView: an HPA in custody lets an ElastiService without triggers
// past the first gate; the others apply as before.
func TestGateView(t *testing.T) {
	created := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	es := &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)},
		Spec: elastiv1alpha1.ElastiServiceSpec{CooldownPeriod: 60}}
	if v := sleepgate.Evaluate(gateView(es, false), created.Add(time.Hour)); v.Reason != sleepgate.ReasonNoTriggers {
		t.Errorf("no custody: %+v", v)
	}
	if v := sleepgate.Evaluate(gateView(es, true), created.Add(time.Hour)); !v.Allowed() {
		t.Errorf("custody, cooldown over: %+v", v)
	}
	if v := sleepgate.Evaluate(gateView(es, true), created.Add(time.Second)); v.Reason != sleepgate.ReasonInCooldown {
		t.Errorf("custody, in cooldown: %+v", v)
	}
	if len(es.Spec.Triggers) != 0 {
		t.Error("gateView changed the ElastiService")
	}
}

func TestHPAChanged(t *testing.T) {
	base := held(newHPA(ptr.To[int32](1), externalMetric("queue")), "web")
	base.Status.CurrentMetrics = []autoscalingv2.MetricStatus{externalReading("queue", nil, q("3"))}
	for _, tc := range []struct {
		name string
		mut  func(*autoscalingv2.HorizontalPodAutoscaler)
		want bool
	}{
		{"a new nonzero reading", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Status.CurrentMetrics[0].External.Current.AverageValue = q("5")
		}, false},
		{"the reading drops to zero", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Status.CurrentMetrics[0].External.Current.AverageValue = q("0")
		}, true},
		{"minReplicas set back to 0", func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.MinReplicas = ptr.To[int32](0) }, true},
		{"annotation removed", func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Annotations = nil }, true},
		{"a metric added", func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.Metrics = append(h.Spec.Metrics, cpuMetric()) }, true},
		{"maxReplicas changed", func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.MaxReplicas = 9 }, false},
	} {
		n := base.DeepCopy()
		tc.mut(n)
		if got := hpaChanged().Update(event.UpdateEvent{ObjectOld: base, ObjectNew: n}); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestStatusWordsTheHPA: the Idle condition says why an HPA keeps the
// target awake.
func TestStatusWordsTheHPA(t *testing.T) {
	es := &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "n"},
		Spec: elastiv1alpha1.ElastiServiceSpec{Service: "web", Autoscaler: &elastiv1alpha1.AutoscalerRef{Type: elastiv1alpha1.AutoscalerHPA, Name: "web"}}}
	o := observed{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), serviceFound: true, targetFound: true, replicas: 1, resolvers: 1,
		ports: []elastiv1alpha1.ProxyPort{{Name: "http", Port: 80, ResolverPort: 20000}},
		sleep: sleepgate.Verdict{Reason: sleepgate.ReasonOpen, Polls: true}, noTriggers: true}
	for _, tc := range []struct {
		name   string
		hpa    hpaObserved
		status metav1.ConditionStatus
		reason string
	}{
		{"floor not raisable", hpaObserved{exposed: true}, metav1.ConditionFalse, ReasonHPAFloorNotRaised},
		{"held, reading nonzero", hpaObserved{custody: true, metrics: &scaling.Result{State: scaling.StateActive, Message: "busy"}}, metav1.ConditionFalse, ReasonTriggerActive},
		{"held, reading zero", hpaObserved{custody: true, metrics: &scaling.Result{State: scaling.StateIdle, Message: "zero"}}, metav1.ConditionTrue, ReasonAllTriggersIdle},
		{"held, no readings", hpaObserved{custody: true, metrics: &scaling.Result{State: scaling.StateUnhealthy, Reason: ReasonHPAMetricsUnavailable}}, metav1.ConditionUnknown, ReasonTriggersUnhealthy},
	} {
		o.hpa = tc.hpa
		st := desiredStatus(es, o, decide(o), effects{}, "elasti-system")
		c := meta.FindStatusCondition(st.Conditions, elastiv1alpha1.ConditionIdle)
		if c == nil || c.Status != tc.status || c.Reason != tc.reason {
			t.Errorf("%s: Idle %+v, want %s/%s", tc.name, c, tc.status, tc.reason)
		}
	}
}

// Zero readings of an HPA that is not scaling, or that resumed scaling
// within hpaSettle, may predate a wake and do not say idle.
func TestHPAVerdictWaitsForAReadingAfterTheWake(t *testing.T) {
	now := time.Now()
	withActive := func(status corev1.ConditionStatus, since time.Duration) *autoscalingv2.HorizontalPodAutoscaler {
		h := newHPA(ptr.To[int32](1), externalMetric("queue"), objectMetric("rps"))
		h.Status.CurrentMetrics = []autoscalingv2.MetricStatus{externalReading("queue", nil, q("0")), objectReading("rps", q("0"))}
		h.Status.Conditions = []autoscalingv2.HorizontalPodAutoscalerCondition{{
			Type: autoscalingv2.ScalingActive, Status: status, Reason: "test",
			LastTransitionTime: metav1.NewTime(now.Add(-since)),
		}}
		return h
	}
	for _, tc := range []struct {
		name string
		hpa  *autoscalingv2.HorizontalPodAutoscaler
		want scaling.State
	}{
		{"not scaling (disabled at zero)", withActive(corev1.ConditionFalse, time.Hour), scaling.StateActive},
		{"resumed 5s ago", withActive(corev1.ConditionTrue, 5*time.Second), scaling.StateActive},
		{"resumed just under the settle time", withActive(corev1.ConditionTrue, hpaSettle-time.Second), scaling.StateActive},
		{"scaling for a minute", withActive(corev1.ConditionTrue, time.Minute), scaling.StateIdle},
	} {
		if got := hpaMetricsVerdict(tc.hpa, now, time.Time{}); got.State != tc.want {
			t.Errorf("%s: %+v, want %s", tc.name, got, tc.want)
		}
	}
}

// Right after a wake the HPA still shows its readings from before it.
func TestHPAVerdictDistrustsZerosRightAfterAWake(t *testing.T) {
	now := time.Now()
	h := newHPA(ptr.To[int32](1), externalMetric("queue"))
	h.Status.CurrentMetrics = []autoscalingv2.MetricStatus{externalReading("queue", nil, q("0"))}
	for _, tc := range []struct {
		name string
		woke time.Time
		want scaling.State
	}{
		{"never woken", time.Time{}, scaling.StateIdle},
		{"woken 8s ago", now.Add(-8 * time.Second), scaling.StateActive},
		{"woken just under the settle time ago", now.Add(-hpaSettle + time.Second), scaling.StateActive},
		{"woken a while ago", now.Add(-2 * hpaSettle), scaling.StateIdle},
	} {
		if got := hpaMetricsVerdict(h, now, tc.woke); got.State != tc.want {
			t.Errorf("%s: %+v, want %s", tc.name, got, tc.want)
		}
	}
}
