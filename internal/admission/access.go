package admission

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// An ElastiService makes the operator act with the operator's own rights:
// scale a workload, lower an HPA's floor, read a Secret and send it to a
// metrics backend, answer for a Service. So that nobody gets through Elasti
// what they could not do themselves, its author must hold each of those
// rights too: admission asks the API server, with a SubjectAccessReview
// in the requester's name, for every effect of the spec
// (docs/architecture.md, "Who may make Elasti act").

// effect is one thing an ElastiService makes the operator do, as the
// permission its author must hold for it.
type effect struct {
	field *field.Path
	attrs authorizationv1.ResourceAttributes
	// does says what the operator would do, for the refusal's message.
	does string
}

// effectsOf lists es's effects. scaleResource maps the target's apiVersion
// and kind to its resource; a kind the API server does not serve is refused
// here, since nobody can say who may scale it.
func effectsOf(es *elastiv1alpha1.ElastiService, scaleResource func(schema.GroupKind, string) (schema.GroupResource, error)) ([]effect, field.ErrorList) {
	spec := field.NewPath("spec")
	ns := es.Namespace
	var out []effect
	var errs field.ErrorList

	ref := es.Spec.ScaleTargetRef
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		errs = append(errs, field.Invalid(spec.Child("scaleTargetRef", "apiVersion"), ref.APIVersion, err.Error()))
	} else if gr, err := scaleResource(schema.GroupKind{Group: gv.Group, Kind: ref.Kind}, gv.Version); err != nil {
		errs = append(errs, field.Invalid(spec.Child("scaleTargetRef"), ref.Kind,
			fmt.Sprintf("the API server does not serve kind %s in %s, so whether you may scale it cannot be checked; create the ElastiService once it is served (%v)", ref.Kind, ref.APIVersion, err)))
	} else {
		out = append(out, effect{
			field: spec.Child("scaleTargetRef"),
			attrs: authorizationv1.ResourceAttributes{Namespace: ns, Verb: "update", Group: gr.Group, Resource: gr.Resource, Subresource: "scale", Name: ref.Name},
			does:  "scale " + ref.Kind + " " + ref.Name,
		})
	}

	// A doze resizes the target's pods, which the pods/resize
	// subresource authorizes apart from any other right on pods.
	if es.Spec.SleepMode == elastiv1alpha1.SleepModeDoze {
		out = append(out, effect{
			field: spec.Child("sleepMode"),
			attrs: authorizationv1.ResourceAttributes{Namespace: ns, Verb: "patch", Resource: "pods", Subresource: "resize"},
			does:  "resize the pods of " + ref.Kind + " " + ref.Name,
		})
	}

	if a := es.Spec.Autoscaler; a != nil {
		gr := schema.GroupResource{Group: "autoscaling", Resource: "horizontalpodautoscalers"}
		if a.Type == elastiv1alpha1.AutoscalerKEDA {
			gr = schema.GroupResource{Group: "keda.sh", Resource: "scaledobjects"}
		}
		out = append(out, effect{
			field: spec.Child("autoscaler"),
			attrs: authorizationv1.ResourceAttributes{Namespace: ns, Verb: "patch", Group: gr.Group, Resource: gr.Resource, Name: a.Name},
			does:  "change the floor of " + string(a.Type) + " " + a.Name,
		})
	}

	for i, t := range es.Spec.Triggers {
		tp := spec.Child("triggers").Index(i)
		if r := t.Metadata.AuthSecretRef; r != nil {
			out = append(out, secretEffect(tp.Child("metadata", "authSecretRef"), ns, r.Name))
		}
		if r := t.Metadata.BasicAuthSecretRef; r != nil {
			out = append(out, secretEffect(tp.Child("metadata", "basicAuthSecretRef"), ns, r.Name))
		}
	}

	// Answering in the Service's name (a waking page, static responses) or
	// sending its requests elsewhere (a fallback) changes what the Service
	// answers: the author must be allowed to change the Service.
	if p := es.Spec.Proxy; p != nil {
		for _, f := range []struct {
			set  bool
			name string
		}{
			{p.WakingPage != nil, "wakingPage"},
			{len(p.StaticResponses) > 0, "staticResponses"},
			{p.Fallback != nil, "fallback"},
		} {
			if f.set {
				out = append(out, effect{
					field: spec.Child("proxy", f.name),
					attrs: authorizationv1.ResourceAttributes{Namespace: ns, Verb: "update", Resource: "services", Name: es.Spec.Service},
					does:  "answer for Service " + es.Spec.Service,
				})
			}
		}
	}
	return out, errs
}

