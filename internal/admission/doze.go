package admission

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/doze"
)

// PodTemplates reads the pod template of an ElastiService's target, for
// the checks of sleepMode Doze that depend on it.
type PodTemplates interface {
	// PodTemplate returns the target's pod template; nil, nil when the
	// target does not exist (yet).
	PodTemplate(ctx context.Context, namespace string, ref elastiv1alpha1.ScaleTargetRef) (*corev1.PodTemplateSpec, error)
}

// dozeTarget refuses a Doze whose floor the target's pods cannot take,
// with doze.Check's words under the field each refusal is about. A target
// that does not exist yet is not checked: manifests are often applied in
// any order, and the operator holds a live pod to the same rules before
// it resizes it (doze.Shrink).
func dozeTarget(ctx context.Context, templates PodTemplates, es *elastiv1alpha1.ElastiService) (field.ErrorList, error) {
	if templates == nil || es.Spec.SleepMode != elastiv1alpha1.SleepModeDoze || es.Spec.Doze == nil {
		return nil, nil
	}
	tmpl, err := templates.PodTemplate(ctx, es.Namespace, es.Spec.ScaleTargetRef)
	if err != nil || tmpl == nil {
		return nil, err
	}
	return dozeErrors(es, &tmpl.Spec), nil
}

// dozeErrors words doze.Check's refusals of spec as field errors of es.
func dozeErrors(es *elastiv1alpha1.ElastiService, spec *corev1.PodSpec) field.ErrorList {
	path := field.NewPath("spec", "doze")
	ref := es.Spec.ScaleTargetRef
	var errs field.ErrorList
	for _, r := range doze.Check(spec, *es.Spec.Doze) {
		switch r.Field {
		case doze.FieldCPU:
			errs = append(errs, field.Invalid(path.Child("cpu"), es.Spec.Doze.CPU.String(), r.Message))
		case doze.FieldMemory:
			errs = append(errs, field.Invalid(path.Child("memory"), es.Spec.Doze.Memory.String(), r.Message))
		default:
			errs = append(errs, field.Forbidden(path, fmt.Sprintf("%s %s: %s", ref.Kind, ref.Name, r.Message)))
		}
	}
	return errs
}

// APIPodTemplates reads Deployments and StatefulSets, the kinds sleepMode
// Doze takes, live from the API: one read per admission of a Doze, with no
// cache of every workload in the cluster.
type APIPodTemplates struct {
	Reader client.Reader
}

var _ PodTemplates = APIPodTemplates{}

// PodTemplate returns the template of the Deployment or StatefulSet ref
// names; nil, nil for a target that does not exist or of another kind
// (the CRD refuses Doze for those).
func (a APIPodTemplates) PodTemplate(ctx context.Context, namespace string, ref elastiv1alpha1.ScaleTargetRef) (*corev1.PodTemplateSpec, error) {
	key := types.NamespacedName{Namespace: namespace, Name: ref.Name}
	var tmpl *corev1.PodTemplateSpec
	var err error
	switch {
	case ref.APIVersion == "apps/v1" && ref.Kind == "Deployment":
		d := &appsv1.Deployment{}
		err = a.Reader.Get(ctx, key, d)
		tmpl = &d.Spec.Template
	case ref.APIVersion == "apps/v1" && ref.Kind == "StatefulSet":
		s := &appsv1.StatefulSet{}
		err = a.Reader.Get(ctx, key, s)
		tmpl = &s.Spec.Template
	default:
		return nil, nil
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s %s/%s for spec.doze: %w", ref.Kind, namespace, ref.Name, err)
	}
	return tmpl, nil
}
