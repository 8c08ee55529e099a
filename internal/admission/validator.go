package admission

import (
	"context"
	"net/http"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// Validator answers the API server's admission reviews of ElastiServices
// with Check and the cluster admin's Limits, then, if Templates is set,
// with the checks of a Doze against its target's pod template (doze.go),
// then, if Access is set, with the access review of everything the
// ElastiService makes the operator do (access.go).
type Validator struct {
	Access    *AccessReview
	Limits    Limits
	Templates PodTemplates
}

var _ ctrladmission.Validator[*elastiv1alpha1.ElastiService] = Validator{}

// ValidateCreate refuses a new ElastiService that Check finds wrong, or
// whose author may not do what it makes the operator do.
func (v Validator) ValidateCreate(ctx context.Context, es *elastiv1alpha1.ElastiService) (ctrladmission.Warnings, error) {
	return nil, v.validate(ctx, es)
}

func (v Validator) validate(ctx context.Context, es *elastiv1alpha1.ElastiService) error {
	errs := append(Check(es), v.Limits.check(&es.Spec, field.NewPath("spec"))...)
	dozeErrs, err := dozeTarget(ctx, v.Templates, es)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	errs = append(errs, dozeErrs...)
	if err := invalid(es, errs); err != nil || v.Access == nil {
		return err
	}
	req, err := ctrladmission.RequestFromContext(ctx)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	return v.Access.check(ctx, req.UserInfo, es)
}

// ValidateUpdate checks the new object only when its spec changed: a
// finalizer, label or annotation update of an object stored before a check
// existed must go through, or the object could not even be deleted. The
// webhook configuration's matchConditions keep such updates from reaching
// the webhook at all; this is the same rule where it is decided.
//
// A spec update is reviewed whole, in the updater's name: whoever changes
// the spec takes on what all of it makes the operator do.
func (v Validator) ValidateUpdate(ctx context.Context, old, es *elastiv1alpha1.ElastiService) (ctrladmission.Warnings, error) {
	if apiequality.Semantic.DeepEqual(old.Spec, es.Spec) {
		return nil, nil
	}
	return nil, v.validate(ctx, es)
}

// ValidateDelete allows every delete; the webhook is not registered for it.
func (Validator) ValidateDelete(context.Context, *elastiv1alpha1.ElastiService) (ctrladmission.Warnings, error) {
	return nil, nil
}

// invalid turns errs into the API's Invalid status (HTTP 422), with one
// cause per field. Its message is each error as "<field>: <detail>", without
// field.Error's "Invalid value: ..." wording: every detail already says what
// is wrong and what to write instead. The API server puts
// `admission webhook "..." denied the request: ` in front.
func invalid(es *elastiv1alpha1.ElastiService, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, 0, len(errs))
	causes := make([]metav1.StatusCause, 0, len(errs))
	for _, e := range errs {
		msgs = append(msgs, e.Field+": "+e.Detail)
		causes = append(causes, metav1.StatusCause{Type: metav1.CauseType(e.Type), Field: e.Field, Message: e.Detail})
	}
	msg := msgs[0]
	if len(msgs) > 1 {
		msg = "[" + strings.Join(msgs, ", ") + "]"
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusUnprocessableEntity,
		Reason:  metav1.StatusReasonInvalid,
		Message: msg,
		Details: &metav1.StatusDetails{
			Group:  elastiv1alpha1.GroupVersion.Group,
			Kind:   "ElastiService",
			Name:   es.Name,
			Causes: causes,
		},
	}}
}
