package scaling

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// ErrTargetKindUnknown means the API server serves no resource for the
// target's apiVersion and kind (a CRD that is not installed, or a typo).
var ErrTargetKindUnknown = errors.New("scale target kind is not served by the API server")

// scaleGVK is the kind every /scale subresource returns.
var scaleGVK = schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}

// Scaler reads and sets replicas through the /scale subresource.
type Scaler struct {
	// Client must be a live client (not a cache reader) with a RESTMapper
	// that can resolve the target kinds.
	Client client.Client
}

// TargetGVK parses a ScaleTargetRef's apiVersion and kind.
func TargetGVK(ref elastiv1alpha1.ScaleTargetRef) (schema.GroupVersionKind, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("parse scaleTargetRef.apiVersion %q: %w", ref.APIVersion, err)
	}
	return gv.WithKind(ref.Kind), nil
}

// Replicas returns the target's desired replica count (spec.replicas of its
// /scale).
func (s *Scaler) Replicas(ctx context.Context, namespace string, ref elastiv1alpha1.ScaleTargetRef) (int32, error) {
	target, err := s.target(namespace, ref)
	if err != nil {
		return 0, err
	}
	sc := &unstructured.Unstructured{}
	sc.SetGroupVersionKind(scaleGVK)
	if err := s.Client.SubResource("scale").Get(ctx, target, sc); err != nil {
		return 0, fmt.Errorf("get /scale of %s %s/%s: %w", ref.Kind, namespace, ref.Name, classify(err))
	}
	n, _, err := unstructured.NestedInt64(sc.Object, "spec", "replicas")
	if err != nil {
		return 0, fmt.Errorf("read spec.replicas of the /scale of %s %s/%s: %w", ref.Kind, namespace, ref.Name, err)
	}
	return int32(n), nil
}

// Scale sets the target's replica count through a merge patch of its /scale.
func (s *Scaler) Scale(ctx context.Context, namespace string, ref elastiv1alpha1.ScaleTargetRef, replicas int32) error {
	target, err := s.target(namespace, ref)
	if err != nil {
		return err
	}
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	sc := &unstructured.Unstructured{}
	sc.SetGroupVersionKind(scaleGVK)
	if err := s.Client.SubResource("scale").Patch(ctx, target, client.RawPatch(types.MergePatchType, patch), client.WithSubResourceBody(sc)); err != nil {
		return fmt.Errorf("scale %s %s/%s to %d: %w", ref.Kind, namespace, ref.Name, replicas, classify(err))
	}
	return nil
}

// ScaleFromZero sets the target's replica count only if it is zero, in one
// atomic write: a JSON patch whose test step requires an empty /scale spec
// (autoscaling/v1 omits a zero spec.replicas). It reports whether it scaled;
// false, with no error, means the target already had replicas and was left
// alone, so a wake never lowers a target someone else raised.
func (s *Scaler) ScaleFromZero(ctx context.Context, namespace string, ref elastiv1alpha1.ScaleTargetRef, replicas int32) (bool, error) {
	target, err := s.target(namespace, ref)
	if err != nil {
		return false, err
	}
	patch := fmt.Appendf(nil, `[{"op":"test","path":"/spec","value":{}},{"op":"add","path":"/spec/replicas","value":%d}]`, replicas)
	done, err := s.patchIfTested(ctx, target, patch)
	if err != nil {
		return false, fmt.Errorf("scale %s %s/%s from zero to %d: %w", ref.Kind, namespace, ref.Name, replicas, err)
	}
	return done, nil
}

// ScaleToZero scales the target to zero only if it still has the replicas
// the caller read (from), in one atomic write: a JSON patch whose test step
// requires spec.replicas to be from. It reports whether the target is at
// zero; false, with no error, means its replica count changed since it was
// read (someone raised it, or an HPA scaled it in) and it was left alone, so
// a scale-down never overwrites another writer. A target read at zero needs
// no write.
func (s *Scaler) ScaleToZero(ctx context.Context, namespace string, ref elastiv1alpha1.ScaleTargetRef, from int32) (bool, error) {
	target, err := s.target(namespace, ref)
	if err != nil {
		return false, err
	}
	if from == 0 {
		return true, nil
	}
	patch := fmt.Appendf(nil, `[{"op":"test","path":"/spec/replicas","value":%d},{"op":"replace","path":"/spec/replicas","value":0}]`, from)
	done, err := s.patchIfTested(ctx, target, patch)
	if err != nil {
		return false, fmt.Errorf("scale %s %s/%s from %d to zero: %w", ref.Kind, namespace, ref.Name, from, err)
	}
	return done, nil
}

// patchIfTested applies a JSON patch that starts with a test step to the
// target's /scale. It reports false, with no error, when the test step
// failed: the API server answers 422 Invalid and changes nothing.
func (s *Scaler) patchIfTested(ctx context.Context, target *unstructured.Unstructured, patch []byte) (bool, error) {
	sc := &unstructured.Unstructured{}
	sc.SetGroupVersionKind(scaleGVK)
	err := s.Client.SubResource("scale").Patch(ctx, target, client.RawPatch(types.JSONPatchType, patch), client.WithSubResourceBody(sc))
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsInvalid(err):
		return false, nil
	default:
		return false, classify(err)
	}
}

func (s *Scaler) target(namespace string, ref elastiv1alpha1.ScaleTargetRef) (*unstructured.Unstructured, error) {
	gvk, err := TargetGVK(ref)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(namespace)
	u.SetName(ref.Name)
	return u, nil
}

// classify turns a RESTMapper miss into ErrTargetKindUnknown, keeping the
// original error in the chain.
func classify(err error) error {
	if meta.IsNoMatchError(err) {
		return fmt.Errorf("%w: %w", ErrTargetKindUnknown, err)
	}
	return err
}
