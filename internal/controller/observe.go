package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/dozer"
	"elasti.dev/elasti/internal/controller/fallback"
	"elasti.dev/elasti/internal/controller/hpacustody"
	"elasti.dev/elasti/internal/controller/ledger"
	"elasti.dev/elasti/internal/controller/plan"
	"elasti.dev/elasti/internal/controller/podtemplates"
	"elasti.dev/elasti/internal/controller/proxyslices"
	"elasti.dev/elasti/internal/controller/refusals"
	"elasti.dev/elasti/internal/controller/wakecalls"
	"elasti.dev/elasti/internal/controller/wakeprogress"
	"elasti.dev/elasti/internal/keyed"
	"elasti.dev/elasti/internal/scaling"
	"elasti.dev/elasti/internal/sleepgate"
)

// listed keeps the objects observe listed that the writers need again, so
// that a reconcile lists each of them once and writes from the same view
// that decide planned with.
type listed struct {
	// resolvers are the ready resolver pods, sorted by name; decide sees
	// their count (plan.Observed.Resolvers), execute builds the proxy slices
	// from them.
	resolvers []proxyslices.Resolver
	// service is the Service spec.service names; nil when it does not
	// exist. claim allocates resolver ports to its ports.
	service *corev1.Service
	// doze is a sleepMode Doze target's pods, read while it dozes or is
	// about to; execute resizes them.
	doze dozer.Target
}

// observe reads everything decide needs, and keeps in listed what the
// writers reuse. hold is what hpacustody's Sync found of the HPA
// spec.autoscaler names.
func (r *Reconciler) observe(ctx context.Context, es *elastiv1alpha1.ElastiService, hold hpacustody.Hold) (plan.Observed, listed, error) {
	key := client.ObjectKeyFromObject(es)
	_, wakeNow := es.Annotations[contract.AnnotationWakeNow]
	// An activation call reports traffic a resolver saw: handed to this
	// leader directly, or by a follower through the wake-now annotation.
	activation := r.wakes.Pending(key) || wakecalls.Forwarded(es.Annotations)
	o := plan.Observed{
		Now:          r.clock.Now(),
		PollInterval: r.cfg.PollingInterval,
		NoTriggers:   len(es.Spec.Triggers) == 0,
		RateWanted:   r.cfg.MeasureRate && scaling.MeasuresRate(es),
		HPA:          hpacustody.Observed{Custody: hold.Custody, Exposed: hold.Exposed},
		Grace:        plan.GraceObserved{Period: gracePeriodOf(es.Spec, r.cfg.GracePeriod), StartedAt: graceStart(&r.grace, key)},
		Demand:       plan.Demand{Wake: wakeNow || activation, Traffic: activation, KeepAwake: contract.KeepAwake(es.Annotations)},
	}
	// A pre-warm firing wakes as an activation call does.
	o.Demand.PreWarmHandled = lastPreWarm(&r.preWarmed, key)
	o.Demand.WokeUnrecorded, _ = r.wokeUnrecorded.Get(key)
	o.Demand.PreWarm, o.Demand.PreWarmNext = plan.PreWarmFiring(ctx, es, o.Now, o.Demand.PreWarmHandled)
	o.Demand.Wake = o.Demand.Wake || !o.Demand.PreWarm.IsZero()
	var l listed

	svc := &corev1.Service{}
	switch err := r.client.Get(ctx, types.NamespacedName{Namespace: es.Namespace, Name: es.Spec.Service}, svc); {
	case err == nil:
		o.Service.Found, l.service = true, svc
		o.Service.Refusal = refusals.Service(svc)
	case apierrors.IsNotFound(err):
	default:
		return o, l, fmt.Errorf("get Service %s/%s: %w", es.Namespace, es.Spec.Service, err)
	}

	var replicas int32
	var err error
	if !wakeFromZero(es, o.Demand.Wake) || !r.targets.Cached(ctx, es.Namespace, es.Spec.ScaleTargetRef) {
		replicas, err = r.target.Scaler.Replicas(ctx, es.Namespace, es.Spec.ScaleTargetRef)
	}
	switch {
	case err == nil:
		o.Target.Found, o.Target.Replicas = true, replicas
	case apierrors.IsNotFound(err) || errors.Is(err, scaling.ErrTargetKindUnknown):
		o.Target.Err = "it does not exist"
		if errors.Is(err, scaling.ErrTargetKindUnknown) {
			o.Target.Err = fmt.Sprintf("the API server serves no %s in %s", es.Spec.ScaleTargetRef.Kind, es.Spec.ScaleTargetRef.APIVersion)
		}
	default:
		return o, l, err
	}

	if l.resolvers, err = proxyslices.ListResolvers(ctx, r.client, r.cfg.ResolverNamespace); err != nil {
		return o, l, err
	}
	o.Resolvers = len(l.resolvers)
	if o.Service.Found && !o.Service.Refusal.Refused() {
		o.Service.Refusal = refusals.Family(svc, l.resolvers)
	}
	if o.Service.Found && o.Target.Found && !o.Service.Refusal.Refused() {
		o.Service.Refusal = refusals.Selector(svc, es.Spec.ScaleTargetRef, r.templates.Labels(ctx, es.Namespace, es.Spec.ScaleTargetRef))
	}
	if o.OwnReady, err = proxyslices.ServiceReady(ctx, r.client, es.Namespace, es.Spec.Service); err != nil {
		return o, l, err
	}
	o.Concerns.Ledger = r.observeLedger(ctx, es, svc, o)
	pods, podsListed, err := r.wakingPods(ctx, es, svc, o)
	if err != nil {
		return o, l, err
	}
	notCreated := r.fallback.NotCreated(ctx, es, pods, podsListed)
	if o.Concerns.Fallback, err = r.fallback.Observe(ctx, es, fallback.Wake{InProgress: wakeInProgress(es, o), OwnReady: o.OwnReady, Pods: pods, NotCreated: notCreated}); err != nil {
		return o, l, err
	}
	o.Concerns.Progress = wakeprogress.Observe(ctx, r.live, es, o.Now, pods, podsListed, notCreated)

	o.Phase = plan.CurrentPhase(es.Status, o.Target.Replicas)
	o.Doze, l.doze = r.observeDoze(ctx, es, o)
	o.Sleep = sleepgate.Evaluate(hpacustody.GateView(es, hold.Custody), o.Now)
	if o.NeedsTriggers() && !o.NoTriggers {
		// The latest result, or nil while an evaluation runs: in serve
		// that reads as not idle, and at the end of a grace period, which
		// needs an evaluation begun after it, Decide waits. The
		// evaluation's end reconciles again.
		var notBefore time.Time
		if o.Phase == plan.PhaseScalingDown {
			notBefore = o.Grace.StartedAt.Add(o.Grace.Period)
		}
		o.Triggers = r.triggers.Result(es, notBefore)
		o.TriggersPending = o.Triggers == nil
	}
	if o.MeasuresRate() {
		// Queues an evaluation when the last is half an interval old; the
		// metrics API reads its rate (Poller.Latest), Decide nothing.
		r.triggers.Result(es, time.Time{})
	}
	if o.NeedsTriggers() && hold.Custody && hold.HPA != nil {
		var woke time.Time
		if es.Status.LastScaledUpTime != nil {
			woke = es.Status.LastScaledUpTime.Time
		}
		res := hpacustody.MetricsVerdict(hold.HPA, o.Now, woke)
		o.HPA.Metrics = &res
		ctrl.LoggerFrom(ctx).V(1).Info("HPA metrics read", "hpa", hold.HPA.Name, "state", res.State, "value", res.Value, "reason", res.Reason)
	}
	return o, l, nil
}

