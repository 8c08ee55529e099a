package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/proxyslices"
	"elasti.dev/elasti/internal/controller/wakeprogress"
)

// The FallbackActive condition (spec.proxy.fallback) and the reasons it
// carries. The resolvers read it: while it is True, held and new requests
// go to the fallback Service's ready endpoints instead of waiting. They also
// send a request there on their own once its hold has lasted
// fallback.after; the condition's DeadlinePassed says the same for the wake
// as a whole, so that requests arriving later are not held again.
const (
	// ReasonFallbackDeadlinePassed: the target has had no ready endpoint
	// for fallback.after since the wake began.
	ReasonFallbackDeadlinePassed = "DeadlinePassed"
	// ReasonFallbackPodsUnschedulable: a pod of the target cannot be
	// scheduled (PodScheduled=False, reason Unschedulable).
	ReasonFallbackPodsUnschedulable = "PodsUnschedulable"
	// ReasonFallbackScaleRefused: the API server refused the wake's write
	// to the target's /scale (a policy, a webhook, a quota on the scale).
	ReasonFallbackScaleRefused = "ScaleRefused"
	// ReasonFallbackPodsNotCreated: no pod of the wake exists and the
	// workload controller says it cannot create one (a ResourceQuota, a
	// LimitRange, an admission webhook): the target's ReplicaFailure=True
	// condition, or a FailedCreate Warning Event about it, since the wake
	// (fallback_notcreated.go).
	ReasonFallbackPodsNotCreated = "PodsNotCreated"
	// ReasonFallbackUnavailable: one of the above holds, but the fallback
	// Service does not exist or has no ready endpoint; requests are held.
	ReasonFallbackUnavailable = "FallbackUnavailable"
	// ReasonFallbackNotNeeded: the target is ready, asleep without a wake,
	// or waking within fallback.after.
	ReasonFallbackNotNeeded = "NotNeeded"

	// EventFallbackActive: the fallback Service took over, and why.
	EventFallbackActive = "FallbackActive"
	// EventFallbackUnavailable: the fallback is needed but cannot take the
	// traffic.
	EventFallbackUnavailable = "FallbackUnavailable"
)

// fallbackRecheck is how often a reconcile comes back while a wake with a
// fallback is in progress: the target's pods are not watched (the cache
// holds only the resolvers'), so an unschedulable pod is found by looking.
const fallbackRecheck = 5 * time.Second

// fallbackObserved is what the FallbackActive condition is derived from.
type fallbackObserved struct {
	// after is spec.proxy.fallback.after; zero when there is no fallback.
	after   time.Duration
	service string
	// waking: a wake is in progress in proxy mode and the target has no
	// ready endpoint; wokeAt is when it began (the Active condition's
	// turn to Waking).
	waking bool
	wokeAt time.Time
	// serviceFound and ready describe the fallback Service.
	serviceFound, ready bool
	// refused, notCreated and unschedulable are the messages of a failed
	// wake.
	refused, notCreated, unschedulable string
}

// fallbackVerdict is the FallbackActive condition, as a pure function of
// what was observed, and when to look again. ok is false when there is no
// fallback, and the condition goes. When more than one cause holds, the
// earliest step of the wake that failed names it: the scale write
// (ScaleRefused), the pods' creation (PodsNotCreated), their scheduling
// (PodsUnschedulable); then the deadline (DeadlinePassed).
func fallbackVerdict(f fallbackObserved, now time.Time) (status metav1.ConditionStatus, reason, msg string, recheck time.Duration, ok bool) {
	if f.after <= 0 {
		return "", "", "", 0, false
	}
	if !f.waking {
		return metav1.ConditionFalse, ReasonFallbackNotNeeded, "the target is not waking; requests go to it, or wait for its wake", 0, true
	}
	var cause, why string
	switch {
	case f.refused != "":
		cause, why = ReasonFallbackScaleRefused, "the wake's scale write was refused: "+f.refused
	case f.notCreated != "":
		cause, why = ReasonFallbackPodsNotCreated, wakeprogress.MsgPodsNotCreated+f.notCreated
	case f.unschedulable != "":
		cause, why = ReasonFallbackPodsUnschedulable, "a pod of the target cannot be scheduled: "+f.unschedulable
	case !f.wokeAt.IsZero() && now.Sub(f.wokeAt) >= f.after:
		cause, why = ReasonFallbackDeadlinePassed, fmt.Sprintf("the target has had no ready endpoint for %s since the wake (fallback.after %s)", now.Sub(f.wokeAt).Round(time.Second), f.after)
	default:
		recheck = fallbackRecheck
		if !f.wokeAt.IsZero() {
			recheck = min(recheck, max(f.wokeAt.Add(f.after).Sub(now), time.Millisecond))
		}
		return metav1.ConditionFalse, ReasonFallbackNotNeeded, fmt.Sprintf("the target is waking, within fallback.after (%s)", f.after), recheck, true
	}
	switch {
	case !f.serviceFound:
		return metav1.ConditionFalse, ReasonFallbackUnavailable, why + fmt.Sprintf("; fallback Service %s does not exist, so requests are held", f.service), fallbackRecheck, true
	case !f.ready:
		return metav1.ConditionFalse, ReasonFallbackUnavailable, why + fmt.Sprintf("; fallback Service %s has no ready endpoint, so requests are held", f.service), fallbackRecheck, true
	}
	return metav1.ConditionTrue, cause, why + fmt.Sprintf("; requests go to fallback Service %s until the target is ready", f.service), fallbackRecheck, true
}

