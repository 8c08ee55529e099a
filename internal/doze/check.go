package doze

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// Fields of spec.doze that a Refusal can be about.
const (
	// FieldPod: the refusal is about the pods as a whole, not one floor.
	FieldPod = ""
	// FieldCPU: the refusal is about spec.doze.cpu.
	FieldCPU = "cpu"
	// FieldMemory: the refusal is about spec.doze.memory.
	FieldMemory = "memory"
)

// Refusal is one reason the target's pods cannot doze at a floor.
type Refusal struct {
	// Field is the part of spec.doze the refusal is about: FieldCPU,
	// FieldMemory, or FieldPod for the pods as a whole.
	Field string
	// Message says what is wrong, naming the container if one is at
	// fault, and what to write instead.
	Message string
}

// Check returns why pods made from spec, a target's pod template, cannot
// doze at floor; nil when they can. On top of the rules a live pod is held
// to (podRefusals), a template must leave something to free, and its
// requests must not be below the floor: a floor above a request would
// raise it, and a raise is the resize that may be Deferred for lack of
// room.
func Check(spec *corev1.PodSpec, floor elastiv1alpha1.DozeSpec) []Refusal {
	if spec == nil {
		return []Refusal{{FieldPod, "the target has no pod template to read requests from"}}
	}
	out := podRefusals(spec, floor)
	frees := false
	for i := range spec.Containers {
		c := &spec.Containers[i]
		for _, r := range floorsOf(floor) {
			req, ok := request(c, r.name)
			if !ok {
				continue
			}
			switch req.Cmp(r.floor) {
			case 1:
				frees = true
			case -1:
				out = append(out, Refusal{r.field, fmt.Sprintf(
					"%s is above container %q's %s request %s in the target's pod template; a doze only lowers requests: use at most %s",
					r.floor.String(), c.Name, r.word, req.String(), req.String())})
			}
		}
	}
	if len(out) == 0 && !frees {
		out = append(out, Refusal{FieldPod, "no container of the target requests more than the floor, so dozing would free nothing; lower the floor, or use sleepMode: ScaleToZero"})
	}
	return out
}

// podRefusals are the rules a pod is held to, a template at admission as
// a live pod before its resize: the API server's own refusals of a
// resize (a change of QoS class), and the containers a resize would
// restart.
func podRefusals(spec *corev1.PodSpec, floor elastiv1alpha1.DozeSpec) []Refusal {
	if spec.Resources != nil && (len(spec.Resources.Requests) > 0 || len(spec.Resources.Limits) > 0) {
		return []Refusal{{FieldPod, "the target's pods set pod-level resources (spec.resources); a doze resizes containers only: use sleepMode: ScaleToZero"}}
	}
	switch qosClass(spec) {
	case corev1.PodQOSBestEffort:
		return []Refusal{{FieldPod, "the target's pods are BestEffort: no container requests CPU or memory, so dozing would free nothing, and a resize may not give them a request (that would change their QoS class); give the containers requests, or use sleepMode: ScaleToZero"}}
	case corev1.PodQOSGuaranteed:
		return []Refusal{{FieldPod, "the target's pods are Guaranteed (each container's requests equal its limits): lowering requests alone would make them Burstable, and a resize may not change a pod's QoS class; set limits above requests, or use sleepMode: ScaleToZero"}}
	}
	var out []Refusal
	for i := range spec.Containers {
		c := &spec.Containers[i]
		for _, r := range floorsOf(floor) {
			req, ok := request(c, r.name)
			if !ok || req.Cmp(r.floor) <= 0 || !restartsOnResize(c, r.name) {
				continue
			}
			out = append(out, Refusal{r.field, fmt.Sprintf(
				"container %q restarts when its %s is resized (resizePolicy RestartContainer), so a doze would restart it at the dozing size; set its resizePolicy for %s to NotRequired, or use sleepMode: ScaleToZero",
				c.Name, r.word, r.name)})
		}
	}
	return out
}

// resourceFloor is one resource of the floor.
type resourceFloor struct {
	name  corev1.ResourceName
	field string
	word  string
	floor resource.Quantity
}

// floorsOf lists the resources floor lowers: CPU always, memory when set.
func floorsOf(floor elastiv1alpha1.DozeSpec) []resourceFloor {
	out := []resourceFloor{{corev1.ResourceCPU, FieldCPU, "CPU", floor.CPU}}
	if floor.Memory != nil {
		out = append(out, resourceFloor{corev1.ResourceMemory, FieldMemory, "memory", *floor.Memory})
	}
	return out
}

func restartsOnResize(c *corev1.Container, name corev1.ResourceName) bool {
	for _, p := range c.ResizePolicy {
		if p.ResourceName == name && p.RestartPolicy == corev1.RestartContainer {
			return true
		}
	}
	return false
}
