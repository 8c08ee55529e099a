package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

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

// Condition reasons beyond the Active ones in internal/contract.
const (
	ReasonProxying            = "Proxying"
	ReasonServiceNotFound     = "ServiceNotFound"
	ReasonTargetNotFound      = "TargetNotFound"
	ReasonPortsExhausted      = "PortsExhausted"
	ReasonNoServicePorts      = "NoTCPServicePorts"
	ReasonNoReadyResolvers    = "NoReadyResolvers"
	ReasonResolversAvailable  = "ResolversAvailable"
	ReasonProxySliceReady     = "ProxySliceReady"
	ReasonAllTriggersIdle     = "AllTriggersIdle"
	ReasonTriggerActive       = "TriggerActive"
	ReasonTriggersUnhealthy   = "TriggersUnhealthy"
	ReasonNotEvaluated        = "NotEvaluated"
	ReasonNoTriggers          = "NoTriggers"
	ReasonKeepAwake           = "KeepAwake"
	ReasonEvaluated           = "Evaluated"
	ReasonInvalidEnabledRange = "InvalidEnabledPeriod"
	// ReasonEndpointReady and ReasonNoReadyEndpoint are TargetReady's.
	ReasonEndpointReady   = "EndpointReady"
	ReasonNoReadyEndpoint = "NoReadyEndpoint"
)

// effects is what a reconcile actually did, for the status and Events.
type effects struct {
	woke     bool
	slept    bool
	replicas int32
	// raised: the scale-down found the target raised by someone else to
	// this many replicas since observe read it, and left it there.
	raised int32
	// recorded: the reconcile wrote the status to record the proxy ports
	// ahead of the proxy slice (recordProxyPorts), and writes it no more.
	recorded bool
}

