package controller

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/fallback"
	"elasti.dev/elasti/internal/controller/hpacustody"
	"elasti.dev/elasti/internal/controller/ledger"
	"elasti.dev/elasti/internal/controller/refusals"
	"elasti.dev/elasti/internal/controller/wakeprogress"
	"elasti.dev/elasti/internal/scaling"
	"elasti.dev/elasti/internal/sleepgate"
)

// phase is where an ElastiService is in its serve/proxy cycle. It is derived
// from the status and the target, never stored on its own.
type phase string

const (
	// phaseServe: traffic goes straight to the target; triggers are polled.
	phaseServe phase = "Serve"
	// phaseScalingDown: the proxy slice is in place and the grace period
	// runs before the target goes to zero. Traffic in it reaches the
	// resolvers, which report it as activation calls; at its end the
	// triggers are evaluated again.
	phaseScalingDown phase = "ScalingDown"
	// phaseProxy: the target is at zero and the resolvers hold traffic.
	phaseProxy phase = "Proxy"
	// phaseWaking: the target was woken and has replicas; the resolvers hold
	// traffic until it has a ready endpoint.
	phaseWaking phase = "Waking"
)

// currentPhase derives the phase from the persisted status and the target's
// replica count.
func currentPhase(st elastiv1alpha1.ElastiServiceStatus, replicas int32) phase {
	if st.Mode != elastiv1alpha1.ModeProxy {
		return phaseServe
	}
	if c := meta.FindStatusCondition(st.Conditions, elastiv1alpha1.ConditionActive); c != nil && c.Reason == contract.ReasonScalingDown {
		return phaseScalingDown
	}
	if replicas == 0 {
		return phaseProxy
	}
	return phaseWaking
}

// sliceAction says what to do with the proxy EndpointSlices.
type sliceAction int

const (
	sliceDelete sliceAction = iota
	sliceEnsure
)

// observed is everything a decision needs, gathered by Reconciler.observe.
type observed struct {
	now       time.Time
	phase     phase
	service   serviceObserved
	target    targetObserved
	resolvers int
	ownReady  bool
	demand    demand
	sleep     sleepgate.Verdict
	triggers  *scaling.Result
	// noTriggers: the ElastiService has none. It sleeps only if an HPA in
	// custody says so alone (hpa).
	noTriggers bool
	// hpa is what the HPA spec.autoscaler names has to say (package
	// hpacustody).
	hpa          hpacustody.Observed
	grace        graceObserved
	pollInterval time.Duration
	// concerns is what the concern packages observed for their parts of
	// the status.
	concerns concernsObserved
}

// serviceObserved is the Service spec.service names.
type serviceObserved struct {
	found bool
	// refusal says why the Service cannot be put in the data path
	// (package refusals). A refused Service is treated as one with nothing
	// to hold its traffic: never proxied, and its target kept awake.
	refusal refusals.Refusal
	// ports are the resolver ports allocated to its ports (package ports);
	// portsErr says why there are none.
	ports    []elastiv1alpha1.ProxyPort
	portsErr error
}

// targetObserved is the scale target, read through /scale.
type targetObserved struct {
	found    bool
	replicas int32
	// err says why the target cannot be read. Only the status words it;
	// decide needs no more than found.
	err string
	// watchReason and watchErr say why the target's kind cannot be
	// watched; decide only needs to know that it cannot.
	watchReason, watchErr string
}

// demand is what asks for the target to be up.
type demand struct {
	// wake: a wake is requested (an activation call, the wake-now
	// annotation or a pre-warm firing).
	wake      bool
	keepAwake bool
	// traffic: the wake requested is an activation call, a resolver's
	// report of traffic (also counted in wake). In the grace period of a
	// scale-down it cancels the sleep (plan.sleepCancelled).
	traffic bool
	// preWarm is the spec.preWarm firing this reconcile acts on (zero when
	// none); it is also counted in wake. preWarmNext is the next firing,
	// which the reconcile comes back for.
	preWarm, preWarmNext time.Time
}

// graceObserved is the grace period before a scale to zero: when the one
// in progress began (zero when none runs) and how long it lasts.
type graceObserved struct {
	startedAt time.Time
	period    time.Duration
}

