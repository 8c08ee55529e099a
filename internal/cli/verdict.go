package cli

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/scaling"
)

// Reasons the operator writes on the Active condition (internal/controller,
// modes.go). The plugin reads them but does not import the operator.
const (
	reasonScalingDown  = "ScalingDown"
	reasonScaledToZero = "ScaledToZero"
	reasonWaking       = "Waking"
)

// keepAwakeOn is the value of contract.AnnotationKeepAwake that pins a
// target awake.
const keepAwakeOn = "true"

// scaleDownVerdict explains in one line whether the ElastiService is on its
// way to zero and, if not, what holds it. It applies the operator's gates in
// the operator's order: a pending wake, no triggers, keep-awake, Ready, the
// cooldown, the enabledPeriod, then the triggers and the resolvers.
func scaleDownVerdict(es *elastiv1alpha1.ElastiService, now time.Time) string {
	conds := es.Status.Conditions
	_, wakeRequested := es.Annotations[contract.AnnotationWakeNow]
	keepAwake := es.Annotations[contract.AnnotationKeepAwake] == keepAwakeOn
	active := meta.FindStatusCondition(conds, elastiv1alpha1.ConditionActive)

	if es.Status.Mode == elastiv1alpha1.ModeProxy {
		switch {
		case active != nil && active.Reason == reasonScalingDown:
			return "scaling down now: every trigger is idle; the target goes to zero when the grace period ends"
		case wakeRequested:
			return "waking: a wake was requested (" + contract.AnnotationWakeNow + ") and the operator is acting on it"
		case keepAwake:
			return "waking: " + contract.AnnotationKeepAwake + "=true makes the operator wake the target"
		case active != nil && active.Reason == reasonScaledToZero:
			return fmt.Sprintf("asleep: scaled to zero %s ago; the first request, or `kubectl elasti wake %s`, wakes it",
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
	if len(es.Spec.Triggers) == 0 {
		return "no: it has no triggers, so it never sleeps on its own"
	}
	if keepAwake {
		return fmt.Sprintf("no: %s=true pins it awake; `kubectl elasti allow-sleep %s` lifts it", contract.AnnotationKeepAwake, es.Name)
	}
	if c := meta.FindStatusCondition(conds, elastiv1alpha1.ConditionReady); c != nil && c.Status == metav1.ConditionFalse {
		return fmt.Sprintf("no: Ready=False (%s): %s", c.Reason, c.Message)
	}
	if msg, ok := inCooldown(es, now); ok {
		return "no: " + msg
	}
	if msg, ok := outsideEnabledPeriod(es, now); ok {
		return "no: " + msg
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

// inCooldown reports whether the cooldown, counted from the last wake or else
// from creation, still runs, and for how long.
func inCooldown(es *elastiv1alpha1.ElastiService, now time.Time) (string, bool) {
	since, from := es.CreationTimestamp.Time, "creation"
	if es.Status.LastScaledUpTime != nil {
		since, from = es.Status.LastScaledUpTime.Time, "the last wake"
	}
	cooldown := time.Duration(es.Spec.CooldownPeriod) * time.Second
	left := since.Add(cooldown).Sub(now)
	if left <= 0 {
		return "", false
	}
	return fmt.Sprintf("in cooldown for another %s (cooldownPeriod %ds, counted from %s %s ago)",
		human(left), es.Spec.CooldownPeriod, from, human(now.Sub(since))), true
}

// outsideEnabledPeriod reports whether an enabledPeriod forbids sleeping now.
func outsideEnabledPeriod(es *elastiv1alpha1.ElastiService, now time.Time) (string, bool) {
	p := es.Spec.EnabledPeriod
	if p == nil {
		return "", false
	}
	w, err := scaling.ParseWindow(*p)
	if err != nil {
		return "the enabledPeriod is invalid: " + err.Error(), true
	}
	if w.Contains(now) {
		return "", false
	}
	msg := fmt.Sprintf("outside the enabledPeriod (%q for %s, UTC)", p.Schedule, p.Duration)
	if next := w.NextOpen(now); !next.IsZero() {
		msg += "; the next window opens in " + human(next.Sub(now))
	}
	return msg, true
}
