package ledger

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// PodLister lists pods; the operator's live, uncached reader is one.
type PodLister interface {
	List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error
}

// Observe reads what the ledger needs beyond one replica's requests (which
// the caller reads from its pod-template cache; NoTemplate when it has
// none). The target's pods are listed, live, only while a cold start is
// pending and the Service has a ready endpoint (ready): once per wake. sel
// selects them: the target's own pods when its template names them, else
// those the Service routes to, whose readiness ended the cold start. A nil
// pods cannot list them.
func Observe(ctx context.Context, pods PodLister, es *elastiv1alpha1.ElastiService, requests Requests, ready bool, sel map[string]string) Observed {
	lo := Observed{requests: requests}
	if es.Status.Ledger == nil || !PendingColdStart(es.Status.Ledger) || !ready {
		return lo
	}
	lo.looked = true
	if len(sel) == 0 || pods == nil {
		lo.missing = "the target's pods cannot be told apart: neither its pod template nor the Service has labels to select them"
		return lo
	}
	list := &corev1.PodList{}
	if err := pods.List(ctx, list, client.InNamespace(es.Namespace), client.MatchingLabels(sel)); err != nil {
		lo.missing = fmt.Sprintf("cannot list the target's pods (%s): %v", labels.Set(sel), err)
		return lo
	}
	wake := es.Status.Ledger.LastColdStart.ScaleWriteTime.Time
	if lo.woken = wokenPod(list.Items, wake); lo.woken == nil {
		lo.missing = fmt.Sprintf("no pod labelled %s turned Ready after the wake", labels.Set(sel))
	}
	return lo
}
