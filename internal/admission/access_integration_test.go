//go:build integration

package admission

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	ctrladmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/testenv/estest"
)

// TestAccessReview: an ElastiService is refused unless its author may do,
// by the API server's own RBAC, everything it would make the operator do;
// the refusal names each field and the permission missing. The reviews are
// real SubjectAccessReviews against a real kube-apiserver's RBAC
// authorizer, in the name of users bound to real Roles.
func TestAccessReview(t *testing.T) {
	const ns = "access-apps"
	ctx := context.Background()
	c := env.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	role := func(name string, rules ...rbacv1.PolicyRule) {
		t.Helper()
		if err := c.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}); err != nil {
			t.Fatal(err)
		}
	}
	bind := func(roleName string, subject rbacv1.Subject) {
		t.Helper()
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: roleName + "-"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: roleName},
			Subjects:   []rbacv1.Subject{subject},
		}
		if err := c.Create(ctx, rb); err != nil {
			t.Fatal(err)
		}
	}
	user := func(name string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
	}
	group := func(name string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
	}

	role("elastiservices", rbacv1.PolicyRule{APIGroups: []string{elastiv1alpha1.GroupVersion.Group}, Resources: []string{"elastiservices"}, Verbs: []string{"*"}})
	role("scale-web", rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments/scale"}, ResourceNames: []string{"web"}, Verbs: []string{"update"}})
	role("owner", rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments/scale"}, Verbs: []string{"update"}},
		rbacv1.PolicyRule{APIGroups: []string{"autoscaling"}, Resources: []string{"horizontalpodautoscalers"}, Verbs: []string{"patch"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"prom-token"}, Verbs: []string{"get"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"update"}})
	bind("elastiservices", user("tenant"))
	bind("elastiservices", user("scaler"))
	bind("scale-web", user("scaler"))
	bind("elastiservices", group("team-a"))
	bind("owner", group("team-a"))

	hc, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(env.Config, hc)
	if err != nil {
		t.Fatal(err)
	}
	v := Validator{Access: &AccessReview{Client: c, Mapper: mapper}}

	// Everything an ElastiService can make the operator do.
	full := estest.New(ns, "web", estest.Prometheus("http://prometheus:9090", "sum(up)", "1"), func(es *elastiv1alpha1.ElastiService) {
		es.Spec.Autoscaler = &elastiv1alpha1.AutoscalerRef{Type: elastiv1alpha1.AutoscalerHPA, Name: "web"}
		es.Spec.Triggers[0].Metadata.AuthSecretRef = &elastiv1alpha1.SecretKeySelector{Name: "prom-token", Key: "token"}
		es.Spec.Proxy = &elastiv1alpha1.ProxySpec{WakingPage: &elastiv1alpha1.WakingPage{}}
	})
	as := func(name string, groups ...string) context.Context {
		return ctrladmission.NewContextWithRequest(ctx, ctrladmission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UserInfo: authenticationv1.UserInfo{Username: name, Groups: append(groups, "system:authenticated")},
		}})
	}
	refusedFields := func(err error) []string {
		var se *apierrors.StatusError
		if !errors.As(err, &se) || se.ErrStatus.Code != http.StatusForbidden || se.ErrStatus.Details == nil {
			return nil
		}
		var out []string
		for _, c := range se.ErrStatus.Details.Causes {
			out = append(out, c.Field)
		}
		return out
	}

	for _, tc := range []struct {
		name    string
		ctx     context.Context
		es      *elastiv1alpha1.ElastiService
		refused []string // nil: allowed
	}{
		{"a user with only elastiservices rights", as("tenant"), full,
			[]string{"spec.scaleTargetRef", "spec.autoscaler", "spec.triggers[0].metadata.authSecretRef", "spec.proxy.wakingPage"}},
		{"a user who may scale the target and nothing else", as("scaler"), full,
			[]string{"spec.autoscaler", "spec.triggers[0].metadata.authSecretRef", "spec.proxy.wakingPage"}},
		{"the same user, for an ElastiService that only scales", as("scaler"), estest.New(ns, "web"), nil},
		{"the same user, for another Deployment", as("scaler"), estest.New(ns, "api"), []string{"spec.scaleTargetRef"}},
		{"a member of a group granted everything", as("someone", "team-a"), full, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.ValidateCreate(tc.ctx, tc.es)
			if tc.refused == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			got := refusedFields(err)
			if !slices.Equal(got, tc.refused) {
				t.Fatalf("refused fields %v, want %v (error: %v)", got, tc.refused, err)
			}
			t.Logf("refused: %v", err)
		})
	}

	// A spec update is reviewed in the updater's name.
	updated := full.DeepCopy()
	updated.Spec.CooldownPeriod++
	if _, err := v.ValidateUpdate(as("tenant"), full, updated); len(refusedFields(err)) == 0 {
		t.Errorf("a spec update by a user with only elastiservices rights went through: %v", err)
	}
	if _, err := v.ValidateUpdate(as("tenant"), full, full.DeepCopy()); err != nil {
		t.Errorf("an update without a spec change was refused: %v", err)
	}

	// A kind the API server does not serve: nobody can say who may scale it.
	unknown := estest.New(ns, "web", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.ScaleTargetRef = elastiv1alpha1.ScaleTargetRef{APIVersion: "example.com/v1", Kind: "Widget", Name: "web"}
	})
	_, err = v.ValidateCreate(as("someone", "team-a"), unknown)
	var se *apierrors.StatusError
	if !errors.As(err, &se) || se.ErrStatus.Reason != metav1.StatusReasonInvalid || se.ErrStatus.Details == nil ||
		len(se.ErrStatus.Details.Causes) != 1 || se.ErrStatus.Details.Causes[0].Field != "spec.scaleTargetRef" {
		t.Errorf("an unserved target kind: %v; want Invalid on spec.scaleTargetRef", err)
	}
}
