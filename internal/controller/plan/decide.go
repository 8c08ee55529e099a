package plan

import (
	"time"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/fallback"
	"elasti.dev/elasti/internal/controller/wakeprogress"
)

// SliceAction says what to do with the proxy EndpointSlices.
type SliceAction int

const (
	// SliceDelete: no proxy slice; the Service routes to its own endpoints.
	SliceDelete SliceAction = iota
	// SliceEnsure: a proxy slice lists the ready resolvers.
	SliceEnsure
)

// Plan is what a reconcile does; the reconciler's execute carries it out
// in the order of docs/architecture.md, "The order of the writes".
type Plan struct {
	// Wake: unpause KEDA, scale to minTargetReplicas when at zero, record
	// lastScaledUpTime.
	Wake bool
	// Slices: ensure or delete the proxy EndpointSlices.
	Slices SliceAction
	// Sleep: pause KEDA and scale to zero (the grace period is over).
	Sleep bool
	// Doze: lower the requests of the target's pods to spec.doze's floor
	// and record them in status.doze (sleepMode Doze, instead of Sleep);
	// while dozing, also the pods that appeared since.
	Doze bool
	// Undoze: write the requests recorded in status.doze back on the
	// target's pods (a wake of a dozing target).
	Undoze bool
	// DozeOver: every pod has its requests back and applied; status.doze
	// is cleared.
	DozeOver bool
	// StartGrace: record that the grace period starts now.
	StartGrace bool
	Mode       elastiv1alpha1.Mode
	// Active is the Active condition's reason.
	Active string
	// FailOpen: resolvers vanished while proxying.
	FailOpen     bool
	RequeueAfter time.Duration
	// SleepCancelled: traffic that reached a resolver during the grace
	// period (its confirmation window) calls the scale-down off. The wake
	// that does so is recorded as a cancelled sleep: an Event and
	// status.lastSleepCancelledTime.
	SleepCancelled bool
}

// Decide is the operator's state machine, as a pure function. An awake
// target whose triggers can put it to sleep comes back at the polling
// interval (sooner if the cooldown ends sooner); a sleeping one waits for
// events, and for its next pre-warm firing if it has a schedule.
func Decide(o Observed) Plan {
	p := transition(o)
	switch {
	case p.RequeueAfter != 0:
	case p.Mode == elastiv1alpha1.ModeServe && o.Sleep.Polls:
		p.RequeueAfter = minPositive(o.PollInterval, o.Sleep.Wait)
	case p.Mode == elastiv1alpha1.ModeServe && o.MeasuresRate():
		p.RequeueAfter = o.PollInterval
	case o.Service.PortsErr != nil:
		// A freed port wakes the waiters through the allocator's events;
		// this poll is only a backstop.
		p.RequeueAfter = o.PollInterval
	}
	if !o.Demand.PreWarmNext.IsZero() {
		p.RequeueAfter = earliestRequeue(p.RequeueAfter, max(o.Demand.PreWarmNext.Sub(o.Now), time.Millisecond))
	}
	// A wake with a fallback comes back for its deadline, and to look at
	// the target's pods, which are not watched.
	if recheck := fallback.Recheck(o.Concerns.Fallback, o.Now); recheck > 0 {
		p.RequeueAfter = earliestRequeue(p.RequeueAfter, recheck)
	}
	// A dozing target's pods are not watched: a wake comes back for them
	// until their requests are back, and a doze to see them restart.
	if o.Doze.Dozing && !p.DozeOver {
		recheck := o.PollInterval
		if p.Undoze {
			recheck = dozeRecheck
		}
		p.RequeueAfter = earliestRequeue(p.RequeueAfter, recheck)
	}
	// A wake from zero comes back to read its pods again until one is
	// Ready: they are not watched, and an image pull changes none of them.
	if recheck := wakeprogress.Recheck(o.Concerns.Progress, p.Mode, p.Active); recheck > 0 {
		p.RequeueAfter = earliestRequeue(p.RequeueAfter, recheck)
	}
	return p
}

