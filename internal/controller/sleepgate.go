package controller

import (
	"time"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/scaling"
)

// Reasons why a target may not sleep yet, used in the Idle condition's
// message and in logs.
const (
	gateNoTriggers   = "NoTriggers"
	gateKeepAwake    = "KeepAwake"
	gateCooldown     = "InCooldown"
	gateOutsideWin   = "OutsideEnabledPeriod"
	gateInvalidWin   = "InvalidEnabledPeriod"
	gateOpen         = "Open"
	keepAwakeTrueVal = "true"
)

// sleepGate says whether everything except the triggers allows the target to
// sleep now, and whether the triggers need polling at all.
type sleepGate struct {
	allowed bool
	// polls is true when the target can ever sleep on its own, so the
	// reconcile must come back at the polling interval.
	polls bool
	// wait is how long until the gate may open (end of cooldown or start of
	// the next enabled window); zero if unknown or open.
	wait   time.Duration
	reason string
	// message explains an invalid enabledPeriod.
	message string
}

// sleepGateFor applies keep-awake, the cooldown (counted from
// lastScaledUpTime, or from creation before the first wake) and the
// enabledPeriod window.
func sleepGateFor(es *elastiv1alpha1.ElastiService, now time.Time) sleepGate {
	if len(es.Spec.Triggers) == 0 {
		return sleepGate{reason: gateNoTriggers}
	}
	if es.Annotations[contract.AnnotationKeepAwake] == keepAwakeTrueVal {
		return sleepGate{reason: gateKeepAwake}
	}
	since := es.CreationTimestamp.Time
	if es.Status.LastScaledUpTime != nil {
		since = es.Status.LastScaledUpTime.Time
	}
	end := since.Add(time.Duration(es.Spec.CooldownPeriod) * time.Second)
	if now.Before(end) {
		return sleepGate{polls: true, wait: end.Sub(now), reason: gateCooldown}
	}
	if es.Spec.EnabledPeriod != nil {
		w, err := scaling.ParseWindow(*es.Spec.EnabledPeriod)
		if err != nil {
			return sleepGate{reason: gateInvalidWin, message: err.Error()}
		}
		if !w.Contains(now) {
			g := sleepGate{polls: true, reason: gateOutsideWin}
			if next := w.NextOpen(now); !next.IsZero() {
				g.wait = next.Sub(now)
			}
			return g
		}
	}
	return sleepGate{allowed: true, polls: true, reason: gateOpen}
}