// desiredStatus builds the status a reconcile should leave behind. It keeps
// the Idle and TriggersHealthy conditions as they were when the triggers
// were not evaluated this time, and sets no timestamp that did not change,
// so an unchanged world produces an identical status and no write.
func desiredStatus(es *elastiv1alpha1.ElastiService, o observed, p plan, fx effects, resolverNamespace string) elastiv1alpha1.ElastiServiceStatus {
	st := *es.Status.DeepCopy()
	now := metav1.NewTime(o.now)
	st.ObservedGeneration = es.Generation
	st.Mode = p.mode
	if o.service.found && o.service.portsErr == nil {
		st.ProxyPorts = o.service.ports
	}
	if fx.woke {
		st.LastScaledUpTime = &now
		if !o.demand.preWarm.IsZero() {
			// The firing is recorded with the wake it caused, so that it
			// is acted on once.
			st.LastPreWarmTime = &metav1.Time{Time: o.demand.preWarm}
		}
	}
	if fx.slept {
		st.LastScaledDownTime = &now
	}
	if fx.woke && p.sleepCancelled {
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
	case !o.service.found:
		set(elastiv1alpha1.ConditionReady, metav1.ConditionFalse, ReasonServiceNotFound,
			fmt.Sprintf("Service %s/%s does not exist; create it or fix spec.service", es.Namespace, es.Spec.Service))
	case o.service.refusal.Refused():
		set(elastiv1alpha1.ConditionReady, metav1.ConditionFalse, o.service.refusal.Reason, o.service.refusal.Message)
	case o.service.portsErr != nil:
		set(elastiv1alpha1.ConditionReady, metav1.ConditionFalse, ReasonPortsExhausted,
			o.service.portsErr.Error()+"; widen the operator's and the resolver's --port-range")
	case !o.target.found:
		set(elastiv1alpha1.ConditionReady, metav1.ConditionFalse, ReasonTargetNotFound,
			fmt.Sprintf("scale target %s %s cannot be scaled: %s", es.Spec.ScaleTargetRef.Kind, es.Spec.ScaleTargetRef.Name, o.target.err))
	case o.target.watchReason != "":
		set(elastiv1alpha1.ConditionReady, metav1.ConditionFalse, o.target.watchReason,
			o.target.watchErr+"; until then the target is woken through /scale but not put to sleep")
	case len(o.service.ports) == 0:
		set(elastiv1alpha1.ConditionReady, metav1.ConditionFalse, ReasonNoServicePorts,
			fmt.Sprintf("Service %s/%s has no TCP port the resolver could hold", es.Namespace, es.Spec.Service))
	case p.mode == elastiv1alpha1.ModeProxy:
		set(elastiv1alpha1.ConditionReady, metav1.ConditionTrue, ReasonProxying, "the resolvers receive the Service's traffic")
	default:
		set(elastiv1alpha1.ConditionReady, metav1.ConditionTrue, contract.ReasonServing, "the Service routes straight to the target")
	}

	// Active: does the target have replicas?
	switch {
	case !o.target.found:
		set(elastiv1alpha1.ConditionActive, metav1.ConditionUnknown, ReasonTargetNotFound, "the scale target cannot be read")
	case p.active == contract.ReasonScaledToZero:
		set(elastiv1alpha1.ConditionActive, metav1.ConditionFalse, contract.ReasonScaledToZero, "the target is at zero replicas; the resolvers hold its traffic")
	case p.active == contract.ReasonScalingDown:
		set(elastiv1alpha1.ConditionActive, metav1.ConditionTrue, contract.ReasonScalingDown, fmt.Sprintf(
			"the triggers are idle; the target goes to zero after the %s grace period, unless traffic reaches a resolver first", o.grace.period))
	case p.active == contract.ReasonWaking:
		set(elastiv1alpha1.ConditionActive, metav1.ConditionTrue, contract.ReasonWaking, "the target was woken and has no ready endpoint yet")
	default:
		set(elastiv1alpha1.ConditionActive, metav1.ConditionTrue, contract.ReasonServing, "the target has replicas")
	}

	// Idle and TriggersHealthy.
	switch {
	case o.sleep.Reason == sleepgate.ReasonNoTriggers:
		set(elastiv1alpha1.ConditionIdle, metav1.ConditionFalse, ReasonNoTriggers, "no triggers: the target never sleeps on its own")
		set(elastiv1alpha1.ConditionTriggersHealthy, metav1.ConditionTrue, ReasonNoTriggers, "no triggers to evaluate")
	case o.sleep.Reason == sleepgate.ReasonKeepAwake:
		set(elastiv1alpha1.ConditionIdle, metav1.ConditionFalse, ReasonKeepAwake,
			fmt.Sprintf("annotation %s=true keeps the target awake", contract.AnnotationKeepAwake))
	case o.sleep.Reason == sleepgate.ReasonInvalidEnabledPeriod:
		set(elastiv1alpha1.ConditionTriggersHealthy, metav1.ConditionFalse, ReasonInvalidEnabledRange, o.sleep.Message)
	case o.hpa.Exposed:
		set(elastiv1alpha1.ConditionIdle, metav1.ConditionFalse, hpacustody.ReasonFloorNotRaised, fmt.Sprintf(
			"HPA %s has minReplicas 0 and the operator could not raise it to 1: the target is kept awake, since the HPA could take it to zero before the proxy is in place",
			hpacustody.Named(es)))
	case o.hpa.IdleVerdict(o.triggers, o.noTriggers) != nil:
		v := o.hpa.IdleVerdict(o.triggers, o.noTriggers)
		evaluated := "every trigger was evaluated"
		if o.hpa.Custody {
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
			set(typ, metav1.ConditionUnknown, ReasonNotEvaluated, "the triggers are evaluated once the cooldown is over and inside the enabledPeriod")
		}
	}

	// ProxyReady.
	switch {
	case o.resolvers == 0:
		set(elastiv1alpha1.ConditionProxyReady, metav1.ConditionFalse, ReasonNoReadyResolvers,
			fmt.Sprintf("no ready pod labelled %s=%s in namespace %s; the target is kept awake and the Service routes to it directly",
				contract.LabelComponent, contract.ComponentResolver, resolverNamespace))
	case p.mode == elastiv1alpha1.ModeProxy:
		set(elastiv1alpha1.ConditionProxyReady, metav1.ConditionTrue, ReasonProxySliceReady, "the proxy EndpointSlice lists the ready resolvers")
	default:
		set(elastiv1alpha1.ConditionProxyReady, metav1.ConditionTrue, ReasonResolversAvailable, "ready resolvers can take the Service's traffic when the target sleeps")
	}
	// TargetReady: the cooldown counts from its last change (sleepgate).
	if o.ownReady {
		set(elastiv1alpha1.ConditionTargetReady, metav1.ConditionTrue, ReasonEndpointReady, "the Service's own EndpointSlices list a ready endpoint of the target")
	} else {
		set(elastiv1alpha1.ConditionTargetReady, metav1.ConditionFalse, ReasonNoReadyEndpoint, "the Service's own EndpointSlices list no ready endpoint of the target")
	}
	fallback.SetCondition(&st, es.Generation, o.concerns.fallback, o.now)
	st.Ledger = ledger.Next(es, st, o.now, o.target.replicas, o.concerns.ledger)
	st.WakeProgress = wakeprogress.Next(es.Status.WakeProgress, st, o.concerns.progress, p.mode, p.active, o.now)
	return st
}