// concernsObserved is what the concern packages read for their parts of
// the status.
type concernsObserved struct {
	// ledger is what status.ledger needs (package ledger).
	ledger ledger.Observed
	// fallback is what the FallbackActive condition needs (package
	// fallback).
	fallback fallback.Observed
	// progress is what status.wakeProgress needs (package wakeprogress).
	progress wakeprogress.Observed
}

// plan is what a reconcile does; execute carries it out in the order of
// docs/architecture.md, "The order of the writes".
type plan struct {
	// wake: unpause KEDA, scale to minTargetReplicas when at zero, record
	// lastScaledUpTime.
	wake bool
	// slices: ensure or delete the proxy EndpointSlices.
	slices sliceAction
	// sleep: pause KEDA and scale to zero (the grace period is over).
	sleep bool
	// startGrace: record that the grace period starts now.
	startGrace bool
	mode       elastiv1alpha1.Mode
	// active is the Active condition's reason.
	active string
	// failOpen: resolvers vanished while proxying.
	failOpen     bool
	requeueAfter time.Duration
	// sleepCancelled: traffic that reached a resolver during the grace
	// period (its confirmation window) calls the scale-down off. The wake
	// that does so is recorded as a cancelled sleep: an Event and
	// status.lastSleepCancelledTime.
	sleepCancelled bool
}

// decide is the operator's state machine, as a pure function. An awake
// target whose triggers can put it to sleep comes back at the polling
// interval (sooner if the cooldown ends sooner); a sleeping one waits for
// events, and for its next pre-warm firing if it has a schedule.
func decide(o observed) plan {
	p := transition(o)
	switch {
	case p.requeueAfter != 0:
	case p.mode == elastiv1alpha1.ModeServe && o.sleep.Polls:
		p.requeueAfter = minPositive(o.pollInterval, o.sleep.Wait)
	case o.service.portsErr != nil:
		// A freed port wakes the waiters through the allocator's events;
		// this poll is only a backstop.
		p.requeueAfter = o.pollInterval
	}
	if !o.demand.preWarmNext.IsZero() {
		p.requeueAfter = earliestRequeue(p.requeueAfter, max(o.demand.preWarmNext.Sub(o.now), time.Millisecond))
	}
	// A wake with a fallback comes back for its deadline, and to look at
	// the target's pods, which are not watched.
	if recheck := fallback.Recheck(o.concerns.fallback, o.now); recheck > 0 {
		p.requeueAfter = earliestRequeue(p.requeueAfter, recheck)
	}
	// A wake from zero comes back to read its pods again until one is
	// Ready: they are not watched, and an image pull changes none of them.
	if recheck := wakeprogress.Recheck(o.concerns.progress, p.mode, p.active); recheck > 0 {
		p.requeueAfter = earliestRequeue(p.requeueAfter, recheck)
	}
	return p
}

