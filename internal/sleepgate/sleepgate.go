package sleepgate

import (
	"fmt"
	"time"

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
	// ReasonInCooldown: the cooldown since the last wake (or creation) runs.
	ReasonInCooldown = "InCooldown"
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
var gates = []gate{noTriggers, keepAwake, cooldown, enabledPeriod}

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

// cooldown counts from lastScaledUpTime, or from creation before the first
// wake.
func cooldown(es *elastiv1alpha1.ElastiService, now time.Time) (Verdict, bool) {
	since, from := es.CreationTimestamp.Time, "creation"
	if es.Status.LastScaledUpTime != nil {
		since, from = es.Status.LastScaledUpTime.Time, "the last wake"
	}
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
