package plan

import (
	"time"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/controller/fallback"
	"elasti.dev/elasti/internal/controller/hpacustody"
	"elasti.dev/elasti/internal/controller/ledger"
	"elasti.dev/elasti/internal/controller/refusals"
	"elasti.dev/elasti/internal/controller/wakeprogress"
	"elasti.dev/elasti/internal/scaling"
	"elasti.dev/elasti/internal/sleepgate"
)

// Observed is everything a decision needs, gathered by the reconciler's
// observe (and claim, for the ports and the target's watch).
type Observed struct {
	Now       time.Time
	Phase     Phase
	Service   ServiceObserved
	Target    TargetObserved
	Resolvers int
	OwnReady  bool
	Demand    Demand
	Sleep     sleepgate.Verdict
	Triggers  *scaling.Result
	// TriggersPending: Decide needs the triggers and their evaluation has
	// not answered yet (package triggerpoll); Triggers is nil.
	TriggersPending bool
	// NoTriggers: the ElastiService has none. It sleeps only if an HPA in
	// custody says so alone (HPA).
	NoTriggers bool
	// RateWanted: the metrics API serves this ElastiService's rate from
	// its podMetrics trigger (controller.Config.MeasureRate), so that
	// MeasuresRate may keep the triggers evaluated.
	RateWanted bool
	// HPA is what the HPA spec.autoscaler names has to say (package
	// hpacustody).
	HPA          hpacustody.Observed
	Grace        GraceObserved
	PollInterval time.Duration
	// Doze is what sleepMode Doze needs.
	Doze DozeObserved
	// Concerns is what the concern packages observed for their parts of
	// the status.
	Concerns ConcernsObserved
}

// ServiceObserved is the Service spec.service names.
type ServiceObserved struct {
	Found bool
	// Refusal says why the Service cannot be put in the data path
	// (package refusals). A refused Service is treated as one with nothing
	// to hold its traffic: never proxied, and its target kept awake.
	Refusal refusals.Refusal
	// Ports are the resolver ports allocated to its ports (package ports);
	// PortsErr says why there are none.
	Ports    []elastiv1alpha1.ProxyPort
	PortsErr error
}

// TargetObserved is the scale target, read through /scale.
type TargetObserved struct {
	Found    bool
	Replicas int32
	// Err says why the target cannot be read. Only the status words it;
	// Decide needs no more than Found.
	Err string
	// WatchReason and WatchErr say why the target's kind cannot be
	// watched; Decide only needs to know that it cannot.
	WatchReason, WatchErr string
}

// Demand is what asks for the target to be up.
type Demand struct {
	// Wake: a wake is requested (an activation call, the wake-now
	// annotation or a pre-warm firing).
	Wake      bool
	KeepAwake bool
	// Traffic: the wake requested is an activation call, a resolver's
	// report of traffic (also counted in Wake). In the grace period of a
	// scale-down it cancels the sleep (Plan.SleepCancelled).
	Traffic bool
	// PreWarm is the spec.preWarm firing this reconcile acts on (zero when
	// none, PreWarmFiring); it is also counted in Wake. PreWarmNext is the
	// next firing, which the reconcile comes back for.
	PreWarm, PreWarmNext time.Time
	// PreWarmHandled is the last firing this operator acted on, as it
	// remembers it: newer than status.lastPreWarmTime when the reconcile
	// that acted on it failed before its status write.
	PreWarmHandled time.Time
	// WokeUnrecorded is when this operator last woke the target, as it
	// remembers it, while no status write has recorded that wake (the
	// reconcile that woke it met a conflict at its status write): the next
	// status records it as lastScaledUpTime, which the cooldown counts
	// from.
	WokeUnrecorded time.Time
}

// GraceObserved is the grace period before a scale to zero: when the one
// in progress began (zero when none runs) and how long it lasts.
type GraceObserved struct {
	StartedAt time.Time
	Period    time.Duration
}

// ConcernsObserved is what the concern packages read for their parts of
// the status.
type ConcernsObserved struct {
	// Ledger is what status.ledger needs (package ledger).
	Ledger ledger.Observed
	// Fallback is what the FallbackActive condition needs (package
	// fallback).
	Fallback fallback.Observed
	// Progress is what status.wakeProgress needs (package wakeprogress).
	Progress wakeprogress.Observed
}

// mayScaleDown is the one rule for putting an awake target to sleep,
// applied when a scale-down starts and again when its grace period ends:
// every sleep gate is open and the triggers, with the HPA in custody,
// evaluated for this reconcile, say idle (hpacustody.Observed.SaysIdle).
// A target whose kind cannot be watched is not put to sleep: Ready says
// why, as for a trigger that cannot be evaluated.
func (o Observed) mayScaleDown() bool {
	return o.Sleep.Allowed() && o.HPA.SaysIdle(o.Triggers, o.NoTriggers) && o.Target.WatchReason == ""
}

// graceOver reports whether the grace period of the scale-down in flight
// has run out. One whose start this operator does not know (a new leader)
// has not: it waits a grace period of its own.
func (o Observed) graceOver() bool {
	return !o.Grace.StartedAt.IsZero() && !o.Now.Before(o.Grace.StartedAt.Add(o.Grace.Period))
}

// NeedsTriggers says whether Decide will read the triggers (and the
// readings of an HPA in custody), so that observe evaluates them only
// then: in serve, to start a scale-down; once the grace period is over, to
// confirm it; and while dozing, to wake on traffic the resolvers never
// saw. Never in the middle of the grace period, and never for a target
// that is to be woken or may not sleep now anyway.
func (o Observed) NeedsTriggers() bool {
	if !o.Target.Found || o.Target.Replicas == 0 || o.Demand.Wake || !o.Sleep.Allowed() || o.Service.Refusal.Refused() {
		return false
	}
	switch o.Phase {
	case PhaseServe:
		return true
	case PhaseScalingDown:
		return o.graceOver()
	case PhaseProxy:
		// A dozing target's pods stay Ready, so part of its traffic
		// reaches them from kube-proxy, past the resolvers; its triggers
		// see that traffic (Doze.busy).
		return o.Doze.Dozing
	default:
		return false
	}
}

// MeasuresRate says whether observe keeps the triggers evaluated though
// Decide does not read them: an awake target in serve mode whose rate the
// metrics API serves, held awake by a sleep gate. An HPA scaling it on
// that rate needs it during the cooldown after a wake most of all.
func (o Observed) MeasuresRate() bool {
	return o.RateWanted && o.Phase == PhaseServe && o.Target.Found && o.Target.Replicas > 0 &&
		!o.Service.Refusal.Refused() && !o.NeedsTriggers()
}