func secretEffect(p *field.Path, ns, name string) effect {
	return effect{
		field: p,
		attrs: authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "secrets", Name: name},
		does:  "read Secret " + name + " and send it to the trigger's backend",
	}
}

// AccessReview checks, in the requester's name, every effect of an
// ElastiService (effectsOf).
type AccessReview struct {
	// Client creates SubjectAccessReviews.
	Client client.Client
	// Mapper maps a target's kind to its resource.
	Mapper meta.RESTMapper
}

// check returns nil if user may do everything es makes the operator do,
// and otherwise a Forbidden error naming each field and the permission it
// lacks.
func (a *AccessReview) check(ctx context.Context, user authenticationv1.UserInfo, es *elastiv1alpha1.ElastiService) error {
	effects, errs := effectsOf(es, func(gk schema.GroupKind, version string) (schema.GroupResource, error) {
		m, err := a.Mapper.RESTMapping(gk, version)
		if err != nil {
			return schema.GroupResource{}, err
		}
		return m.Resource.GroupResource(), nil
	})
	if len(errs) > 0 {
		return invalid(es, errs)
	}
	var denied []string
	var causes []metav1.StatusCause
	for _, e := range effects {
		attrs := e.attrs
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			ResourceAttributes: &attrs,
			User:               user.Username,
			Groups:             user.Groups,
			UID:                user.UID,
			Extra:              extraOf(user.Extra),
		}}
		if err := a.Client.Create(ctx, sar); err != nil {
			return apierrors.NewInternalError(fmt.Errorf("review access for %s: %w", e.field, err))
		}
		if sar.Status.Allowed {
			continue
		}
		msg := fmt.Sprintf("%s may not %s, which this would make the operator do: %s", user.Username, permission(attrs), e.does)
		denied = append(denied, e.field.String()+": "+msg)
		causes = append(causes, metav1.StatusCause{Type: metav1.CauseType(field.ErrorTypeForbidden), Field: e.field.String(), Message: msg})
	}
	if len(denied) == 0 {
		return nil
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusForbidden,
		Reason:  metav1.StatusReasonForbidden,
		Message: strings.Join(denied, "; "),
		Details: &metav1.StatusDetails{Group: elastiv1alpha1.GroupVersion.Group, Kind: "ElastiService", Name: es.Name, Causes: causes},
	}}
}

// permission writes attrs as kubectl auth can-i would ask for it.
func permission(a authorizationv1.ResourceAttributes) string {
	res := a.Resource
	if a.Group != "" {
		res += "." + a.Group
	}
	if a.Subresource != "" {
		res += "/" + a.Subresource
	}
	if a.Name == "" {
		return fmt.Sprintf("%s %s in namespace %s", a.Verb, res, a.Namespace)
	}
	return fmt.Sprintf("%s %s %q in namespace %s", a.Verb, res, a.Name, a.Namespace)
}

func extraOf(in map[string]authenticationv1.ExtraValue) map[string]authorizationv1.ExtraValue {
	if in == nil {
		return nil
	}
	out := make(map[string]authorizationv1.ExtraValue, len(in))
	for k, v := range in {
		out[k] = authorizationv1.ExtraValue(v)
	}
	return out
}
