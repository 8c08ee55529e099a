package scaling

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"elasti.dev/elasti/internal/contract"
)

// KEDAPausedReplicasAnnotation makes KEDA hold a ScaledObject's target at the
// given replica count and stop scaling it.
const KEDAPausedReplicasAnnotation = "autoscaling.keda.sh/paused-replicas"

// ScaledObjectGVK is KEDA's ScaledObject. KEDA is not a Go dependency; the
// object is handled as unstructured.
var ScaledObjectGVK = schema.GroupVersionKind{Group: "keda.sh", Version: "v1alpha1", Kind: "ScaledObject"}

// Autoscalers pauses KEDA, reads HPA floors and holds them. Its reads go to
// the API server directly (no informer), so the operator needs only get and
// patch on ScaledObjects. The operator watches HPAs on its own (the custody
// of an HPA's last step, see internal/controller/hpacustody) and hands the HPA
// it read to HoldHPAFloor and ReleaseHPAFloor.
type Autoscalers struct {
	Reader client.Reader
	Writer client.Writer
}

// PauseKEDA pauses a ScaledObject at zero replicas and records that Elasti
// paused it. A ScaledObject that a person already paused is left alone, and
// so is a missing one. It reports whether the object exists.
func (a *Autoscalers) PauseKEDA(ctx context.Context, namespace, name string) (bool, error) {
	so, err := a.getScaledObject(ctx, namespace, name)
	if err != nil || so == nil {
		return false, err
	}
	ann := so.GetAnnotations()
	if _, paused := ann[KEDAPausedReplicasAnnotation]; paused {
		// Either we paused it already, or someone else did: in both cases
		// there is nothing to add, and unpausing later is decided by our mark.
		return true, nil
	}
	patch := map[string]any{"metadata": map[string]any{
		"resourceVersion": so.GetResourceVersion(),
		"annotations": map[string]any{
			KEDAPausedReplicasAnnotation:  "0",
			contract.AnnotationKEDAPaused: "true",
		},
	}}
	if err := a.patch(ctx, so, patch); err != nil {
		return true, fmt.Errorf("pause KEDA ScaledObject %s/%s: %w", namespace, name, err)
	}
	return true, nil
}

// UnpauseKEDA removes the pause only if Elasti set it.
func (a *Autoscalers) UnpauseKEDA(ctx context.Context, namespace, name string) error {
	so, err := a.getScaledObject(ctx, namespace, name)
	if err != nil || so == nil {
		return err
	}
	if _, ours := so.GetAnnotations()[contract.AnnotationKEDAPaused]; !ours {
		return nil
	}
	patch := map[string]any{"metadata": map[string]any{
		"resourceVersion": so.GetResourceVersion(),
		"annotations": map[string]any{
			KEDAPausedReplicasAnnotation:  nil,
			contract.AnnotationKEDAPaused: nil,
		},
	}}
	if err := a.patch(ctx, so, patch); err != nil {
		return fmt.Errorf("unpause KEDA ScaledObject %s/%s: %w", namespace, name, err)
	}
	return nil
}

// HPAMinReplicas returns an HPA's minReplicas (1 when unset), or 0 when the
// HPA does not exist.
func (a *Autoscalers) HPAMinReplicas(ctx context.Context, namespace, name string) (int32, error) {
	hpa := &autoscalingv2.HorizontalPodAutoscaler{}
	if err := a.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, hpa); err != nil {
		if apierrors.IsNotFound(err) {
			return 0, nil
		}
		return 0, fmt.Errorf("get HPA %s/%s: %w", namespace, name, err)
	}
	if hpa.Spec.MinReplicas == nil {
		return 1, nil
	}
	return *hpa.Spec.MinReplicas, nil
}

// hpaHeldFloor is the minReplicas Elasti raises an HPA in its custody to:
// one replica stays up, so the HPA never takes the last step to zero itself.
const hpaHeldFloor = 1

// HoldHPAFloor raises an HPA's minReplicas from 0 to 1 and records, in
// annotations, the floor its owner set and the ElastiService that holds it,
// in one write conditional on the version of the HPA that was read. It also
// serves to write the holder again on an HPA already held.
func (a *Autoscalers) HoldHPAFloor(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, custodian string) error {
	floor := hpa.Annotations[contract.AnnotationHPAMinReplicas]
	if floor == "" {
		floor = strconv.Itoa(int(ptr.Deref(hpa.Spec.MinReplicas, 1)))
	}
	patch := map[string]any{
		"metadata": map[string]any{
			"resourceVersion": hpa.ResourceVersion,
			"annotations": map[string]any{
				contract.AnnotationHPAMinReplicas: floor,
				contract.AnnotationHPACustodian:   custodian,
			},
		},
		"spec": map[string]any{"minReplicas": hpaHeldFloor},
	}
	if err := a.patchHPA(ctx, hpa, patch); err != nil {
		return fmt.Errorf("raise minReplicas of HPA %s/%s to %d: %w", hpa.Namespace, hpa.Name, hpaHeldFloor, err)
	}
	return nil
}

// ReleaseHPAFloor ends Elasti's custody of an HPA: it removes the
// annotations and, when restore is set, puts minReplicas back to the floor
// the annotation recorded. Without restore the HPA keeps the floor it has
// (its owner raised it above Elasti's).
func (a *Autoscalers) ReleaseHPAFloor(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, restore bool) error {
	patch := map[string]any{
		"metadata": map[string]any{
			"resourceVersion": hpa.ResourceVersion,
			"annotations": map[string]any{
				contract.AnnotationHPAMinReplicas: nil,
				contract.AnnotationHPACustodian:   nil,
			},
		},
	}
	what := "release"
	if restore {
		floor, err := strconv.ParseInt(hpa.Annotations[contract.AnnotationHPAMinReplicas], 10, 32)
		if err != nil || floor < 0 {
			// Custody only starts from 0; an annotation edited since
			// restores that.
			floor = 0
		}
		patch["spec"] = map[string]any{"minReplicas": floor}
		what = fmt.Sprintf("restore minReplicas %d of", floor)
	}
	if err := a.patchHPA(ctx, hpa, patch); err != nil {
		return fmt.Errorf("%s HPA %s/%s: %w", what, hpa.Namespace, hpa.Name, err)
	}
	return nil
}

// patchHPA sends a JSON merge patch to an HPA; the resourceVersion in it
// makes the write conditional on what was read.
func (a *Autoscalers) patchHPA(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, patch map[string]any) error {
	raw, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("encode patch: %w", err)
	}
	return a.Writer.Patch(ctx, hpa, client.RawPatch(types.MergePatchType, raw))
}

func (a *Autoscalers) getScaledObject(ctx context.Context, namespace, name string) (*unstructured.Unstructured, error) {
	so := &unstructured.Unstructured{}
	so.SetGroupVersionKind(ScaledObjectGVK)
	if err := a.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, so); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			// No ScaledObject, or KEDA is not installed: nothing to pause.
			return nil, nil
		}
		return nil, fmt.Errorf("get KEDA ScaledObject %s/%s: %w", namespace, name, err)
	}
	return so, nil
}

// patch sends a JSON merge patch; the resourceVersion in it makes the write
// conditional on what was read.
func (a *Autoscalers) patch(ctx context.Context, obj *unstructured.Unstructured, patch map[string]any) error {
	raw, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("encode patch: %w", err)
	}
	return a.Writer.Patch(ctx, obj, client.RawPatch(types.MergePatchType, raw))
}
