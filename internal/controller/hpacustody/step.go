package hpacustody

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
)

// heldFloor is the minReplicas of an HPA in custody.
const heldFloor int32 = 1

// step is what Sync does to the HPA an ElastiService names.
type step int

const (
	// stepLeave: not in custody, and none to take.
	stepLeave step = iota
	// stepKeep: in custody, nothing to write.
	stepKeep
	// stepRaise: take custody (or take it again after someone set the
	// floor back to 0): minReplicas 1 and the annotations.
	stepRaise
	// stepEnd: the owner set the floor to 2 or more; it stands and the
	// annotations go.
	stepEnd
	// stepRestore: the HPA can no longer be held (its metrics or its target
	// changed): the recorded floor comes back and the annotations go.
	stepRestore
)

// custodyStep decides, from the HPA alone, what to do with it. custodian is
// the ElastiService that names it; eligible says whether the HPA can be held
// (custodyEligible).
func custodyStep(h *autoscalingv2.HorizontalPodAutoscaler, custodian string, eligible bool) step {
	floor := ptr.Deref(h.Spec.MinReplicas, 1)
	_, held := h.Annotations[contract.AnnotationHPAMinReplicas]
	switch {
	case held && floor > heldFloor:
		return stepEnd
	case held && !eligible:
		return stepRestore
	case held && (floor < heldFloor || h.Annotations[contract.AnnotationHPACustodian] != custodian):
		return stepRaise
	case held:
		return stepKeep
	case floor == 0 && eligible:
		return stepRaise
	default:
		return stepLeave
	}
}

// custodyEligible reports whether Elasti can hold the HPA's last step: it
// scales the ElastiService's target, and every metric is of type Object or
// External, the kinds whose readings can say zero and the only ones that let
// an HPA scale to zero. Any other metric (CPU, say) reads only while pods
// run, so the HPA's verdict would be incomplete; such an HPA is left to
// itself.
func custodyEligible(h *autoscalingv2.HorizontalPodAutoscaler, target elastiv1alpha1.ScaleTargetRef) bool {
	if !sameWorkload(h.Spec.ScaleTargetRef, target) || len(h.Spec.Metrics) == 0 {
		return false
	}
	for _, m := range h.Spec.Metrics {
		if m.Type != autoscalingv2.ObjectMetricSourceType && m.Type != autoscalingv2.ExternalMetricSourceType {
			return false
		}
	}
	return true
}

// sameWorkload compares an HPA's scale target with an ElastiService's by
// group, kind and name; the version may differ.
func sameWorkload(ref autoscalingv2.CrossVersionObjectReference, target elastiv1alpha1.ScaleTargetRef) bool {
	a, err1 := schema.ParseGroupVersion(ref.APIVersion)
	b, err2 := schema.ParseGroupVersion(target.APIVersion)
	return err1 == nil && err2 == nil && a.Group == b.Group && ref.Kind == target.Kind && ref.Name == target.Name
}

// heldBy reports whether the ElastiService named custodian holds the HPA's
// floor.
func heldBy(h *autoscalingv2.HorizontalPodAutoscaler, custodian string) bool {
	_, held := h.Annotations[contract.AnnotationHPAMinReplicas]
	return held && h.Annotations[contract.AnnotationHPACustodian] == custodian
}
