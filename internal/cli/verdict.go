package cli

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/sleepgate"
)

// scaleDownVerdict explains in one line whether the ElastiService is on its
// way to zero and, if not, what holds it. It decides nothing itself: the
// sleep gates are the operator's own chain (internal/sleepgate), and the rest
// is read from the conditions the operator wrote. It words them in this
// order: a pending wake; a gate that only a change to the object lifts (no
// triggers, keep-awake, a bad enabledPeriod); Ready; a gate that time lifts
// (the cooldown, the enabledPeriod); then the triggers and the resolvers.
func scaleDownVerdict(es *elastiv1alpha1.ElastiService, now time.Time) string {
	conds := es.Status.Conditions
	_, wakeRequested := es.Annotations[contract.AnnotationWakeNow]
	active := meta.FindStatusCondition(conds, elastiv1alpha1.ConditionActive)

	if es.Status.Mode == elastiv1alpha1.ModeProxy {
		switch {
		case active != nil && active.Reason == contract.ReasonScalingDown:
			return "scaling down now: every trigger is idle; the target goes to zero when the grace period ends"
		case wakeRequested:
			return "waking: a wake was requested (" + contract.AnnotationWakeNow + ") and the operator is acting on it"
		case contract.KeepAwake(es.Annotations):
			return "waking: " + contract.AnnotationKeepAwake + "=" + contract.KeepAwakeOn + " makes the operator wake the target"
		case active != nil && active.Reason == contract.ReasonScaledToZero:
			return fmt.Sprintf("asleep: scaled to zero %s ago; the first request, or `kubectl elasti wake %s`, wakes it",
				age(now, es.Status.LastScaledDownTime), es.Name)
		case active != nil && active.Reason == contract.ReasonDozing:
			return fmt.Sprintf("asleep: dozing for %s, its pods kept with their requests lowered to spec.doze; the first request through a resolver, a trigger that sees traffic reach the pods, or `kubectl elasti wake %s`, wakes it",
				age(now, es.Status.LastScaledDownTime), es.Name)
		default:
			return "waking: the target has replicas but no ready endpoint yet; the resolvers hold its traffic"
		}
	}

	if es.Status.Mode == "" && len(conds) == 0 {
		return "unknown: the operator has not reconciled this ElastiService yet"
	}
	if wakeRequested {
		return "no: a wake request (" + contract.AnnotationWakeNow + ") is waiting for the operator"
	}
	gate := sleepgate.Evaluate(es, now)
	if !gate.Allowed() && !gate.Polls {
		return "no: " + gateText(es, gate)
	}
	if c := meta.FindStatusCondition(conds, elastiv1alpha1.ConditionReady); c != nil && c.Status == metav1.ConditionFalse {
		return fmt.Sprintf("no: Ready=False (%s): %s", c.Reason, c.Message)
	}
	if !gate.Allowed() {
		return "no: " + gateText(es, gate)
	}
	if c := meta.FindStatusCondition(conds, elastiv1alpha1.ConditionTriggersHealthy); c != nil && c.Status == metav1.ConditionFalse {
		return fmt.Sprintf("no: a trigger cannot be evaluated (%s: %s); an unhealthy trigger never causes a scale-down", c.Reason, c.Message)
	}
	idle := meta.FindStatusCondition(conds, elastiv1alpha1.ConditionIdle)
	switch {
	case idle == nil || idle.Status == metav1.ConditionUnknown:
		msg := "the triggers have not been evaluated since the cooldown ended"
		if idle != nil && idle.Message != "" {
			msg = idle.Message
		}
		return "not yet: " + msg
	case idle.Status == metav1.ConditionFalse:
		return fmt.Sprintf("no: not idle (%s): %s", idle.Reason, idle.Message)
	}
	if c := meta.FindStatusCondition(conds, elastiv1alpha1.ConditionProxyReady); c != nil && c.Status == metav1.ConditionFalse {
		return fmt.Sprintf("no: the triggers are idle but no resolver could take the traffic (%s): %s", c.Reason, c.Message)
	}
	return "yes: every trigger is idle; the operator scales the target to zero at its next evaluation"
}

// gateText is a closed gate's message, with the plugin command that lifts it
// where there is one.
func gateText(es *elastiv1alpha1.ElastiService, v sleepgate.Verdict) string {
	if v.Reason == sleepgate.ReasonKeepAwake {
		return v.Message + "; `kubectl elasti allow-sleep " + es.Name + "` lifts it"
	}
	return v.Message
}
