package fallback

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/controller/wakeprogress"
)

// The FallbackActive condition (spec.proxy.fallback) and the reasons it
// carries. The resolvers read it: while it is True, held and new requests
// go to the fallback Service's ready endpoints instead of waiting. They also
// send a request there on their own once its hold has lasted
// fallback.after; the condition's DeadlinePassed says the same for the wake
// as a whole, so that requests arriving later are not held again.
const (
	// ReasonDeadlinePassed: the target has had no ready endpoint for
	// fallback.after since the wake began.
	ReasonDeadlinePassed = "DeadlinePassed"
	// ReasonPodsUnschedulable: a pod of the target cannot be scheduled
	// (PodScheduled=False, reason Unschedulable).
	ReasonPodsUnschedulable = "PodsUnschedulable"
	// ReasonScaleRefused: the API server refused the wake's write to the
	// target's /scale (a policy, a webhook, a quota on the scale).
	ReasonScaleRefused = "ScaleRefused"
	// ReasonPodsNotCreated: no pod of the wake exists and the workload
	// controller says it cannot create one (a ResourceQuota, a LimitRange,
	// an admission webhook): the target's ReplicaFailure=True condition, or
	// a FailedCreate Warning Event about it, since the wake (notcreated.go).
	ReasonPodsNotCreated = "PodsNotCreated"
	// ReasonUnavailable: one of the above holds, but the fallback Service
	// does not exist or has no ready endpoint; requests are held.
	ReasonUnavailable = "FallbackUnavailable"
	// ReasonNotNeeded: the target is ready, asleep without a wake, or
	// waking within fallback.after.
	ReasonNotNeeded = "NotNeeded"
)

// recheckInterval is how often a reconcile comes back while a wake with a
// fallback is in progress: the target's pods are not watched (the cache
// holds only the resolvers'), so an unschedulable pod is found by looking.
const recheckInterval = 5 * time.Second

// Observed is what the FallbackActive condition is derived from (Observe).
// The zero value is an ElastiService without a fallback.
type Observed struct {
	// After is spec.proxy.fallback.after; zero when there is no fallback.
	After   time.Duration
	Service string
	// Waking: a wake is in progress in proxy mode and the target has no
	// ready endpoint; WokeAt is when it began (the Active condition's
	// turn to Waking).
	Waking bool
	WokeAt time.Time
	// ServiceFound and Ready describe the fallback Service.
	ServiceFound, Ready bool
	// Refused, NotCreated and Unschedulable are the messages of a failed
	// wake.
	Refused, NotCreated, Unschedulable string
}

// verdict is the FallbackActive condition, as a pure function of what was
// observed, and when to look again. ok is false when there is no fallback,
// and the condition goes. When more than one cause holds, the earliest step
// of the wake that failed names it: the scale write (ScaleRefused), the
// pods' creation (PodsNotCreated), their scheduling (PodsUnschedulable);
// then the deadline (DeadlinePassed).
func verdict(f Observed, now time.Time) (status metav1.ConditionStatus, reason, msg string, recheck time.Duration, ok bool) {
	if f.After <= 0 {
		return "", "", "", 0, false
	}
	if !f.Waking {
		return metav1.ConditionFalse, ReasonNotNeeded, "the target is not waking; requests go to it, or wait for its wake", 0, true
	}
	var cause, why string
	switch {
	case f.Refused != "":
		cause, why = ReasonScaleRefused, "the wake's scale write was refused: "+f.Refused
	case f.NotCreated != "":
		cause, why = ReasonPodsNotCreated, wakeprogress.MsgPodsNotCreated+f.NotCreated
	case f.Unschedulable != "":
		cause, why = ReasonPodsUnschedulable, "a pod of the target cannot be scheduled: "+f.Unschedulable
	case !f.WokeAt.IsZero() && now.Sub(f.WokeAt) >= f.After:
		cause, why = ReasonDeadlinePassed, fmt.Sprintf("the target has had no ready endpoint for %s since the wake (fallback.after %s)", now.Sub(f.WokeAt).Round(time.Second), f.After)
	default:
		recheck = recheckInterval
		if !f.WokeAt.IsZero() {
			recheck = min(recheck, max(f.WokeAt.Add(f.After).Sub(now), time.Millisecond))
		}
		return metav1.ConditionFalse, ReasonNotNeeded, fmt.Sprintf("the target is waking, within fallback.after (%s)", f.After), recheck, true
	}
	switch {
	case !f.ServiceFound:
		return metav1.ConditionFalse, ReasonUnavailable, why + fmt.Sprintf("; fallback Service %s does not exist, so requests are held", f.Service), recheckInterval, true
	case !f.Ready:
		return metav1.ConditionFalse, ReasonUnavailable, why + fmt.Sprintf("; fallback Service %s has no ready endpoint, so requests are held", f.Service), recheckInterval, true
	}
	return metav1.ConditionTrue, cause, why + fmt.Sprintf("; requests go to fallback Service %s until the target is ready", f.Service), recheckInterval, true
}

// Recheck is how soon a reconcile comes back while a wake with a fallback
// is in progress: at the deadline, and to look at the target's pods again;
// zero when there is no need.
func Recheck(f Observed, now time.Time) time.Duration {
	_, _, _, recheck, _ := verdict(f, now)
	return recheck
}

// SetCondition writes the FallbackActive condition into st, or removes it
// when there is no fallback. generation is the ElastiService's.
func SetCondition(st *elastiv1alpha1.ElastiServiceStatus, generation int64, f Observed, now time.Time) {
	status, reason, msg, _, ok := verdict(f, now)
	if !ok {
		meta.RemoveStatusCondition(&st.Conditions, elastiv1alpha1.ConditionFallbackActive)
		return
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: elastiv1alpha1.ConditionFallbackActive, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now),
	})
}
