package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/proxyslices"
	"elasti.dev/elasti/internal/controller/scaletarget"
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

// finalize restores the workload and then the Service, in the order every
// proxy → serve switch follows: wake the target (unpause KEDA, give an HPA
// whose floor it holds its owner's minReplicas back, scale to at least
// minTargetReplicas), wait until the Service's own EndpointSlices list
// a ready endpoint, remove the proxy slices, drop the finalizer. The
// resolvers keep holding requests while the target starts. The wait is
// bounded (releaseProxy): past it, or once nothing can become ready, the
// proxy slices go anyway, with an Event, so that a deletion never hangs.
// While it waits, it returns when to look again; the Service's slices,
// the target and the resolver pods are watched, so a ready endpoint ends
// the wait at once.
func (r *Reconciler) finalize(ctx context.Context, es *elastiv1alpha1.ElastiService) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(es, contract.Finalizer) {
		return ctrl.Result{}, nil
	}
	log := ctrl.LoggerFrom(ctx)
	// An ElastiService that stood down for an older one sharing its
	// target leaves that target, and its KEDA pause, to the older one.
	rival, _, err := findRival(ctx, r.client, es)
	if err != nil {
		return ctrl.Result{}, err
	}
	if rival != nil && sameTarget(rival.Spec.ScaleTargetRef, es.Spec.ScaleTargetRef) {
		return r.release(ctx, es)
	}
	// The HPA's floor goes back to its owner's before the target is
	// restored: from then on the HPA alone scales it.
	if err := r.hpas.Release(ctx, es); err != nil {
		return ctrl.Result{}, err
	}
	if a := es.Spec.Autoscaler; a != nil && a.Type == elastiv1alpha1.AutoscalerKEDA {
		if err := r.target.Autoscalers.UnpauseKEDA(ctx, es.Namespace, a.Name); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.restoreDozing(ctx, es); err != nil {
		return ctrl.Result{}, err
	}
	replicas, targetFound, err := r.target.Restore(ctx, es, es.Spec.ScaleTargetRef)
	if err != nil {
		return ctrl.Result{}, err
	}
	if old, ok := scaletarget.Decode(es.Annotations[contract.AnnotationScaleTarget]); ok && old != es.Spec.ScaleTargetRef {
		if _, _, err := r.target.Restore(ctx, es, old); err != nil {
			return ctrl.Result{}, err
		}
	}

	s, err := r.observeRelease(ctx, es, replicas, targetFound)
	if err != nil {
		return ctrl.Result{}, err
	}
	wait, why := releaseProxy(s)
	if wait > 0 {
		log.Info("waiting for a ready endpoint before removing the proxy slice", "replicas", replicas, "until", s.deadline)
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	if why != "" {
		log.Info("removing the proxy slice before the target is ready", "cause", why)
		r.recorder.Eventf(es, nil, corev1.EventTypeWarning, EventRemovedBeforeReady, "Finalize",
			"removed the proxy EndpointSlice of Service %s before it had a ready endpoint: %s", es.Spec.Service, why)
	}
	return r.release(ctx, es)
}

// release removes the proxy slices and the finalizer of a deleted
// ElastiService and forgets it.
func (r *Reconciler) release(ctx context.Context, es *elastiv1alpha1.ElastiService) (ctrl.Result, error) {
	if err := proxyslices.Remove(ctx, r.client, es); err != nil {
		return ctrl.Result{}, err
	}
	// Its ports go into the persisted quarantine before the finalizer
	// goes: after that, nothing else records that it held them.
	if err := r.ports.Retire(ctx, es); err != nil {
		return ctrl.Result{}, err
	}
	orig := es.DeepCopy()
	controllerutil.RemoveFinalizer(es, contract.Finalizer)
	if err := r.client.Patch(ctx, es, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("remove finalizer from ElastiService %s/%s: %w", es.Namespace, es.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("ElastiService released: target restored, proxy slice removed")
	r.forget(client.ObjectKeyFromObject(es))
	return ctrl.Result{}, nil
}

// releaseWait is how long after its deletion an ElastiService's proxy slices
// wait for the target: as long as the resolvers hold a request for it.
func releaseWait(es *elastiv1alpha1.ElastiService) time.Duration {
	if p := es.Spec.Proxy; p != nil {
		if d, err := time.ParseDuration(p.HoldTimeout); err == nil && d > 0 {
			return d
		}
	}
	return contract.DefaultHoldTimeout
}

// release is what finalize observed before removing the proxy slices.
type release struct {
	now, deadline time.Time
	// slices: the ElastiService still owns a proxy slice.
	slices       bool
	serviceFound bool
	targetFound  bool
	replicas     int32
	resolvers    int
	ownReady     bool
}

// observeRelease reads what releaseProxy decides on. Only a proxy slice
// that still exists needs the rest.
func (r *Reconciler) observeRelease(ctx context.Context, es *elastiv1alpha1.ElastiService, replicas int32, targetFound bool) (release, error) {
	s := release{now: r.clock.Now(), deadline: es.DeletionTimestamp.Add(releaseWait(es)), replicas: replicas, targetFound: targetFound}
	owned, err := proxyslices.Owned(ctx, r.client, es)
	if err != nil || len(owned) == 0 {
		return s, err
	}
	s.slices = true
	switch err := r.client.Get(ctx, types.NamespacedName{Namespace: es.Namespace, Name: es.Spec.Service}, &corev1.Service{}); {
	case err == nil:
		s.serviceFound = true
	case !apierrors.IsNotFound(err):
		return s, fmt.Errorf("get Service %s/%s: %w", es.Namespace, es.Spec.Service, err)
	}
	resolvers, err := proxyslices.ListResolvers(ctx, r.client, r.cfg.ResolverNamespace)
	if err != nil {
		return s, err
	}
	s.resolvers = len(resolvers)
	s.ownReady, err = proxyslices.ServiceReady(ctx, r.client, es.Namespace, es.Spec.Service)
	return s, err
}

// releaseProxy decides whether a deleted ElastiService's proxy slices may go
// now. It returns how long to wait for a ready endpoint, or, when they go
// without one, why: nothing can become ready behind them (the Service or the
// target is gone), nothing holds traffic (no ready resolver), or the wait is
// over.
func releaseProxy(s release) (wait time.Duration, failOpen string) {
	switch {
	case !s.slices, s.ownReady && s.replicas > 0:
		// A target at zero owns no ready endpoint: one still listed
		// belongs to a pod on its way out (see decide).
		return 0, ""
	case !s.serviceFound:
		return 0, "the Service no longer exists"
	case !s.targetFound:
		return 0, "the scale target no longer exists"
	case s.resolvers == 0:
		return 0, "no resolver is ready to hold its traffic"
	}
	if rest := s.deadline.Sub(s.now); rest > 0 {
		return rest, ""
	}
	return 0, "no ready endpoint by the deadline (spec.proxy.holdTimeout after the deletion, 5m by default)"
}

// forget drops in-memory state of an ElastiService that is gone: its
// resolver ports are freed, its grace timer stops, waiting activation calls
// get errGone, and its metric series go away.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.ports.Release(key)
	r.grace.Delete(key)
	r.preWarmed.Delete(key)
	r.wokeUnrecorded.Delete(key)
	r.wakes.Complete(key, 0, errGone)
	r.triggers.Forget(key)
	forgetMetrics(key.Namespace, key.Name)
}
