package sleepgate

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/scaling"
)

// Reasons a Verdict gives. They are not condition reasons: the operator
// words its conditions from them.
const (
	// ReasonNoTriggers: without triggers the target never sleeps on its own.
	ReasonNoTriggers = "NoTriggers"
	// ReasonKeepAwake: contract.AnnotationKeepAwake pins the target awake.
	ReasonKeepAwake = "KeepAwake"
	// ReasonInCooldown: the cooldown since the last wake (or creation), or
	// since the target last became ready, runs.
	ReasonInCooldown = "InCooldown"
	// ReasonWaking: the target has not had a ready endpoint since its last
	// wake. The cooldown has not started: a target is never put to sleep
	// before its first pod has been Ready, however long it takes.
	ReasonWaking = "Waking"
	// ReasonInvalidEnabledPeriod: the enabledPeriod cannot be parsed, so the
	// target never sleeps until it is fixed.
	ReasonInvalidEnabledPeriod = "InvalidEnabledPeriod"
	// ReasonOutsideEnabledPeriod: now is outside every enabledPeriod window.
	ReasonOutsideEnabledPeriod = "OutsideEnabledPeriod"
	// ReasonOpen: no gate holds; the triggers decide.
	ReasonOpen = "Open"
)

// Verdict is what the chain says about one ElastiService at one instant.
type Verdict struct {
	// Reason is one of the Reason constants.
	Reason string
	// Message explains Reason to a person in one clause, without a verdict
	// word: "in cooldown for another 12m (...)".
	Message string
	// Polls is true when time alone can let the target sleep: the gate is
	// open, or it is a cooldown or an enabledPeriod that ends. The triggers
	// then need evaluating, now or later. False when only a change to the
	// ElastiService can.
	Polls bool
	// Wait is how long until the gate may open by itself (the end of the
	// cooldown, the start of the next window); zero when unknown or open.
	Wait time.Duration
}

// Allowed reports whether every gate is open: the target may sleep as soon
// as its triggers say idle.
func (v Verdict) Allowed() bool { return v.Reason == ReasonOpen }

// gate is one check of the chain. It returns stop=true and its Verdict when
// it holds the target awake, stop=false to pass to the next gate.
type gate func(es *elastiv1alpha1.ElastiService, now time.Time) (v Verdict, stop bool)

// gates is the chain, in order: settings that keep the target awake for
// good come before the clock.
var gates = []gate{noTriggers, keepAwake, waking, cooldown, enabledPeriod}

// Evaluate applies the gates in order and returns the first one that holds,
// or an open Verdict.
func Evaluate(es *elastiv1alpha1.ElastiService, now time.Time) Verdict {
	for _, g := range gates {
		if v, stop := g(es, now); stop {
			return v
		}
	}
	return Verdict{Reason: ReasonOpen, Polls: true, Message: "no gate holds the target; its triggers decide"}
}

func noTriggers(es *elastiv1alpha1.ElastiService, _ time.Time) (Verdict, bool) {
	if len(es.Spec.Triggers) > 0 {
		return Verdict{}, false
	}
	return Verdict{Reason: ReasonNoTriggers, Message: "it has no triggers, so it never sleeps on its own"}, true
}

func keepAwake(es *elastiv1alpha1.ElastiService, _ time.Time) (Verdict, bool) {
	if !contract.KeepAwake(es.Annotations) {
		return Verdict{}, false
	}
	return Verdict{Reason: ReasonKeepAwake, Message: contract.AnnotationKeepAwake + "=" + contract.KeepAwakeOn + " pins it awake"}, true
}

// cooldownStart is when the cooldown counts from, and what to call it: the
// last wake (creation before the first), or the target's first ready
// endpoint after that wake (TargetReady turning True), so that a target
// whose pods took longer than the cooldown to become ready still gets its
// whole cooldown once it serves. readySinceWake is false while the target
// has not had a ready endpoint since the wake: TargetReady is not True and
// has not changed since. An ElastiService the operator has not yet written TargetReady for
// counts from the wake alone, and one never woken is not held by readiness:
// the rule is about wakes, not about a target that was never up.
func cooldownStart(es *elastiv1alpha1.ElastiService) (since time.Time, from string, readySinceWake bool) {
	since, from = es.CreationTimestamp.Time, "creation"
	woken := es.Status.LastScaledUpTime != nil
	if woken {
		since, from = es.Status.LastScaledUpTime.Time, "the last wake"
	}
	c := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionTargetReady)
	if c == nil {
		return since, from, true
	}
	changed := c.LastTransitionTime.Time
	if !woken || !changed.After(since) {
		// Never woken: readiness does not move the cooldown (a scale-down
		// whose grace period ended after the first status write would
		// otherwise be called off, and a target that never had a ready
		// pod left in proxy mode). Woken, and TargetReady unchanged since:
		// ready since the wake only if it is True.
		return since, from, !woken || c.Status == metav1.ConditionTrue
	}
	if c.Status == metav1.ConditionTrue {
		return changed, "the target's first ready endpoint since " + from, true
	}
	// Ready after the wake, and no longer: the cooldown counts from the
	// wake (when it became ready is not recorded).
	return since, from, true
}

// waking holds a target that has not been ready since its last wake: its
// pods may take longer than the cooldown to start (a model loading for
// minutes), and putting it to sleep then would throw that start away.
func waking(es *elastiv1alpha1.ElastiService, now time.Time) (Verdict, bool) {
	since, from, ready := cooldownStart(es)
	if ready {
		return Verdict{}, false
	}
	return Verdict{Reason: ReasonWaking, Polls: true,
		Message: fmt.Sprintf("waking: no ready endpoint since %s %s ago; the cooldown starts when the target is ready",
			from, duration.HumanDuration(now.Sub(since))),
	}, true
}

// cooldown counts from cooldownStart.
func cooldown(es *elastiv1alpha1.ElastiService, now time.Time) (Verdict, bool) {
	since, from, _ := cooldownStart(es)
	left := since.Add(time.Duration(es.Spec.CooldownPeriod) * time.Second).Sub(now)
	if left <= 0 {
		return Verdict{}, false
	}
	return Verdict{Reason: ReasonInCooldown, Polls: true, Wait: left,
		Message: fmt.Sprintf("in cooldown for another %s (cooldownPeriod %ds, counted from %s %s ago)",
			duration.HumanDuration(left), es.Spec.CooldownPeriod, from, duration.HumanDuration(now.Sub(since))),
	}, true
}

// enabledPeriod holds the target outside the windows of its enabledPeriod,
// and for good when the enabledPeriod cannot be parsed.
func enabledPeriod(es *elastiv1alpha1.ElastiService, now time.Time) (Verdict, bool) {
	p := es.Spec.EnabledPeriod
	if p == nil {
		return Verdict{}, false
	}
	w, err := scaling.ParseWindow(*p)
	if err != nil {
		return Verdict{Reason: ReasonInvalidEnabledPeriod, Message: "the enabledPeriod is invalid: " + err.Error()}, true
	}
	if w.Contains(now) {
		return Verdict{}, false
	}
	v := Verdict{Reason: ReasonOutsideEnabledPeriod, Polls: true,
		Message: fmt.Sprintf("outside the enabledPeriod (%q for %s, %s)", p.Schedule, p.Duration, scaling.ZoneName(p.TimeZone))}
	if next := w.NextOpen(now); !next.IsZero() {
		v.Wait = next.Sub(now)
		v.Message += "; the next window opens in " + duration.HumanDuration(v.Wait)
	}
	return v, true
}
