package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/fallback"
	"elasti.dev/elasti/internal/controller/ledger"
	"elasti.dev/elasti/internal/controller/plan"
	"elasti.dev/elasti/internal/controller/refusals"
)

// writeStatus writes the status when it changed, and emits the Events that
// describe the change. An unchanged status is not written, so that polling
// an awake target costs no API write.
func (r *Reconciler) writeStatus(ctx context.Context, es *elastiv1alpha1.ElastiService, o plan.Observed, p plan.Plan, fx plan.Effects) error {
	st := plan.DesiredStatus(es, o, p, fx, r.cfg.ResolverNamespace)
	if !plan.StatusChanged(es.Status, st) {
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
	plan.Stamp(&st, o.Now)
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
// is read back from the mode and the Active reason together (plan.CurrentPhase),
// and proxy mode with the Active reason of serve would read as a wake in
// progress.
//
// A reconcile writes the status once (docs/architecture.md, "One
// reconcile"), and this write is the one of its reconcile: the proxy slice
// and the grace timer follow, and nothing the status shows changes after
// them, except a scale to zero. That waits for the next reconcile, soon
// after, so a scale-down planned now is recorded as still in its grace
// period (ScalingDown), the phase the next reconcile finishes it from.
func (r *Reconciler) recordProxyPorts(ctx context.Context, es *elastiv1alpha1.ElastiService, o plan.Observed, p plan.Plan, fx plan.Effects) (bool, error) {
	if equality.Semantic.DeepEqual(es.Status.ProxyPorts, o.Service.Ports) && es.Status.Mode == elastiv1alpha1.ModeProxy {
		return false, nil
	}
	if p.Sleep {
		p.Active = contract.ReasonScalingDown
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