// writeStatus writes the status when it changed, and emits the Events that
// describe the change. An unchanged status is not written, so that polling
// an awake target costs no API write.
func (r *Reconciler) writeStatus(ctx context.Context, es *elastiv1alpha1.ElastiService, o observed, p plan, fx effects) error {
	st := desiredStatus(es, o, p, fx, r.cfg.ResolverNamespace)
	if !statusChanged(es.Status, st) {
		return nil
	}
	if modeOrServe(es.Status.Mode) != st.Mode {
		r.recorder.Eventf(es, nil, corev1.EventTypeNormal, EventModeChanged, "SwitchMode", "mode %s -> %s", modeOrServe(es.Status.Mode), st.Mode)
	}
	if was, now := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionTriggersHealthy),
		meta.FindStatusCondition(st.Conditions, elastiv1alpha1.ConditionTriggersHealthy); now != nil && now.Status == "False" &&
		(was == nil || was.Status != now.Status || was.Reason != now.Reason) {
		r.recorder.Eventf(es, nil, corev1.EventTypeWarning, EventTriggerUnhealthy, "EvaluateTriggers", "%s: %s", now.Reason, now.Message)
	}
	if was, now := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionReady),
		meta.FindStatusCondition(st.Conditions, elastiv1alpha1.ConditionReady); now != nil && refusals.Is(now.Reason) &&
		(was == nil || was.Reason != now.Reason || was.Message != now.Message) {
		r.recorder.Eventf(es, nil, corev1.EventTypeWarning, now.Reason, "Refuse", "%s", now.Message)
	}
	fallback.Announce(r.recorder, es, es.Status.Conditions, st.Conditions)
	stamp(&st, o.now)
	prevLedger, prevProgress := es.Status.Ledger, es.Status.WakeProgress
	es.Status = st
	if err := r.client.Status().Update(ctx, es); err != nil {
		return fmt.Errorf("update status of ElastiService %s/%s: %w", es.Namespace, es.Name, err)
	}
	ledger.Record(es.Namespace, es.Name, prevLedger, st.Ledger)
	log := ctrl.LoggerFrom(ctx)
	// A phase change is logged, not announced: an Event per phase of every
	// wake would drown the others.
	if wp := st.WakeProgress; wp != nil && (prevProgress == nil || prevProgress.Phase != wp.Phase) {
		log.V(1).Info("wake progress", "elastiservice", klog.KObj(es), "phase", wp.Phase, "pod", wp.Pod, "message", wp.Message)
	}
	log.V(1).Info("status updated", "elastiservice", klog.KObj(es), "mode", st.Mode)
	return nil
}

// recordProxyPorts writes the status this reconcile plans, with
// status.proxyPorts and mode proxy, ahead of the proxy slice, when the
// status does not record them yet, and reports whether it wrote. A proxy
// slice may use a port only once the status records it: the statuses are
// all a new leader knows about taken ports, so a crash between a slice
// write and a later status write would let it hand a port that a slice
// routes to another ElastiService. The resolvers map a port only while its
// ElastiService is in proxy mode (so that a warm backend is never reachable
// through them), so the mode, too, is recorded before the slice sends them
// traffic. The whole planned status goes out, not the mode alone: the phase
// is read back from the mode and the Active reason together (currentPhase),
// and proxy mode with the Active reason of serve would read as a wake in
// progress.
//
// A reconcile writes the status once (docs/architecture.md, "One
// reconcile"), and this write is the one of its reconcile: the proxy slice
// and the grace timer follow, and nothing the status shows changes after
// them, except a scale to zero. That waits for the next reconcile, soon
// after, so a scale-down planned now is recorded as still in its grace
// period (ScalingDown), the phase the next reconcile finishes it from.
func (r *Reconciler) recordProxyPorts(ctx context.Context, es *elastiv1alpha1.ElastiService, o observed, p plan, fx effects) (bool, error) {
	if equality.Semantic.DeepEqual(es.Status.ProxyPorts, o.service.ports) && es.Status.Mode == elastiv1alpha1.ModeProxy {
		return false, nil
	}
	if p.sleep {
		p.active = contract.ReasonScalingDown
	}
	return true, r.writeStatus(ctx, es, o, p, fx)
}

// modeOrServe reads an unset mode (a new ElastiService) as serve, so that
// the first status write is not reported as a mode change.
func modeOrServe(m elastiv1alpha1.Mode) elastiv1alpha1.Mode {
	if m == "" {
		return elastiv1alpha1.ModeServe
	}
	return m
}

// statusChanged compares two statuses, ignoring lastReconciledTime.
func statusChanged(a, b elastiv1alpha1.ElastiServiceStatus) bool {
	a.LastReconciledTime, b.LastReconciledTime = nil, nil
	return !equality.Semantic.DeepEqual(a, b)
}

// stamp sets lastReconciledTime on a status that is about to be written.
func stamp(st *elastiv1alpha1.ElastiServiceStatus, now time.Time) {
	t := metav1.NewTime(now)
	st.LastReconciledTime = &t
}
