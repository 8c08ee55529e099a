package controller

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
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
	// runs before the target goes to zero.
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
	now            time.Time
	phase          phase
	serviceFound   bool
	targetFound    bool
	replicas       int32
	ports          []elastiv1alpha1.ProxyPort
	portsErr       error
	resolvers      int
	ownReady       bool
	wakeRequested  bool
	keepAwake      bool
	sleep          sleepgate.Verdict
	triggers       *scaling.Result
	graceStartedAt time.Time
	gracePeriod    time.Duration
	pollInterval   time.Duration
	// targetErr says why the target cannot be read. Only the status words
	// it; decide needs no more than targetFound.
	targetErr string
	// targetWatchReason and targetWatchErr say why the target's kind
	// cannot be watched; decide only needs to know that it cannot.
	targetWatchReason, targetWatchErr string
}

// plan is what a reconcile does, in DESIGN.md's order.
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
}

// decide is the operator's state machine, as a pure function. An awake
// target whose triggers can put it to sleep comes back at the polling
// interval (sooner if the cooldown ends sooner); a sleeping one waits for
// events.
func decide(o observed) plan {
	p := transition(o)
	switch {
	case p.requeueAfter != 0:
	case p.mode == elastiv1alpha1.ModeServe && o.sleep.Polls:
		p.requeueAfter = minPositive(o.pollInterval, o.sleep.Wait)
	case o.portsErr != nil:
		// A freed port wakes the waiters through the allocator's events;
		// this poll is only a backstop.
		p.requeueAfter = o.pollInterval
	}
	return p
}

func transition(o observed) plan {
	p := plan{slices: sliceDelete, mode: elastiv1alpha1.ModeServe, active: contract.ReasonServing}
	canProxy := o.serviceFound && o.portsErr == nil && len(o.ports) > 0 && o.resolvers > 0

	if !o.serviceFound || !o.targetFound {
		// Nothing to route or nothing to scale: stay out of the data path.
		// A wake still raises the target if it exists.
		p.wake = o.wakeRequested && o.targetFound
		return p
	}
	if o.replicas == 0 && !canProxy {
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
		case o.wakeRequested || (o.replicas == 0 && o.keepAwake):
			p.wake = true
		case o.replicas == 0 && canProxy:
			// Someone else put the target at zero: hold its traffic.
			p.slices, p.mode, p.active = sliceEnsure, elastiv1alpha1.ModeProxy, contract.ReasonScaledToZero
		case o.sleep.Allowed() && o.triggers != nil && o.triggers.State == scaling.StateIdle && canProxy && o.targetWatchReason == "":
			// A target whose kind cannot be watched is not put to sleep:
			// Ready says why, as for a trigger that cannot be evaluated.
			p.slices, p.mode, p.active = sliceEnsure, elastiv1alpha1.ModeProxy, contract.ReasonScalingDown
			p.startGrace = true
			p.requeueAfter = o.gracePeriod
			return p
		}
		return p

	case phaseScalingDown:
		switch {
		case o.wakeRequested || o.keepAwake:
			// A request arrived during the grace period: the scale-down
			// is called off and the target stays up.
			p.wake = true
		case !canProxy:
			p.failOpen = true
		default:
			p.slices, p.mode, p.active = sliceEnsure, elastiv1alpha1.ModeProxy, contract.ReasonScalingDown
			if rest := o.graceStartedAt.Add(o.gracePeriod).Sub(o.now); !o.graceStartedAt.IsZero() && rest > 0 {
				p.requeueAfter = rest
				return p
			}
			if o.graceStartedAt.IsZero() {
				// A new leader found a scale-down in flight: it waits a
				// full grace period of its own.
				p.startGrace = true
				p.requeueAfter = o.gracePeriod
				return p
			}
			p.sleep = true
			p.active = contract.ReasonScaledToZero
			return p
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
		p.wake = o.wakeRequested || (o.replicas == 0 && o.keepAwake)
		if !canProxy {
			// Never point a Service at zero resolvers: leave the data
			// path (a target at zero was woken above).
			p.failOpen = true
			p.active = contract.ReasonWaking
			return p
		}
		if o.ownReady && o.replicas > 0 {
			// Back to serve. A target at zero replicas cannot own a ready
			// endpoint: one still listed belongs to a pod on its way out.
			return p
		}
		p.slices, p.mode = sliceEnsure, elastiv1alpha1.ModeProxy
		if o.replicas == 0 && !p.wake {
			p.active = contract.ReasonScaledToZero
		} else {
			p.active = contract.ReasonWaking
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