func transition(o observed) plan {
	p := plan{slices: sliceDelete, mode: elastiv1alpha1.ModeServe, active: contract.ReasonServing}
	canProxy := o.service.found && !o.service.refusal.Refused() && o.service.portsErr == nil && len(o.service.ports) > 0 && o.resolvers > 0

	if !o.service.found || !o.target.found {
		// Nothing to route or nothing to scale: stay out of the data path.
		// A wake still raises the target if it exists.
		p.wake = o.demand.wake && o.target.found
		return p
	}
	if o.target.replicas == 0 && !canProxy {
		// Never leave a target at zero with nothing to hold its traffic,
		// whatever the status says: a scale-down whose status write failed
		// left it recorded as ScalingDown (or serve) while the target is
		// asleep. Wake it and leave the data path.
		p.wake, p.failOpen, p.active = true, true, contract.ReasonWaking
		return p
	}

	switch o.phase {
	case phaseServe:
		switch {
		case o.demand.wake || (o.target.replicas == 0 && o.demand.keepAwake):
			p.wake = true
		case o.target.replicas == 0 && canProxy:
			// Someone else put the target at zero: hold its traffic.
			p.slices, p.mode, p.active = sliceEnsure, elastiv1alpha1.ModeProxy, contract.ReasonScaledToZero
		case o.mayScaleDown() && canProxy:
			p.slices, p.mode, p.active = sliceEnsure, elastiv1alpha1.ModeProxy, contract.ReasonScalingDown
			p.startGrace = true
			p.requeueAfter = o.grace.period
			return p
		}
		return p

	case phaseScalingDown:
		switch {
		case o.demand.wake || o.demand.keepAwake:
			// Traffic reached a resolver during the grace period (the
			// resolver reports what it forwards as an activation call), or
			// someone asked for a wake: the scale-down is called off, and
			// the wake restarts the cooldown. Traffic is what the grace
			// period waits for, and is recorded as a cancelled sleep (a
			// target found at zero is woken, not kept up).
			p.wake = true
			p.sleepCancelled = o.demand.traffic && o.target.replicas > 0
		case !canProxy:
			p.failOpen = true
		case o.grace.startedAt.IsZero():
			// A new leader found a scale-down in flight: it waits a full
			// grace period of its own.
			p.slices, p.mode, p.active = sliceEnsure, elastiv1alpha1.ModeProxy, contract.ReasonScalingDown
			p.startGrace = true
			p.requeueAfter = o.grace.period
			return p
		case !o.graceOver():
			p.slices, p.mode, p.active = sliceEnsure, elastiv1alpha1.ModeProxy, contract.ReasonScalingDown
			p.requeueAfter = o.grace.startedAt.Add(o.grace.period).Sub(o.now)
			return p
		case o.target.replicas == 0 || o.mayScaleDown():
			// The triggers, evaluated again now that the grace period is
			// over, still say idle. (A target already at zero is one whose
			// scale-down went through but whose status was not written:
			// finish it.)
			p.slices, p.mode, p.active = sliceEnsure, elastiv1alpha1.ModeProxy, contract.ReasonScaledToZero
			p.sleep = true
			return p
		default:
			// The triggers no longer say idle, cannot be evaluated, or a
			// gate closed during the grace period: the scale-down is called
			// off and the target is left as it is.
		}
		if o.ownReady {
			return p // serve
		}
		p.slices, p.mode, p.active = sliceEnsure, elastiv1alpha1.ModeProxy, contract.ReasonWaking
		if !canProxy {
			p.slices, p.mode, p.active = sliceDelete, elastiv1alpha1.ModeServe, contract.ReasonWaking
		}
		return p

	default: // phaseProxy, phaseWaking
		p.wake = o.demand.wake || (o.target.replicas == 0 && o.demand.keepAwake)
		if !canProxy {
			// Never point a Service at zero resolvers: leave the data
			// path (a target at zero was woken above).
			p.failOpen = true
			p.active = contract.ReasonWaking
			return p
		}
		if o.ownReady && o.target.replicas > 0 {
			// Back to serve. A target at zero replicas cannot own a ready
			// endpoint: one still listed belongs to a pod on its way out.
			return p
		}
		p.slices, p.mode = sliceEnsure, elastiv1alpha1.ModeProxy
		if o.target.replicas == 0 && !p.wake {
			p.active = contract.ReasonScaledToZero
		} else {
			p.active = contract.ReasonWaking
		}
		return p
	}
}

// mayScaleDown is the one rule for putting an awake target to sleep,
// applied when a scale-down starts and again when its grace period ends:
// every sleep gate is open and the triggers, with the HPA in custody,
// evaluated for this reconcile, say idle (hpacustody.Observed.SaysIdle).
// A target whose kind cannot be watched is not put to sleep: Ready says
// why, as for a trigger that cannot be evaluated.
func (o observed) mayScaleDown() bool {
	return o.sleep.Allowed() && o.hpa.SaysIdle(o.triggers, o.noTriggers) && o.target.watchReason == ""
}

// graceOver reports whether the grace period of the scale-down in flight
// has run out. One whose start this operator does not know (a new leader)
// has not: it waits a grace period of its own.
func (o observed) graceOver() bool {
	return !o.grace.startedAt.IsZero() && !o.now.Before(o.grace.startedAt.Add(o.grace.period))
}

// needsTriggers says whether decide will read the triggers (and the
// readings of an HPA in custody), so that observe evaluates them only then: in serve, to start a scale-down, and once the
// grace period is over, to confirm it. Never in the middle of the grace
// period, and never for a target that is to be woken or may not sleep now
// anyway.
func (o observed) needsTriggers() bool {
	if !o.target.found || o.target.replicas == 0 || o.demand.wake || !o.sleep.Allowed() || o.service.refusal.Refused() {
		return false
	}
	switch o.phase {
	case phaseServe:
		return true
	case phaseScalingDown:
		return o.graceOver()
	default:
		return false
	}
}

func minPositive(a, b time.Duration) time.Duration {
	if b > 0 && b < a {
		return b
	}
	return a
}
