package hpacustody

import (
	"fmt"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"elasti.dev/elasti/internal/scaling"
)

// MetricsVerdict says what an HPA's own readings say about its target, as
// a trigger would: idle when status.currentMetrics holds one reading per
// spec.metrics entry, each of an Object or External metric, and every
// reading (value and averageValue, whichever is set) is zero; active when
// one is not zero; unhealthy when a reading is missing. Messages hold no
// measured value, so that they stay stable from one reading to the next.
//
// Zero readings are not taken for idle while they may predate the last
// wake (woke; zero for none): within settle of it, or while the HPA is not
// scaling (its ScalingActive condition False, as at a zero it did not
// cause) or resumed less than settle ago. Right after a wake the HPA still
// shows readings from before it, and its next syncs read metrics that the
// traffic which woke the target may not have reached yet (scrape interval,
// rate window). Taking those zeros for idle put the target back to sleep in
// the middle of a burst (TestHPAMinReplicasZeroWithElasti, e2e).
func MetricsVerdict(h *autoscalingv2.HorizontalPodAutoscaler, now, woke time.Time) scaling.Result {
	spec, cur := h.Spec.Metrics, h.Status.CurrentMetrics
	if len(spec) == 0 || len(cur) != len(spec) {
		return scaling.Result{State: scaling.StateUnhealthy, Reason: ReasonMetricsUnavailable,
			Message: fmt.Sprintf("HPA %s reports %d readings for its %d metrics", h.Name, len(cur), len(spec))}
	}
	for i, m := range spec {
		values, ok := currentValues(cur[i], m.Type)
		if !ok {
			return scaling.Result{State: scaling.StateUnhealthy, Reason: ReasonMetricsUnavailable,
				Message: fmt.Sprintf("HPA %s reports no reading for metric %d (%s)", h.Name, i, metricName(m))}
		}
		for _, q := range values {
			if !q.IsZero() {
				return scaling.Result{State: scaling.StateActive, Value: q.AsApproximateFloat64(),
					Message: fmt.Sprintf("HPA %s: metric %d (%s) does not read zero", h.Name, i, metricName(m))}
			}
		}
	}
	if !woke.IsZero() && now.Sub(woke) < settle {
		return scaling.Result{State: scaling.StateActive,
			Message: fmt.Sprintf("HPA %s: woken less than %s ago, waiting for readings taken after the wake", h.Name, settle)}
	}
	for _, c := range h.Status.Conditions {
		if c.Type != autoscalingv2.ScalingActive {
			continue
		}
		if c.Status != corev1.ConditionTrue {
			return scaling.Result{State: scaling.StateActive,
				Message: fmt.Sprintf("HPA %s is not scaling (%s): its zero readings may be stale", h.Name, c.Reason)}
		}
		if since := now.Sub(c.LastTransitionTime.Time); since < settle {
			return scaling.Result{State: scaling.StateActive,
				Message: fmt.Sprintf("HPA %s resumed scaling less than %s ago: waiting for a reading taken after the wake", h.Name, settle)}
		}
	}
	return scaling.Result{State: scaling.StateIdle, Message: fmt.Sprintf("every metric of HPA %s reads zero", h.Name)}
}

// settle is how long after a wake, or after an HPA resumes scaling, its
// zero readings are not yet trusted to say idle: two syncs of the HPA
// controller (15 s each by default, --horizontal-pod-autoscaler-sync-period)
// and a scrape, so that the reading used was taken at a sync that came after
// the wake's traffic reached the metric.
const settle = 40 * time.Second

// currentValues returns the value and averageValue a reading holds, for a
// reading of the metric type want; false when it holds neither.
func currentValues(st autoscalingv2.MetricStatus, want autoscalingv2.MetricSourceType) ([]resource.Quantity, bool) {
	var cur *autoscalingv2.MetricValueStatus
	switch {
	case st.Type != want:
	case want == autoscalingv2.ObjectMetricSourceType && st.Object != nil:
		cur = &st.Object.Current
	case want == autoscalingv2.ExternalMetricSourceType && st.External != nil:
		cur = &st.External.Current
	}
	if cur == nil {
		return nil, false
	}
	var out []resource.Quantity
	for _, q := range []*resource.Quantity{cur.Value, cur.AverageValue} {
		if q != nil {
			out = append(out, *q)
		}
	}
	return out, len(out) > 0
}

func metricName(m autoscalingv2.MetricSpec) string {
	switch {
	case m.Object != nil:
		return "Object " + m.Object.Metric.Name
	case m.External != nil:
		return "External " + m.External.Metric.Name
	}
	return string(m.Type)
}
