package hpacustody

import (
	"context"
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
)

// FloorControl raises and restores the floor of an HPA in custody
// (internal/scaling's Autoscalers).
type FloorControl interface {
	HoldHPAFloor(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, custodian string) error
	ReleaseHPAFloor(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, restore bool) error
}

// Recorder is the part of events.EventRecorder the custody uses.
type Recorder interface {
	Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...interface{})
}

// Custody takes, keeps and ends the custody of the HPAs ElastiServices
// name. It is the one place that writes to HPAs.
type Custody struct {
	// Cache lists the HPAs, and the ElastiServices by IndexHPA (Map).
	Cache client.Reader
	// Floors writes the HPAs' floors and annotations.
	Floors FloorControl
	// Recorder records the custody's Events on the ElastiService.
	Recorder Recorder
}

// Hold is what Sync found of the HPA an ElastiService names, for observe.
type Hold struct {
	// Custody and Exposed are as in Observed.
	Custody, Exposed bool
	// HPA is the HPA read, when Custody holds; its readings are judged by
	// MetricsVerdict.
	HPA *autoscalingv2.HorizontalPodAutoscaler
}

// Sync takes, keeps or ends the custody of the HPA the ElastiService
// names, and lets go of any other HPA it holds (spec.autoscaler changed).
// It reads the HPAs from the cache: a write from a stale read fails on its
// resourceVersion and the reconcile is retried.
func (c *Custody) Sync(ctx context.Context, es *elastiv1alpha1.ElastiService) (Hold, error) {
	list := &autoscalingv2.HorizontalPodAutoscalerList{}
	if err := c.Cache.List(ctx, list, client.InNamespace(es.Namespace)); err != nil {
		return Hold{}, fmt.Errorf("list HPAs in %s: %w", es.Namespace, err)
	}
	named := Named(es)
	var hold Hold
	for i := range list.Items {
		h := &list.Items[i]
		switch {
		case h.Name == named:
			var err error
			if hold, err = c.hold(ctx, es, h); err != nil {
				return hold, err
			}
		case heldBy(h, es.Name):
			if err := c.letGo(ctx, es, h, "the ElastiService no longer names it"); err != nil {
				return hold, err
			}
		}
	}
	return hold, nil
}

// Release lets go of every HPA the ElastiService holds: it is being
// deleted.
func (c *Custody) Release(ctx context.Context, es *elastiv1alpha1.ElastiService) error {
	list := &autoscalingv2.HorizontalPodAutoscalerList{}
	if err := c.Cache.List(ctx, list, client.InNamespace(es.Namespace)); err != nil {
		return fmt.Errorf("list HPAs in %s: %w", es.Namespace, err)
	}
	for i := range list.Items {
		if h := &list.Items[i]; heldBy(h, es.Name) {
			if err := c.letGo(ctx, es, h, "the ElastiService is being deleted"); err != nil {
				return err
			}
		}
	}
	return nil
}

// hold carries out custodyStep for the HPA the ElastiService names.
func (c *Custody) hold(ctx context.Context, es *elastiv1alpha1.ElastiService, h *autoscalingv2.HorizontalPodAutoscaler) (Hold, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("hpa", klog.KObj(h))
	switch custodyStep(h, es.Name, custodyEligible(h, es.Spec.ScaleTargetRef)) {
	case stepKeep:
		return Hold{Custody: true, HPA: h}, nil
	case stepRaise:
		from := ptr.Deref(h.Spec.MinReplicas, 1)
		err := c.Floors.HoldHPAFloor(ctx, h, es.Name)
		switch {
		case err == nil:
			log.Info("HPA floor raised: Elasti takes the last step to zero", "from", from)
			c.Recorder.Eventf(es, nil, corev1.EventTypeNormal, EventFloorRaised, "HoldHPAFloor",
				"raised minReplicas of HPA %s from %d to %d: Elasti takes the last step to zero itself, proxy first, when the HPA's metrics read zero; %s records the 0 to restore",
				h.Name, from, heldFloor, contract.AnnotationHPAMinReplicas)
			return Hold{Custody: true, HPA: h}, nil
		case apierrors.IsNotFound(err):
			return Hold{}, nil
		case apierrors.IsConflict(err):
			// A stale read: retried with the HPA as it is now.
			return Hold{}, err
		}
		log.Error(err, "raise the HPA floor")
		c.Recorder.Eventf(es, nil, corev1.EventTypeWarning, EventFloorNotRaised, "HoldHPAFloor",
			"could not raise minReplicas of HPA %s from %d to %d: %v; the target is kept awake while the HPA could take it to zero itself. Grant the operator patch on horizontalpodautoscalers, or set minReplicas to 1",
			h.Name, from, heldFloor, err)
		if from == 0 {
			return Hold{Exposed: true}, nil
		}
		// Only the custodian could not be written: the floor is held.
		return Hold{Custody: true, HPA: h}, nil
	case stepEnd:
		return Hold{}, c.letGo(ctx, es, h, "its minReplicas was set above 1")
	case stepRestore:
		return Hold{}, c.letGo(ctx, es, h, "it no longer scales the target on Object or External metrics alone")
	default:
		return Hold{}, nil
	}
}

// letGo ends the custody of an HPA: the recorded floor comes back while
// the HPA still has Elasti's, and the owner's floor stands when they raised
// it. An HPA that is gone needs nothing; one the operator may not patch, or
// whose API server refuses minReplicas 0, is reported and left, so that a
// deletion never hangs on it.
func (c *Custody) letGo(ctx context.Context, es *elastiv1alpha1.ElastiService, h *autoscalingv2.HorizontalPodAutoscaler, why string) error {
	floor := ptr.Deref(h.Spec.MinReplicas, 1)
	restore := floor <= heldFloor
	err := c.Floors.ReleaseHPAFloor(ctx, h, restore)
	if err != nil && restore && apierrors.IsInvalid(err) {
		// The API server refuses minReplicas 0 (its HPAScaleToZero gate is
		// off): the floor stays at 1 and the custody ends all the same.
		c.Recorder.Eventf(es, nil, corev1.EventTypeWarning, EventFloorNotRestored, "ReleaseHPAFloor",
			"could not restore minReplicas of HPA %s: %v; left it at %d", h.Name, err, floor)
		restore, err = false, c.Floors.ReleaseHPAFloor(ctx, h, false)
		if err == nil {
			return nil
		}
	}
	switch {
	case err == nil:
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
		c.Recorder.Eventf(es, nil, corev1.EventTypeWarning, EventFloorNotRestored, "ReleaseHPAFloor",
			"could not release HPA %s (%s): %v; remove the annotation %s and set minReplicas by hand", h.Name, why, err, contract.AnnotationHPAMinReplicas)
		return nil
	default:
		return err
	}
	ctrl.LoggerFrom(ctx).Info("HPA released", "hpa", klog.KObj(h), "restored", restore, "cause", why)
	if restore {
		c.Recorder.Eventf(es, nil, corev1.EventTypeNormal, EventFloorReleased, "ReleaseHPAFloor",
			"restored minReplicas of HPA %s to its owner's floor: %s", h.Name, why)
	} else {
		c.Recorder.Eventf(es, nil, corev1.EventTypeNormal, EventFloorReleased, "ReleaseHPAFloor",
			"released HPA %s, whose minReplicas %d stands: %s", h.Name, floor, why)
	}
	return nil
}
