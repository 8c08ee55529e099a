package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/plan"
	"elasti.dev/elasti/internal/controller/proxyslices"
	"elasti.dev/elasti/internal/controller/refusals"
	"elasti.dev/elasti/internal/controller/scaletarget"
	"elasti.dev/elasti/internal/controller/targets"
	"elasti.dev/elasti/internal/controller/watches"
	"elasti.dev/elasti/internal/scaling"
)

// findRival lists the ElastiServices that name es's Service or its target,
// through the cache's indexes, and returns the older one that keeps es from
// acting, with the reason (refusals.Rival); nil when there is none.
func findRival(ctx context.Context, c client.Reader, es *elastiv1alpha1.ElastiService) (*elastiv1alpha1.ElastiService, string, error) {
	var found []elastiv1alpha1.ElastiService
	byService := &elastiv1alpha1.ElastiServiceList{}
	if err := c.List(ctx, byService, client.InNamespace(es.Namespace), client.MatchingFields{watches.IndexService: es.Spec.Service}); err != nil {
		return nil, "", fmt.Errorf("list ElastiServices of Service %s/%s: %w", es.Namespace, es.Spec.Service, err)
	}
	found = append(found, byService.Items...)
	if keys := targets.IndexValues(es); len(keys) == 1 {
		byTarget := &elastiv1alpha1.ElastiServiceList{}
		if err := c.List(ctx, byTarget, client.InNamespace(es.Namespace), client.MatchingFields{targets.Index: keys[0]}); err != nil {
			return nil, "", fmt.Errorf("list ElastiServices of target %s: %w", keys[0], err)
		}
		found = append(found, byTarget.Items...)
	}
	w, reason := refusals.Rival(es, found)
	return w, reason, nil
}

// standDown is the reconcile of an ElastiService that a rival keeps from
// acting. It leaves nothing of its own in the data path: its proxy slices
// go, its ports are freed, and a target that it managed and the rival does
// not is restored to minTargetReplicas, so that nothing stays at zero
// unmanaged. Ready=False names the rival (refusals.StandDownStatus). It is
// reconciled again when the rival goes or changes (forRivals).
func (r *Reconciler) standDown(ctx context.Context, es *elastiv1alpha1.ElastiService, rival *elastiv1alpha1.ElastiService, reason string) (ctrl.Result, error) {
	key := client.ObjectKeyFromObject(es)
	if err := proxyslices.Remove(ctx, r.client, es); err != nil {
		return ctrl.Result{}, err
	}
	r.ports.Release(key)
	r.grace.Delete(key)
	r.wakes.Complete(key, 0, fmt.Errorf("ElastiService %s stands down: %s manages the same %s", key, rival.Name, refusals.Claimed(reason)))
	if prev, had := es.Annotations[contract.AnnotationScaleTarget]; had {
		if old, ok := scaletarget.Decode(prev); ok && !sameTarget(old, rival.Spec.ScaleTargetRef) {
			if _, _, err := r.target.Restore(ctx, es, old); err != nil {
				return ctrl.Result{}, err
			}
		}
		orig := es.DeepCopy()
		delete(es.Annotations, contract.AnnotationScaleTarget)
		if err := r.client.Patch(ctx, es, client.MergeFrom(orig)); err != nil {
			return ctrl.Result{}, fmt.Errorf("forget the scale target of ElastiService %s: %w", key, err)
		}
	}

	now := r.clock.Now()
	st, f := refusals.StandDownStatus(es, rival, reason, now)
	if !plan.StatusChanged(es.Status, st) {
		return ctrl.Result{}, nil
	}
	if c := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionReady); c == nil || c.Reason != f.Reason || c.Message != f.Message {
		r.recorder.Eventf(es, rival, corev1.EventTypeWarning, f.Reason, "StandDown", "%s", f.Message)
	}
	plan.Stamp(&st, now)
	es.Status = st
	if err := r.client.Status().Update(ctx, es); err != nil {
		return ctrl.Result{}, fmt.Errorf("update status of ElastiService %s: %w", key, err)
	}
	setModeMetric(es.Namespace, es.Name, elastiv1alpha1.ModeServe)
	return ctrl.Result{}, nil
}

// sameTarget compares two target references by group, kind and name, as
// the target index does.
func sameTarget(a, b elastiv1alpha1.ScaleTargetRef) bool {
	ga, erra := scaling.TargetGVK(a)
	gb, errb := scaling.TargetGVK(b)
	if erra != nil || errb != nil {
		return a == b
	}
	return targets.Key(ga.Group, ga.Kind, a.Name) == targets.Key(gb.Group, gb.Kind, b.Name)
}