// observeFallback reads what fallbackVerdict needs, and only while a wake
// with a fallback is in progress: the fallback Service and its slices from
// the cache. pods are the target's, which observe listed live for the wake
// in progress (wakingPods); nil when none was. notCreated is why the
// workload controller creates none of them (observePodsNotCreated).
func (r *Reconciler) observeFallback(ctx context.Context, es *elastiv1alpha1.ElastiService, o observed, pods []corev1.Pod, notCreated string) (fallbackObserved, error) {
	p := es.Spec.Proxy
	if p == nil || p.Fallback == nil {
		return fallbackObserved{}, nil
	}
	after, err := time.ParseDuration(p.Fallback.After)
	if err != nil || after <= 0 {
		return fallbackObserved{}, nil
	}
	f := fallbackObserved{after: after, service: p.Fallback.Service}
	key := client.ObjectKeyFromObject(es)
	f.refused, _ = r.refusedWakes.Get(key)
	// A wake in progress, or one whose scale write was refused while the
	// resolvers hold the traffic.
	f.waking = wakeInProgress(es, o) || (f.refused != "" && es.Status.Mode == elastiv1alpha1.ModeProxy && !o.ownReady)
	if !f.waking {
		return f, nil
	}
	if c := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionActive); c != nil && c.Reason == contract.ReasonWaking {
		f.wokeAt = c.LastTransitionTime.Time
	}
	fb := &corev1.Service{}
	switch err := r.client.Get(ctx, types.NamespacedName{Namespace: es.Namespace, Name: p.Fallback.Service}, fb); {
	case err == nil:
		f.serviceFound = true
		slices := &discoveryv1.EndpointSliceList{}
		if err := r.client.List(ctx, slices, client.InNamespace(es.Namespace),
			client.MatchingLabels{discoveryv1.LabelServiceName: p.Fallback.Service}); err != nil {
			return f, fmt.Errorf("list EndpointSlices of fallback Service %s/%s: %w", es.Namespace, p.Fallback.Service, err)
		}
		f.ready = proxyslices.OwnReady(slices.Items)
	case apierrors.IsNotFound(err):
	default:
		return f, fmt.Errorf("get fallback Service %s/%s: %w", es.Namespace, p.Fallback.Service, err)
	}
	f.notCreated, f.unschedulable = notCreated, unschedulable(pods)
	return f, nil
}

// unschedulable returns the scheduler's message on the first pod it cannot
// place, or "" when there is none.
func unschedulable(pods []corev1.Pod) string {
	for i := range pods {
		if pods[i].DeletionTimestamp != nil {
			continue
		}
		for _, c := range pods[i].Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return fmt.Sprintf("pod %s: %s", pods[i].Name, c.Message)
			}
		}
	}
	return ""
}

// setFallbackCondition writes the FallbackActive condition into st.
func setFallbackCondition(st *elastiv1alpha1.ElastiServiceStatus, es *elastiv1alpha1.ElastiService, f fallbackObserved, now time.Time) {
	status, reason, msg, _, ok := fallbackVerdict(f, now)
	if !ok {
		meta.RemoveStatusCondition(&st.Conditions, elastiv1alpha1.ConditionFallbackActive)
		return
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: elastiv1alpha1.ConditionFallbackActive, Status: status, Reason: reason, Message: msg,
		ObservedGeneration: es.Generation, LastTransitionTime: metav1.NewTime(now),
	})
}

// announceFallback emits an Event when the fallback takes over, or is
// needed and cannot, naming the cause.
func (r *Reconciler) announceFallback(es *elastiv1alpha1.ElastiService, was, now []metav1.Condition) {
	prev, cur := meta.FindStatusCondition(was, elastiv1alpha1.ConditionFallbackActive), meta.FindStatusCondition(now, elastiv1alpha1.ConditionFallbackActive)
	if cur == nil || (prev != nil && prev.Status == cur.Status && prev.Reason == cur.Reason) {
		return
	}
	switch {
	case cur.Status == metav1.ConditionTrue:
		r.recorder.Eventf(es, nil, corev1.EventTypeWarning, EventFallbackActive, "Fallback", "%s: %s", cur.Reason, cur.Message)
	case cur.Reason == ReasonFallbackUnavailable:
		r.recorder.Eventf(es, nil, corev1.EventTypeWarning, EventFallbackUnavailable, "Fallback", "%s", cur.Message)
	}
}

// scaleRefusal reports whether err is the API server refusing a write (as
// opposed to failing to answer): forbidden, invalid, or denied by an
// admission webhook or policy.
func scaleRefusal(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err)
}

// reportRefusedWake records a wake whose scale write the API server
// refused and, with a fallback, writes the FallbackActive condition at once,
// so that the resolvers stop holding; the reconcile's error retries the
// wake with backoff.
func (r *Reconciler) reportRefusedWake(ctx context.Context, es *elastiv1alpha1.ElastiService, o observed, err error) error {
	key := client.ObjectKeyFromObject(es)
	r.refusedWakes.Set(key, err.Error())
	f, ferr := r.observeFallback(ctx, es, o, nil, "")
	if ferr != nil || f.after <= 0 {
		return ferr
	}
	st := *es.Status.DeepCopy()
	setFallbackCondition(&st, es, f, o.now)
	if !statusChanged(es.Status, st) {
		return nil
	}
	was := es.Status.Conditions
	es.Status = st
	if err := r.client.Status().Update(ctx, es); err != nil {
		return fmt.Errorf("update status of ElastiService %s/%s: %w", es.Namespace, es.Name, err)
	}
	r.announceFallback(es, was, st.Conditions)
	return nil
}
