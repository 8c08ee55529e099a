package controller

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
)

// errGone answers the activation calls still waiting on an ElastiService
// that was deleted: no reconcile of it will come to complete them.
var errGone = errors.New("the ElastiService was deleted")

// ensureFinalizer adds Elasti's finalizer before anything is changed, so
// that deleting the ElastiService always runs finalize: a workload Elasti put
// to zero must never be left there.
func (r *Reconciler) ensureFinalizer(ctx context.Context, es *elastiv1alpha1.ElastiService) error {
	if controllerutil.ContainsFinalizer(es, contract.Finalizer) {
		return nil
	}
	orig := es.DeepCopy()
	controllerutil.AddFinalizer(es, contract.Finalizer)
	if err := r.client.Patch(ctx, es, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("add finalizer to ElastiService %s: %w", client.ObjectKeyFromObject(es), err)
	}
	return nil
}

// finalize restores the Service and the workload, then lets the
// ElastiService go.
func (r *Reconciler) finalize(ctx context.Context, es *elastiv1alpha1.ElastiService) error {
	if !controllerutil.ContainsFinalizer(es, contract.Finalizer) {
		return nil
	}
	if err := r.ensureSlices(ctx, es, nil); err != nil {
		return err
	}
	if a := es.Spec.Autoscaler; a != nil && a.Type == elastiv1alpha1.AutoscalerKEDA {
		if err := r.autoscalers.UnpauseKEDA(ctx, es.Namespace, a.Name); err != nil {
			return err
		}
	}
	if err := r.restoreTarget(ctx, es, es.Spec.ScaleTargetRef); err != nil {
		return err
	}
	if old, ok := decodeTarget(es.Annotations[contract.AnnotationScaleTarget]); ok && old != es.Spec.ScaleTargetRef {
		if err := r.restoreTarget(ctx, es, old); err != nil {
			return err
		}
	}
	orig := es.DeepCopy()
	controllerutil.RemoveFinalizer(es, contract.Finalizer)
	if err := r.client.Patch(ctx, es, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("remove finalizer from ElastiService %s/%s: %w", es.Namespace, es.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("ElastiService released: proxy slice removed, target restored")
	r.forget(client.ObjectKeyFromObject(es))
	return nil
}

// forget drops in-memory state of an ElastiService that is gone: its
// resolver ports are freed, its grace timer stops, waiting activation calls
// get errGone, and its metric series go away.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.ports.Release(key)
	r.grace.stop(key)
	r.wakes.complete(key, 0, errGone)
	forgetMetrics(key.Namespace, key.Name)
}