// wakeFromZero reports whether a wake is requested for a target this
// operator put to zero itself. observe then skips the /scale read: the wake's
// scale-from-zero write is conditional on zero anyway, and skipping the read
// takes one API round trip off every cold start. A target that turns out to
// have replicas, or to be gone, is read on that path or by the next
// reconcile. The caller also requires the target in the metadata cache, so a
// deleted target takes the read and is reported as missing.
func wakeFromZero(es *elastiv1alpha1.ElastiService, wakeRequested bool) bool {
	if !wakeRequested || es.Status.Mode != elastiv1alpha1.ModeProxy {
		return false
	}
	c := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionActive)
	return c != nil && c.Reason == contract.ReasonScaledToZero
}

// graceStart is when key's grace period began; zero when none runs.
func graceStart(grace *keyed.Map[types.NamespacedName, time.Time], key types.NamespacedName) time.Time {
	t, _ := grace.Get(key)
	return t
}

// lastPreWarm is the last pre-warm firing recorded for key; zero when none.
func lastPreWarm(firings *keyed.Map[types.NamespacedName, time.Time], key types.NamespacedName) time.Time {
	t, _ := firings.Get(key)
	return t
}

// observeLedger reads what the ledger needs: one replica's requests from
// the pod-template cache the selector check fills (no API read for an
// unchanged target), and, through ledger.Observe, the woken pods while a
// cold start is pending. The target's own pods when its template names
// them; else those the Service routes to.
func (r *Reconciler) observeLedger(ctx context.Context, es *elastiv1alpha1.ElastiService, svc *corev1.Service, o plan.Observed) ledger.Observed {
	requests := ledger.NoTemplate
	var tpl podtemplates.Template
	if o.Target.Found {
		if t, ok := r.templates.Read(ctx, es.Namespace, es.Spec.ScaleTargetRef); ok {
			tpl, requests = t, t.Requests
		}
	}
	sel := tpl.Labels
	if len(sel) == 0 && o.Service.Found {
		sel = svc.Spec.Selector
	}
	var pods ledger.PodLister
	if r.live != nil {
		pods = r.live
	}
	return ledger.Observe(ctx, pods, es, requests, o.OwnReady, sel)
}

// wakeInProgress reports whether a wake is in progress: the ElastiService
// is in proxy mode, so the resolvers hold the Service's traffic, and its
// target has replicas but no ready endpoint of its own yet.
func wakeInProgress(es *elastiv1alpha1.ElastiService, o plan.Observed) bool {
	return es.Status.Mode == elastiv1alpha1.ModeProxy && !o.OwnReady && o.Target.Replicas > 0
}

// wakingPods lists the pods of the Service, live, while a wake is in
// progress: the fallback looks for unschedulable ones (package fallback),
// status.wakeProgress for the one furthest along, and both for none at all
// (fallback.Tracker.NotCreated). A reconcile lists them once for all three.
// listed is false when the Service has no selector to list them by.
func (r *Reconciler) wakingPods(ctx context.Context, es *elastiv1alpha1.ElastiService, svc *corev1.Service, o plan.Observed) (pods []corev1.Pod, listed bool, err error) {
	if !wakeInProgress(es, o) || !o.Service.Found || len(svc.Spec.Selector) == 0 || r.live == nil {
		return nil, false, nil
	}
	list := &corev1.PodList{}
	if err := r.live.List(ctx, list, client.InNamespace(es.Namespace), client.MatchingLabels(svc.Spec.Selector)); err != nil {
		return nil, false, fmt.Errorf("list the pods of Service %s/%s: %w", es.Namespace, es.Spec.Service, err)
	}
	return list.Items, true, nil
}
