package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// observeLedger reads what the ledger needs. One replica's requests come
// from the pod-template cache the selector check fills (no API read for an
// unchanged target). The target's pods are listed, live, only while a cold
// start is pending and the Service has a ready endpoint: once per wake.
func (r *Reconciler) observeLedger(ctx context.Context, es *elastiv1alpha1.ElastiService, svc *corev1.Service, o observed) ledgerObserved {
	lo := ledgerObserved{requests: replicaRequests{unknown: unknownTemplate}}
	var tpl templateLabels
	if o.targetFound {
		if t, ok := r.templates.read(ctx, es.Namespace, es.Spec.ScaleTargetRef); ok {
			tpl, lo.requests = t, t.requests
		}
	}
	if es.Status.Ledger == nil || !pendingColdStart(es.Status.Ledger) || !o.ownReady {
		return lo
	}
	lo.looked = true
	// The target's own pods when its template names them; else those the
	// Service routes to, whose readiness ended the cold start.
	sel := tpl.labels
	if len(sel) == 0 && o.serviceFound {
		sel = svc.Spec.Selector
	}
	if len(sel) == 0 || r.live == nil {
		lo.missing = "the target's pods cannot be told apart: neither its pod template nor the Service has labels to select them"
		return lo
	}
	pods := &corev1.PodList{}
	if err := r.live.List(ctx, pods, client.InNamespace(es.Namespace), client.MatchingLabels(sel)); err != nil {
		lo.missing = fmt.Sprintf("cannot list the target's pods (%s): %v", labels.Set(sel), err)
		return lo
	}
	wake := es.Status.Ledger.LastColdStart.ScaleWriteTime.Time
	if lo.woken = wokenPod(pods.Items, wake); lo.woken == nil {
		lo.missing = fmt.Sprintf("no pod labelled %s turned Ready after the wake", labels.Set(sel))
	}
	return lo
}
