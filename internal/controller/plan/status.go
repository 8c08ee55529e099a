package plan

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/fallback"
	"elasti.dev/elasti/internal/controller/hpacustody"
	"elasti.dev/elasti/internal/controller/ledger"
	"elasti.dev/elasti/internal/controller/wakeprogress"
	"elasti.dev/elasti/internal/scaling"
	"elasti.dev/elasti/internal/sleepgate"
)

// Effects is what a reconcile actually did, for the status and Events.
type Effects struct {
	// Woke: the target was woken (or, already up, its wake completed) and
	// now has Replicas replicas.
	Woke     bool
	Replicas int32
	// Slept: the target went to zero.
	Slept bool
	// Raised: the scale-down found the target raised by someone else to
	// this many replicas since observe read it, and left it there.
	Raised int32
	// Recorded: the reconcile wrote the status to record the proxy ports
	// ahead of the proxy slice (the reconciler's recordProxyPorts), or the
	// doze's records ahead of its resizes, and writes it no more.
	Recorded bool
	// Dozed is status.doze as this reconcile's doze planned it: what the
	// target's pods had before, recorded before any is resized.
	Dozed *elastiv1alpha1.DozeStatus
}

// DesiredStatus builds the status a reconcile should leave behind. It keeps
// the Idle and TriggersHealthy conditions as they were when the triggers
// were not evaluated this time, and sets no timestamp that did not change,
// so an unchanged world produces an identical status and no write.
func DesiredStatus(es *elastiv1alpha1.ElastiService, o Observed, p Plan, fx Effects, resolverNamespace string) elastiv1alpha1.ElastiServiceStatus {
	st := *es.Status.DeepCopy()
	now := metav1.NewTime(o.Now)
	if fx.Slept && p.Active == contract.ReasonDozing {
		// The pods could not doze, and the target went to zero instead.
		p.Active = contract.ReasonScaledToZero
	}
	switch {
	case fx.Dozed != nil:
		if st.Doze == nil {
			st.LastScaledDownTime = &now
		}
		st.Doze = fx.Dozed
	case p.DozeOver:
		st.Doze = nil
	}
	st.ObservedGeneration = es.Generation
	st.Mode = p.Mode
	if o.Service.Found && o.Service.PortsErr == nil {
		st.ProxyPorts = o.Service.Ports
	}
	if fx.Woke {
		st.LastScaledUpTime = &now
		if !o.Demand.PreWarm.IsZero() {
			// The firing is recorded with the wake it caused, so that it
			// is acted on once.
			st.LastPreWarmTime = &metav1.Time{Time: o.Demand.PreWarm}
		}
	}
	if w := o.Demand.WokeUnrecorded; !fx.Woke && !w.IsZero() && (st.LastScaledUpTime == nil || st.LastScaledUpTime.Time.Before(w)) {
		st.LastScaledUpTime = &metav1.Time{Time: w}
	}
	if h := o.Demand.PreWarmHandled; !h.IsZero() && (st.LastPreWarmTime == nil || h.After(st.LastPreWarmTime.Time)) {
		st.LastPreWarmTime = &metav1.Time{Time: h}
	}
	if fx.Slept {
		st.LastScaledDownTime = &now
	}
	if fx.Woke && p.SleepCancelled {
		st.LastSleepCancelledTime = &now
	}
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: msg,
			ObservedGeneration: es.Generation, LastTransitionTime: now,
		})
	}

	// Ready: can Elasti do its job for this Service?
	switch {
	case !o.Service.Found:
		set(elastiv1alpha1.ConditionReady, metav1.ConditionFalse, ReasonServiceNotFound,
			fmt.Sprintf("Service %s/%s does not exist; create it or fix spec.service", es.Namespace, es.Spec.Service))
	case o.Service.Refusal.Refused():
		set(elastiv1alpha1.ConditionReady, metav1.ConditionFalse, o.Service.Refusal.Reason, o.Service.Refusal.Message)
	case o.Service.PortsErr != nil:
		set(elastiv1alpha1.ConditionReady, metav1.ConditionFalse, ReasonPortsExhausted,
			o.Service.PortsErr.Error()+"; widen the operator's and the resolver's --port-range")
	case !o.Target.Found:
		set(elastiv1alpha1.ConditionReady, metav1.ConditionFalse, ReasonTargetNotFound,
			fmt.Sprintf("scale target %s %s cannot be scaled: %s", es.Spec.ScaleTargetRef.Kind, es.Spec.ScaleTargetRef.Name, o.Target.Err))
	case o.Target.WatchReason != "":
		set(elastiv1alpha1.ConditionReady, metav1.ConditionFalse, o.Target.WatchReason,
			o.Target.WatchErr+"; until then the target is woken through /scale but not put to sleep")
	case len(o.Service.Ports) == 0:
		set(elastiv1alpha1.ConditionReady, metav1.ConditionFalse, ReasonNoServicePorts,
			fmt.Sprintf("Service %s/%s has no TCP port the resolver could hold", es.Namespace, es.Spec.Service))
	case p.Mode == elastiv1alpha1.ModeProxy:
		set(elastiv1alpha1.ConditionReady, metav1.ConditionTrue, ReasonProxying, "the resolvers receive the Service's traffic")
	default:
		set(elastiv1alpha1.ConditionReady, metav1.ConditionTrue, contract.ReasonServing, "the Service routes straight to the target")
	}

	// Active: does the target have replicas?
	switch {
	case !o.Target.Found:
		set(elastiv1alpha1.ConditionActive, metav1.ConditionUnknown, ReasonTargetNotFound, "the scale target cannot be read")
	case p.Active == contract.ReasonScaledToZero:
		set(elastiv1alpha1.ConditionActive, metav1.ConditionFalse, contract.ReasonScaledToZero, "the target is at zero replicas; the resolvers hold its traffic")
	case p.Active == contract.ReasonDozing:
		set(elastiv1alpha1.ConditionActive, metav1.ConditionFalse, contract.ReasonDozing,
			"the target's pods are dozing: their requests are lowered to spec.doze's floor and their limits kept; the resolvers receive its traffic")
	case p.Active == contract.ReasonScalingDown:
		set(elastiv1alpha1.ConditionActive, metav1.ConditionTrue, contract.ReasonScalingDown, fmt.Sprintf(
			"the triggers are idle; the target goes to zero after the %s grace period, unless traffic reaches a resolver first", o.Grace.Period))
	case p.Active == contract.ReasonWaking:
		set(elastiv1alpha1.ConditionActive, metav1.ConditionTrue, contract.ReasonWaking, "the target was woken and has no ready endpoint yet")
	default:
		set(elastiv1alpha1.ConditionActive, metav1.ConditionTrue, contract.ReasonServing, "the target has replicas")
	}

	// Idle and TriggersHealthy.
	switch {
	case o.Sleep.Reason == sleepgate.ReasonNoTriggers:
		set(elastiv1alpha1.ConditionIdle, metav1.ConditionFalse, ReasonNoTriggers, "no triggers: the target never sleeps on its own")
		set(elastiv1alpha1.ConditionTriggersHealthy, metav1.ConditionTrue, ReasonNoTriggers, "no triggers to evaluate")
	case o.Sleep.Reason == sleepgate.ReasonKeepAwake:
		set(elastiv1alpha1.ConditionIdle, metav1.ConditionFalse, ReasonKeepAwake,
			fmt.Sprintf("annotation %s=true keeps the target awake", contract.AnnotationKeepAwake))
	case o.Sleep.Reason == sleepgate.ReasonInvalidEnabledPeriod:
		set(elastiv1alpha1.ConditionTriggersHealthy, metav1.ConditionFalse, ReasonInvalidEnabledRange, o.Sleep.Message)
	case o.HPA.Exposed:
		set(elastiv1alpha1.ConditionIdle, metav1.ConditionFalse, hpacustody.ReasonFloorNotRaised, fmt.Sprintf(
			"HPA %s has minReplicas 0 and the operator could not raise it to 1: the target is kept awake, since the HPA could take it to zero before the proxy is in place",
			hpacustody.Named(es)))
	case o.HPA.IdleVerdict(o.Triggers, o.NoTriggers) != nil:
		v := o.HPA.IdleVerdict(o.Triggers, o.NoTriggers)
		evaluated := "every trigger was evaluated"
		if o.HPA.Custody {
			evaluated = "the triggers and the readings of HPA " + hpacustody.Named(es) + " were evaluated"
		}
		switch v.State {
		case scaling.StateIdle:
			set(elastiv1alpha1.ConditionIdle, metav1.ConditionTrue, ReasonAllTriggersIdle, v.Message)
			set(elastiv1alpha1.ConditionTriggersHealthy, metav1.ConditionTrue, ReasonEvaluated, evaluated)
		case scaling.StateActive:
			set(elastiv1alpha1.ConditionIdle, metav1.ConditionFalse, ReasonTriggerActive, v.Message)
			set(elastiv1alpha1.ConditionTriggersHealthy, metav1.ConditionTrue, ReasonEvaluated, evaluated)
		default:
			set(elastiv1alpha1.ConditionIdle, metav1.ConditionUnknown, ReasonTriggersUnhealthy, "a trigger cannot be evaluated; the target is kept awake")
			set(elastiv1alpha1.ConditionTriggersHealthy, metav1.ConditionFalse, v.Reason, v.Message)
		}
	}
	for _, typ := range []string{elastiv1alpha1.ConditionIdle, elastiv1alpha1.ConditionTriggersHealthy} {
		if meta.FindStatusCondition(st.Conditions, typ) == nil {
			set(typ, metav1.ConditionUnknown, ReasonNotEvaluated, "the triggers are evaluated for a sleep once the cooldown is over and inside the enabledPeriod")
		}
	}

	// ProxyReady.
	switch {
	case o.Resolvers == 0:
		set(elastiv1alpha1.ConditionProxyReady, metav1.ConditionFalse, ReasonNoReadyResolvers,
			fmt.Sprintf("no ready pod labelled %s=%s in namespace %s; the target is kept awake and the Service routes to it directly",
				contract.LabelComponent, contract.ComponentResolver, resolverNamespace))
	case p.Mode == elastiv1alpha1.ModeProxy:
		set(elastiv1alpha1.ConditionProxyReady, metav1.ConditionTrue, ReasonProxySliceReady, "the proxy EndpointSlice lists the ready resolvers")
	default:
		set(elastiv1alpha1.ConditionProxyReady, metav1.ConditionTrue, ReasonResolversAvailable, "ready resolvers can take the Service's traffic when the target sleeps")
	}
	// TargetReady: the cooldown counts from its last change (sleepgate).
	if o.OwnReady {
		set(elastiv1alpha1.ConditionTargetReady, metav1.ConditionTrue, ReasonEndpointReady, "the Service's own EndpointSlices list a ready endpoint of the target")
	} else {
		set(elastiv1alpha1.ConditionTargetReady, metav1.ConditionFalse, ReasonNoReadyEndpoint, "the Service's own EndpointSlices list no ready endpoint of the target")
	}
	fallback.SetCondition(&st, es.Generation, o.Concerns.Fallback, o.Now)
	st.Ledger = ledger.Next(es, st, o.Now, o.Target.Replicas, o.Concerns.Ledger)
	st.WakeProgress = wakeprogress.Next(es.Status.WakeProgress, st, o.Concerns.Progress, p.Mode, p.Active, o.Now)
	return st
}

// StatusChanged compares two statuses, ignoring lastReconciledTime.
func StatusChanged(a, b elastiv1alpha1.ElastiServiceStatus) bool {
	a.LastReconciledTime, b.LastReconciledTime = nil, nil
	return !equality.Semantic.DeepEqual(a, b)
}

// Stamp sets lastReconciledTime on a status that is about to be written.
func Stamp(st *elastiv1alpha1.ElastiServiceStatus, now time.Time) {
	t := metav1.NewTime(now)
	st.LastReconciledTime = &t
}
