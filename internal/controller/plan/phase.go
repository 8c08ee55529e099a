package plan

import (
	"k8s.io/apimachinery/pkg/api/meta"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
)

// Phase is where an ElastiService is in its serve/proxy cycle. It is derived
// from the status and the target, never stored on its own.
type Phase string

const (
	// PhaseServe: traffic goes straight to the target; triggers are polled.
	PhaseServe Phase = "Serve"
	// PhaseScalingDown: the proxy slice is in place and the grace period
	// runs before the target goes to zero. Traffic in it reaches the
	// resolvers, which report it as activation calls; at its end the
	// triggers are evaluated again.
	PhaseScalingDown Phase = "ScalingDown"
	// PhaseProxy: the target is at zero, or dozing, and the resolvers hold
	// traffic.
	PhaseProxy Phase = "Proxy"
	// PhaseWaking: the target was woken and has replicas; the resolvers hold
	// traffic until it has a ready endpoint.
	PhaseWaking Phase = "Waking"
)

// CurrentPhase derives the phase from the persisted status and the target's
// replica count. A dozing target (status.doze, Active reason Dozing) is
// asleep with its replicas; once a wake began writing its requests back,
// the Active reason says Waking.
func CurrentPhase(st elastiv1alpha1.ElastiServiceStatus, replicas int32) Phase {
	if st.Mode != elastiv1alpha1.ModeProxy {
		return PhaseServe
	}
	c := meta.FindStatusCondition(st.Conditions, elastiv1alpha1.ConditionActive)
	if c != nil && c.Reason == contract.ReasonScalingDown {
		return PhaseScalingDown
	}
	if replicas == 0 || (st.Doze != nil && c != nil && c.Reason == contract.ReasonDozing) {
		return PhaseProxy
	}
	return PhaseWaking
}
