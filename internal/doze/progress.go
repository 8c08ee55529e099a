package doze

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// State is how far a pod's resize has got, as its status reports it.
type State string

// States of a resize, from what the kubelet writes in the pod's status.
const (
	// Done: the kubelet has observed the pod's generation, reports no
	// pending or unfinished resize, and runs each container with the
	// requests of its spec.
	Done State = "Done"
	// InProgress: the kubelet has not caught up yet; wait for it.
	InProgress State = "InProgress"
	// Deferred: the resize fits the node in principle but not now
	// (PodResizePending, reason Deferred); the kubelet retries. A wake
	// that meets it scales out a fresh pod rather than waiting for room.
	Deferred State = "Deferred"
	// Infeasible: the node can never grant the resize (PodResizePending,
	// reason Infeasible); the kubelet does not retry. A doze that meets
	// it is undone, and the target scaled to zero instead.
	Infeasible State = "Infeasible"
	// Failed: the kubelet tried and the runtime refused
	// (PodResizeInProgress, reason Error); it retries at each sync, so
	// the caller decides how long to wait.
	Failed State = "Error"
)

// Progress says how far the resize of pod toward the requests in its spec
// has got, and why in words. generation is the pod's metadata.generation
// that the resize produced (0 when unknown): until the kubelet reports
// having observed it, an absent condition may only mean it has not looked
// yet. A kubelet that reports no observedGeneration at all is judged by
// its conditions and container resources alone.
//
// Pending is checked before in progress: when both are present, a new
// resize arrived while an older one was still being applied, and the new
// one is what the caller waits for.
func Progress(pod *corev1.Pod, generation int64) (State, string) {
	if pod == nil {
		return InProgress, "no pod"
	}
	if c := condition(pod, corev1.PodResizePending); c != nil {
		switch c.Reason {
		case corev1.PodReasonInfeasible:
			return Infeasible, conditionMessage(c)
		case corev1.PodReasonDeferred:
			return Deferred, conditionMessage(c)
		}
		return InProgress, conditionMessage(c)
	}
	if c := condition(pod, corev1.PodResizeInProgress); c != nil {
		if c.Reason == corev1.PodReasonError {
			return Failed, conditionMessage(c)
		}
		return InProgress, conditionMessage(c)
	}
	if observed := pod.Status.ObservedGeneration; observed != 0 && observed < generation {
		return InProgress, fmt.Sprintf("the kubelet has observed generation %d of the pod, not yet %d", observed, generation)
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		s := containerStatus(pod, c.Name)
		if s == nil || s.Resources == nil {
			return InProgress, fmt.Sprintf("container %q reports no resources yet", c.Name)
		}
		if want, ok := nonZero(c.Resources.Requests, corev1.ResourceCPU); ok {
			got, _ := nonZero(s.Resources.Requests, corev1.ResourceCPU)
			if !sameCPU(want, got) {
				return InProgress, fmt.Sprintf("container %q runs with a CPU request of %s, not yet %s", c.Name, got.String(), want.String())
			}
		}
		if want, ok := nonZero(c.Resources.Requests, corev1.ResourceMemory); ok {
			got, _ := nonZero(s.Resources.Requests, corev1.ResourceMemory)
			if want.Cmp(got) != 0 {
				return InProgress, fmt.Sprintf("container %q runs with a memory request of %s, not yet %s", c.Name, got.String(), want.String())
			}
		}
	}
	return Done, ""
}

// sameCPU compares a CPU request in the spec with the one the kubelet
// reports. The kubelet reads it back from cpu.shares (1024 per core, at
// least 2), so a request comes back rounded up to a whole share: 1m reads
// as 2m. Within one millicore, or both at the kernel's minimum, is the
// same request; none reported is not.
func sameCPU(want, got resource.Quantity) bool {
	w, g := want.MilliValue(), got.MilliValue()
	if g <= 0 {
		return false
	}
	if w <= 2 && g <= 2 {
		return true
	}
	d := w - g
	return d >= -1 && d <= 1
}

func condition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		c := &pod.Status.Conditions[i]
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

func conditionMessage(c *corev1.PodCondition) string {
	s := string(c.Type)
	if c.Reason != "" {
		s += " (" + c.Reason + ")"
	}
	if c.Message != "" {
		s += ": " + c.Message
	}
	return s
}
