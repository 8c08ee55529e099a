package hpacustody

import (
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/utils/ptr"
)

func TestCustodyStep(t *testing.T) {
	ext := externalMetric("queue")
	for _, tc := range []struct {
		name     string
		hpa      *autoscalingv2.HorizontalPodAutoscaler
		eligible bool
		want     step
	}{
		{"floor 0 on External metrics: take custody", newHPA(ptr.To[int32](0), ext), true, stepRaise},
		{"floor 0 but a CPU metric: left alone", newHPA(ptr.To[int32](0), ext, cpuMetric()), false, stepLeave},
		{"floor 1, not held: left alone", newHPA(ptr.To[int32](1), ext), true, stepLeave},
		{"floor unset (1), not held: left alone", newHPA(nil, ext), true, stepLeave},
		{"floor 3, not held: left alone", newHPA(ptr.To[int32](3), ext), true, stepLeave},
		{"held at 1: kept", held(newHPA(ptr.To[int32](1), ext), "web"), true, stepKeep},
		{"held, set back to 0: raised again", held(newHPA(ptr.To[int32](0), ext), "web"), true, stepRaise},
		{"held by another name: taken over", held(newHPA(ptr.To[int32](1), ext), "old"), true, stepRaise},
		{"held, owner set 2: custody ends", held(newHPA(ptr.To[int32](2), ext), "web"), true, stepEnd},
		{"held, owner set 3 and a CPU metric: custody ends, 3 stands", held(newHPA(ptr.To[int32](3), ext, cpuMetric()), "web"), false, stepEnd},
		{"held, a CPU metric added: floor restored", held(newHPA(ptr.To[int32](1), ext, cpuMetric()), "web"), false, stepRestore},
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