func transition(o Observed) Plan {
	p := transitionReplicas(o)
	if o.Doze.Dozing {
		dozeTransition(o, &p)
	}
	return p
}

// dozeTransition adjusts p for a dozing target. A dozing target is asleep
// with its pods Ready, so the replica count and the Service's endpoints
// cannot say it sleeps; status.doze does. Its wake is the write of the
// recorded requests, not a scale from zero, and it is over when every pod
// has them back and applied: until then the target stays in proxy mode,
// Waking. Anything that wakes a target at zero wakes a dozing one, and so
// do triggers that report traffic (which reached the Ready pods past the
// resolvers), a restarted container, a rollout, and resolvers that cannot
// take the traffic (never doze with nothing to hold the traffic). A
// scale-down in flight is left alone: the doze it ends in keeps the first
// records.
func dozeTransition(o Observed, p *Plan) {
	if o.Phase == PhaseScalingDown || p.StartGrace {
		return
	}
	if o.Doze.Err != nil {
		// The pods cannot be read: neither doze nor undo anything, and
		// keep the traffic with the resolvers while there are some.
		if !p.FailOpen && proxyPossible(o) && (o.Phase == PhaseProxy || o.Phase == PhaseWaking) {
			p.Slices, p.Mode, p.Active = SliceEnsure, elastiv1alpha1.ModeProxy, contract.ReasonWaking
			if o.Phase == PhaseProxy && !p.Wake {
				p.Active = contract.ReasonDozing
			}
		}
		return
	}
	wake := p.Wake || p.FailOpen || o.Demand.KeepAwake || o.Doze.wakeNeeded() || o.Doze.busy(o.Triggers) || !proxyPossible(o)
	if o.Phase == PhaseProxy && !wake {
		// The doze is planned again at each look: pods that appeared
		// since (a scale-out) doze too, the records of pods gone are
		// dropped, and a doze cut short after its records were written
		// is finished. Over pods already dozing it writes nothing.
		p.Slices, p.Mode, p.Active = SliceEnsure, elastiv1alpha1.ModeProxy, contract.ReasonDozing
		p.Doze = true
		return
	}
	p.Undoze = true
	p.DozeOver = o.Doze.over()
	if p.DozeOver || p.FailOpen || o.Phase == PhaseServe || !proxyPossible(o) {
		return
	}
	p.Slices, p.Mode, p.Active = SliceEnsure, elastiv1alpha1.ModeProxy, contract.ReasonWaking
}

// proxyPossible says whether the resolvers can take the Service's traffic.
func proxyPossible(o Observed) bool {
	return o.Service.Found && o.Target.Found && !o.Service.Refusal.Refused() && o.Service.PortsErr == nil && len(o.Service.Ports) > 0 && o.Resolvers > 0
}

