package doze

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestProgress(t *testing.T) {
	// A pod whose spec was resized to 5m CPU and 32Mi memory; generation
	// 2 is the resize's.
	base := func() *corev1.Pod {
		p := podOf("u1", ctr("app", "cpu=5m,memory=32Mi", "memory=256Mi"))
		p.Generation = 2
		p.Status.ObservedGeneration = 2
		p.Status.ContainerStatuses[0].Resources = &corev1.ResourceRequirements{Requests: list("cpu=5m,memory=32Mi"), Limits: list("memory=256Mi")}
		return p
	}
	with := func(edit func(p *corev1.Pod)) *corev1.Pod {
		p := base()
		edit(p)
		return p
	}
	cond := func(t corev1.PodConditionType, reason, msg string) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: msg, ObservedGeneration: 2}
	}

	for _, tc := range []struct {
		name       string
		pod        *corev1.Pod
		generation int64
		want       State
		wantWords  string
	}{
		{name: "done", pod: base(), generation: 2, want: Done},
		{name: "no generation known", pod: base(), generation: 0, want: Done},
		{name: "kubelet reports no observedGeneration", pod: with(func(p *corev1.Pod) { p.Status.ObservedGeneration = 0 }), generation: 2, want: Done},
		{name: "generation not observed yet", pod: with(func(p *corev1.Pod) { p.Status.ObservedGeneration = 1 }), generation: 2,
			want: InProgress, wantWords: "observed generation 1 of the pod, not yet 2"},
		{name: "infeasible", pod: with(func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, cond(corev1.PodResizePending, corev1.PodReasonInfeasible, "Node didn't have enough capacity: cpu, requested: 8000, capacity: 4000"))
		}), generation: 2, want: Infeasible, wantWords: "PodResizePending (Infeasible): Node didn't have enough capacity"},
		{name: "deferred", pod: with(func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, cond(corev1.PodResizePending, corev1.PodReasonDeferred, "Node didn't have enough resource: cpu"))
		}), generation: 2, want: Deferred, wantWords: "Deferred"},
		{name: "pending wins over in progress", pod: with(func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions,
				cond(corev1.PodResizeInProgress, "", ""),
				cond(corev1.PodResizePending, corev1.PodReasonDeferred, ""))
		}), generation: 2, want: Deferred},
		{name: "pending condition that is not true is ignored", pod: with(func(p *corev1.Pod) {
			c := cond(corev1.PodResizePending, corev1.PodReasonInfeasible, "")
			c.Status = corev1.ConditionFalse
			p.Status.Conditions = append(p.Status.Conditions, c)
		}), generation: 2, want: Done},
		{name: "in progress", pod: with(func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, cond(corev1.PodResizeInProgress, "", ""))
		}), generation: 2, want: InProgress, wantWords: "PodResizeInProgress"},
		{name: "error", pod: with(func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, cond(corev1.PodResizeInProgress, corev1.PodReasonError, "memory usage above the new limit"))
		}), generation: 2, want: Failed, wantWords: "memory usage above the new limit"},
		{name: "no resources reported", pod: with(func(p *corev1.Pod) { p.Status.ContainerStatuses[0].Resources = nil }), generation: 2,
			want: InProgress, wantWords: `container "app" reports no resources yet`},
		{name: "no container status", pod: with(func(p *corev1.Pod) { p.Status.ContainerStatuses = nil }), generation: 2,
			want: InProgress, wantWords: "reports no resources"},
		{name: "CPU not actuated", pod: with(func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].Resources.Requests = list("cpu=250m,memory=32Mi")
		}), generation: 2, want: InProgress, wantWords: `CPU request of 250m, not yet 5m`},
		{name: "memory not allocated", pod: with(func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].Resources.Requests = list("cpu=5m,memory=128Mi")
		}), generation: 2, want: InProgress, wantWords: `memory request of 128Mi, not yet 32Mi`},
		{name: "CPU read back from shares, one millicore off", pod: with(func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = list("cpu=99m,memory=32Mi")
			p.Status.ContainerStatuses[0].Resources.Requests = list("cpu=100m,memory=32Mi")
		}), generation: 2, want: Done},
		{name: "1m reads back as 2m, the kernel minimum", pod: with(func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = list("cpu=1m,memory=32Mi")
			p.Status.ContainerStatuses[0].Resources.Requests = list("cpu=2m,memory=32Mi")
		}), generation: 2, want: Done},
		{name: "no CPU at all is not the minimum", pod: with(func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests = list("cpu=1m,memory=32Mi")
			p.Status.ContainerStatuses[0].Resources.Requests = list("memory=32Mi")
		}), generation: 2, want: InProgress},
		{name: "no pod", pod: nil, generation: 2, want: InProgress},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, msg := Progress(tc.pod, tc.generation)
			if got != tc.want {
				t.Fatalf("state %s (%s), want %s", got, msg, tc.want)
			}
			if !strings.Contains(msg, tc.wantWords) {
				t.Errorf("message %q does not say %q", msg, tc.wantWords)
			}
		})
	}
}
