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
