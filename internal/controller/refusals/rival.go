package refusals

import (
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// Rival finds the ElastiService that keeps es from acting: an older one
// (by creation time, then name) among claimants, the ElastiServices that
// name the same Service or the same scale target (es itself may be among
// them). Two ElastiServices on one Service or one target would fight, one
// waking what the other puts to sleep; the older one wins,
// deterministically, and the younger stands down. It returns the rival and
// ReasonServiceClaimed or ReasonTargetClaimed, or nil when there is none.
func Rival(es *elastiv1alpha1.ElastiService, claimants []elastiv1alpha1.ElastiService) (*elastiv1alpha1.ElastiService, string) {
	var older []elastiv1alpha1.ElastiService
	for i := range claimants {
		if claimants[i].UID != es.UID && claimants[i].Precedes(es) {
			older = append(older, claimants[i])
		}
	}
	if len(older) == 0 {
		return nil, ""
	}
	sort.Slice(older, func(i, j int) bool { return older[i].Precedes(&older[j]) })
	w := &older[0]
	if w.Spec.Service == es.Spec.Service {
		return w, ReasonServiceClaimed
	}
	return w, ReasonTargetClaimed
}

// StandDownStatus is the status of an ElastiService that rival keeps from
// acting (reason from Rival), as of now: serve mode, no proxy ports, no
// wake in progress, and Ready=False naming the rival. The refusal it
// returns is that Ready reason and message, for the Warning Event. The
// caller writes the status, and leaves nothing of the ElastiService's own
// in the data path.
func StandDownStatus(es, rival *elastiv1alpha1.ElastiService, reason string, now time.Time) (elastiv1alpha1.ElastiServiceStatus, Refusal) {
	var msg string
	if reason == ReasonServiceClaimed {
		msg = fmt.Sprintf("ElastiService %s, created earlier, already manages Service %s; this one does nothing until that one is deleted or names another Service. Delete one of the two",
			rival.Name, es.Spec.Service)
	} else {
		msg = fmt.Sprintf("ElastiService %s, created earlier, already manages %s %s; this one does nothing until that one is deleted or names another target. Delete one of the two",
			rival.Name, es.Spec.ScaleTargetRef.Kind, es.Spec.ScaleTargetRef.Name)
	}
	st := *es.Status.DeepCopy()
	st.ObservedGeneration = es.Generation
	st.Mode = elastiv1alpha1.ModeServe
	st.ProxyPorts = nil
	st.WakeProgress = nil
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: elastiv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg,
		ObservedGeneration: es.Generation, LastTransitionTime: metav1.NewTime(now),
	})
	return st, Refusal{Reason: reason, Message: msg}
}

// Claimed names what a claim reason says the rival manages: "Service" or
// "scale target".
func Claimed(reason string) string {
	if reason == ReasonServiceClaimed {
		return "Service"
	}
	return "scale target"
}
