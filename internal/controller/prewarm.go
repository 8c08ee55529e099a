package controller

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// announcePreWarm emits PreWarmed for a firing the wake acted on: the
// target was woken, or, already up, keeps its replicas and restarts its
// cooldown.
func (r *Reconciler) announcePreWarm(es *elastiv1alpha1.ElastiService, firing time.Time, replicas int32, scaled bool) {
	ref := es.Spec.ScaleTargetRef
	at := firing.Format("2006-01-02 15:04 MST")
	if scaled {
		r.recorder.Eventf(es, nil, corev1.EventTypeNormal, EventPreWarmed, "PreWarm",
			"pre-warm firing of %s: woke %s %s to %d replicas", at, ref.Kind, ref.Name, replicas)
		return
	}
	r.recorder.Eventf(es, nil, corev1.EventTypeNormal, EventPreWarmed, "PreWarm",
		"pre-warm firing of %s: %s %s was up already (%d replicas); its cooldown starts again", at, ref.Kind, ref.Name, replicas)
}
