package wakeprogress

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/ledger"
)

// Lister lists objects; the operator's live, uncached reader is one.
type Lister interface {
	List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error
}

// Observe reads what status.wakeProgress needs: the phase of the furthest
// pod created since the wake from zero in progress (the ledger's pending
// cold start, or the one this reconcile's status write opens at now), with
// the Events of the pods whose phase depends on them, listed live by field
// selector; the cache holds no Event. pods are the target's pods the caller
// listed (listed is false when it did not). A refused Event list leaves
// image pulls unseen (such pods show as Starting) rather than failing the
// reconcile. notCreated is why the workload controller creates no pod: the
// Scaling phase's message says it.
func Observe(ctx context.Context, live Lister, es *elastiv1alpha1.ElastiService, now time.Time, pods []corev1.Pod, listed bool, notCreated string) Observed {
	var w Observed
	if ledger.ActiveReason(es.Status) == contract.ReasonScaledToZero {
		// The status this reconcile writes leaves ScaledToZero: ledger.Next
		// opens the cold start now.
		w.Pending, w.Began = true, now
	} else {
		w.Began, w.Pending = ColdStartBegan(es.Status.Ledger)
	}
	if !w.Pending || !listed {
		return w
	}
	var events []corev1.Event
	for _, name := range podsNeedingEvents(pods, w.Began) {
		list := &corev1.EventList{}
		if err := live.List(ctx, list, client.InNamespace(es.Namespace), client.MatchingFieldsSelector{Selector: fields.AndSelectors(
			fields.OneTermEqualSelector("involvedObject.kind", "Pod"),
			fields.OneTermEqualSelector("involvedObject.name", name),
		)}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "cannot list the Events of a woken pod; image pulls do not show in status.wakeProgress", "pod", klog.KRef(es.Namespace, name))
			break
		}
		events = append(events, list.Items...)
	}
	w.Looked = true
	w.Phase, w.Message, w.Pod = wakeProgressOf(pods, events, w.Began)
	if w.Phase == elastiv1alpha1.WakePhaseScaling {
		w.Message = scalingMessage(notCreated)
	}
	return w
}
