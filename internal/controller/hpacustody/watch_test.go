package hpacustody

import (
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

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
		if got := Changed().Update(event.UpdateEvent{ObjectOld: base, ObjectNew: n}); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