func transitionReplicas(o Observed) Plan {
	p := Plan{Slices: SliceDelete, Mode: elastiv1alpha1.ModeServe, Active: contract.ReasonServing}
	canProxy := proxyPossible(o)

	if !o.Service.Found || !o.Target.Found {
		// Nothing to route or nothing to scale: stay out of the data path.
		// A wake still raises the target if it exists.
		p.Wake = o.Demand.Wake && o.Target.Found
		return p
	}
	if o.Target.Replicas == 0 && !canProxy {
		// Never leave a target at zero with nothing to hold its traffic,
		// whatever the status says: a scale-down whose status write failed
		// left it recorded as ScalingDown (or serve) while the target is
		// asleep. Wake it and leave the data path.
		p.Wake, p.FailOpen, p.Active = true, true, contract.ReasonWaking
		return p
	}

	switch o.Phase {
	case PhaseServe:
		switch {
		case o.Demand.Wake || (o.Target.Replicas == 0 && o.Demand.KeepAwake):
			p.Wake = true
		case o.Target.Replicas == 0 && canProxy:
			// Someone else put the target at zero: hold its traffic.
			p.Slices, p.Mode, p.Active = SliceEnsure, elastiv1alpha1.ModeProxy, contract.ReasonScaledToZero
		case o.mayScaleDown() && canProxy:
			p.Slices, p.Mode, p.Active = SliceEnsure, elastiv1alpha1.ModeProxy, contract.ReasonScalingDown
			p.StartGrace = true
			p.RequeueAfter = o.Grace.Period
			return p
		}
		return p

	case PhaseScalingDown:
		switch {
		case o.Demand.Wake || o.Demand.KeepAwake:
			// Traffic reached a resolver during the grace period (the
			// resolver reports what it forwards as an activation call), or
			// someone asked for a wake: the scale-down is called off, and
			// the wake restarts the cooldown. Traffic is what the grace
			// period waits for, and is recorded as a cancelled sleep (a
			// target found at zero is woken, not kept up).
			p.Wake = true
			p.SleepCancelled = o.Demand.Traffic && o.Target.Replicas > 0
		case !canProxy:
			p.FailOpen = true
		case o.Grace.StartedAt.IsZero():
			// A new leader found a scale-down in flight: it waits a full
			// grace period of its own.
			p.Slices, p.Mode, p.Active = SliceEnsure, elastiv1alpha1.ModeProxy, contract.ReasonScalingDown
			p.StartGrace = true
			p.RequeueAfter = o.Grace.Period
			return p
		case !o.graceOver():
			p.Slices, p.Mode, p.Active = SliceEnsure, elastiv1alpha1.ModeProxy, contract.ReasonScalingDown
			p.RequeueAfter = o.Grace.StartedAt.Add(o.Grace.Period).Sub(o.Now)
			return p
		case o.TriggersPending && o.Target.Replicas > 0:
			// The evaluation begun after the grace period has not
			// answered yet; its end reconciles again.
			p.Slices, p.Mode, p.Active = SliceEnsure, elastiv1alpha1.ModeProxy, contract.ReasonScalingDown
			p.RequeueAfter = o.PollInterval
			return p
		case o.Target.Replicas == 0 || o.mayScaleDown():
			// The triggers, evaluated again now that the grace period is
			// over, still say idle. (A target already at zero is one whose
			// scale-down went through but whose status was not written:
			// finish it.)
			p.Slices, p.Mode, p.Active = SliceEnsure, elastiv1alpha1.ModeProxy, contract.ReasonScaledToZero
			if o.Doze.On && o.Target.Replicas > 0 {
				p.Doze, p.Active = true, contract.ReasonDozing
				return p
			}
			p.Sleep = true
			return p
		default:
			// The triggers no longer say idle, cannot be evaluated, or a
			// gate closed during the grace period: the scale-down is called
			// off and the target is left as it is.
		}
		if o.OwnReady {
			return p // serve
		}
		p.Slices, p.Mode, p.Active = SliceEnsure, elastiv1alpha1.ModeProxy, contract.ReasonWaking
		if !canProxy {
			p.Slices, p.Mode, p.Active = SliceDelete, elastiv1alpha1.ModeServe, contract.ReasonWaking
		}
		return p

	default: // PhaseProxy, PhaseWaking
		p.Wake = o.Demand.Wake || (o.Target.Replicas == 0 && o.Demand.KeepAwake)
		if !canProxy {
			// Never point a Service at zero resolvers: leave the data
			// path (a target at zero was woken above).
			p.FailOpen = true
			p.Active = contract.ReasonWaking
			return p
		}
		if o.OwnReady && o.Target.Replicas > 0 {
			// Back to serve. A target at zero replicas cannot own a ready
			// endpoint: one still listed belongs to a pod on its way out.
			return p
		}
		p.Slices, p.Mode = SliceEnsure, elastiv1alpha1.ModeProxy
		if o.Target.Replicas == 0 && !p.Wake {
			p.Active = contract.ReasonScaledToZero
		} else {
			p.Active = contract.ReasonWaking
		}
		return p
	}
}

func minPositive(a, b time.Duration) time.Duration {
	if b > 0 && b < a {
		return b
	}
	return a
}

// earliestRequeue combines two requeue delays, zero meaning none.
func earliestRequeue(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0 || a < b:
		return a
	default:
		return b
	}
}
