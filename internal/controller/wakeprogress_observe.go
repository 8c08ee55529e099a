package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/ledger"
)

// wakeInProgress reports whether a wake is in progress: the ElastiService
// is in proxy mode, so the resolvers hold the Service's traffic, and its
// target has replicas but no ready endpoint of its own yet.
func wakeInProgress(es *elastiv1alpha1.ElastiService, o observed) bool {
	return es.Status.Mode == elastiv1alpha1.ModeProxy && !o.ownReady && o.replicas > 0
}

// wakingPods lists the pods of the Service, live, while a wake is in
// progress: the fallback looks for unschedulable ones (fallback.go),
// status.wakeProgress for the one furthest along, and both for none at all
// (fallback_notcreated.go). A reconcile lists them once for all three.
// listed is false when the Service has no selector to list them by.
func (r *Reconciler) wakingPods(ctx context.Context, es *elastiv1alpha1.ElastiService, svc *corev1.Service, o observed) (pods []corev1.Pod, listed bool, err error) {
	if !wakeInProgress(es, o) || !o.serviceFound || len(svc.Spec.Selector) == 0 || r.live == nil {
		return nil, false, nil
	}
	list := &corev1.PodList{}
	if err := r.live.List(ctx, list, client.InNamespace(es.Namespace), client.MatchingLabels(svc.Spec.Selector)); err != nil {
		return nil, false, fmt.Errorf("list the pods of Service %s/%s: %w", es.Namespace, es.Spec.Service, err)
	}
	return list.Items, true, nil
}

// observeWake reads what status.wakeProgress needs: the phase of the
// furthest pod created since the wake from zero in progress (the ledger's
// pending cold start, or the one this reconcile's status write opens),
// with the Events of the pods whose phase depends on them, listed live by
// field selector; the cache holds no Event. A refused Event list leaves
// image pulls unseen (such pods show as Starting) rather than failing the
// reconcile. notCreated is why the workload controller creates no pod
// (observePodsNotCreated): the Scaling phase's message says it.
func (r *Reconciler) observeWake(ctx context.Context, es *elastiv1alpha1.ElastiService, o observed, pods []corev1.Pod, listed bool, notCreated string) wakeObserved {
	var w wakeObserved
	if ledger.ActiveReason(es.Status) == contract.ReasonScaledToZero {
		// The status this reconcile writes leaves ScaledToZero: ledger.Next
		// opens the cold start now.
		w.pending, w.began = true, o.now
	} else {
		w.began, w.pending = coldStartBegan(es.Status.Ledger)
	}
	if !w.pending || !listed {
		return w
	}
	var events []corev1.Event
	for _, name := range podsNeedingEvents(pods, w.began) {
		list := &corev1.EventList{}
		if err := r.live.List(ctx, list, client.InNamespace(es.Namespace), client.MatchingFieldsSelector{Selector: fields.AndSelectors(
			fields.OneTermEqualSelector("involvedObject.kind", "Pod"),
			fields.OneTermEqualSelector("involvedObject.name", name),
		)}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "cannot list the Events of a woken pod; image pulls do not show in status.wakeProgress", "pod", klog.KRef(es.Namespace, name))
			break
		}
		events = append(events, list.Items...)
	}
	w.looked = true
	w.phase, w.message, w.pod = wakeProgressOf(pods, events, w.began)
	if w.phase == elastiv1alpha1.WakePhaseScaling {
		w.message = scalingMessage(notCreated)
	}
	return w
}
