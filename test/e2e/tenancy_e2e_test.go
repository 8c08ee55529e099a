//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// TestTenantCannotScaleThroughElasti: a user who may manage ElastiServices
// in a namespace, and nothing else there, cannot create one for a
// Deployment of that namespace (the webhook's access review refuses it,
// naming spec.scaleTargetRef), and the Deployment keeps its replica over
// three cooldowns of the idle trigger the ElastiService would have had.
// Once the same user may scale the Deployment, the same ElastiService is
// admitted and puts it to sleep.
func TestTenantCannotScaleThroughElasti(t *testing.T) {
	t.Parallel()
	e := Get(t)
	ns, _ := demoApp(t, e)
	ctx := context.Background()
	grant := func(name string, rule rbacv1.PolicyRule) {
		t.Helper()
		e.Create(t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: []rbacv1.PolicyRule{rule}},
			&rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "tenant"}},
			})
	}
	grant("elastiservices", rbacv1.PolicyRule{APIGroups: []string{elastiv1alpha1.GroupVersion.Group}, Resources: []string{"elastiservices"}, Verbs: []string{"*"}})
	rc := rest.CopyConfig(e.REST)
	rc.Impersonate = rest.ImpersonationConfig{UserName: "tenant"}
	tenant, err := client.New(rc, client.Options{Scheme: e.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}

	err = tenant.Create(ctx, e.ElastiServiceFor(ns, "demoapp", IdleQuery))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "spec.scaleTargetRef") || !strings.Contains(err.Error(), "deployments.apps/scale") {
		t.Fatalf("creating an ElastiService as a user who may not scale the Deployment: %v; want Forbidden naming spec.scaleTargetRef and deployments.apps/scale", err)
	}
	t.Logf("refused: %v", err)
	StableFor(t, 15*time.Second, time.Second, func(ctx context.Context) error {
		n, _, err := e.Replicas(ctx, ns, "demoapp")
		if err == nil && n != 1 {
			err = fmt.Errorf("the Deployment has %d replicas, want its 1", n)
		}
		return err
	})

	grant("scale-demoapp", rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments/scale"}, ResourceNames: []string{"demoapp"}, Verbs: []string{"update"}})
	Eventually(t, 30*time.Second, time.Second, func(ctx context.Context) error {
		return tenant.Create(ctx, e.ElastiServiceFor(ns, "demoapp", IdleQuery))
	})
	e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)
}

// TestTenantRolesAggregated: with Elasti installed, Kubernetes' own edit
// ClusterRole lets a namespace's editor manage its ElastiServices (edit
// also grants deployments/scale, so the webhook's access review lets the
// editor's ElastiService through), but never write their status, which
// the operator owns and the resolvers route by; the view ClusterRole
// reads them and creates none.
func TestTenantRolesAggregated(t *testing.T) {
	t.Parallel()
	e := Get(t)
	ns, _ := demoApp(t, e)
	ctx := context.Background()
	as := func(user, clusterRole string) client.Client {
		t.Helper()
		e.Create(t, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		})
		rc := rest.CopyConfig(e.REST)
		rc.Impersonate = rest.ImpersonationConfig{UserName: user}
		c, err := client.New(rc, client.Options{Scheme: e.Client.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	editor, viewer := as("editor", "edit"), as("viewer", "view")

	// The aggregation controller fills edit and view from Elasti's roles.
	Eventually(t, time.Minute, time.Second, func(ctx context.Context) error {
		return editor.Create(ctx, e.ElastiServiceFor(ns, "demoapp", BusyQuery))
	})
	es := &elastiv1alpha1.ElastiService{}
	if err := viewer.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demoapp"}, es); err != nil {
		t.Fatalf("the viewer cannot read the ElastiService: %v", err)
	}
	es.Status.Mode = elastiv1alpha1.ModeProxy
	if err := editor.Status().Update(ctx, es); !apierrors.IsForbidden(err) {
		t.Errorf("the editor wrote the ElastiService's status: %v; want Forbidden", err)
	}
	other := e.ElastiServiceFor(ns, "demoapp", BusyQuery)
	other.Name = "viewer-made"
	if err := viewer.Create(ctx, other); !apierrors.IsForbidden(err) {
		t.Errorf("the viewer created an ElastiService: %v; want Forbidden", err)
	}
}
