package hpacustody

import (
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"elasti.dev/elasti/internal/scaling"
)

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
		got := MetricsVerdict(tc.hpa, time.Now(), time.Time{})
		if got.State != tc.want {
			t.Errorf("%s: %+v, want %s", tc.name, got, tc.want)
		}
		if got.State == scaling.StateUnhealthy && got.Reason != ReasonMetricsUnavailable {
			t.Errorf("%s: reason %q", tc.name, got.Reason)
		}
	}
}

// Zero readings of an HPA that is not scaling, or that resumed scaling
// within settle, may predate a wake and do not say idle.
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
		{"resumed just under the settle time", withActive(corev1.ConditionTrue, settle-time.Second), scaling.StateActive},
		{"scaling for a minute", withActive(corev1.ConditionTrue, time.Minute), scaling.StateIdle},
	} {
		if got := MetricsVerdict(tc.hpa, now, time.Time{}); got.State != tc.want {
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
		{"woken just under the settle time ago", now.Add(-settle + time.Second), scaling.StateActive},
		{"woken a while ago", now.Add(-2 * settle), scaling.StateIdle},
	} {
		if got := MetricsVerdict(h, now, tc.woke); got.State != tc.want {
			t.Errorf("%s: %+v, want %s", tc.name, got, tc.want)
		}
	}
}
