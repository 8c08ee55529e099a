//go:build integration

package admission

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/testenv/estest"
)

// TestStatusWriters: the elasti-status-writers ValidatingAdmissionPolicy
// (config/admission/status-writers.yaml, applied by testenv as by
// kustomize) refuses a status write from a namespace admin whose Role
// grants every resource of the namespace, elastiservices/status included,
// so a tenant cannot claim another ElastiService's resolver port or switch
// its mode. The operator's ServiceAccount, holding only a Role in that
// namespace (a namespace-scoped install), and a user bound cluster-wide may
// write it. Real RBAC, real policy, real kube-apiserver.
func TestStatusWriters(t *testing.T) {
	const ns = "status-writers"
	ctx := context.Background()
	c := env.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	everything := rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}
	if err := c.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "admin-of-ns"}, Rules: []rbacv1.PolicyRule{everything}}); err != nil {
		t.Fatal(err)
	}
	const operatorSA = "system:serviceaccount:elasti-system:elasti-operator"
	for _, u := range []string{"ns-admin", operatorSA} {
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "admin-of-ns-"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "admin-of-ns"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: u}},
		}
		if err := c.Create(ctx, rb); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "status-writers-everywhere"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{elastiv1alpha1.GroupVersion.Group}, Resources: []string{"elastiservices", "elastiservices/status"}, Verbs: []string{"get", "update", "patch"}}}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "status-writers-everywhere"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "status-writers-everywhere"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "cluster-operator"}}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	es := estest.New(ns, "web", estest.Service("web"), estest.Deployment("web"))
	if err := c.Create(ctx, es); err != nil {
		t.Fatal(err)
	}
	claim := func(user string, port int32) error {
		uc := impersonate(t, user)
		got := &elastiv1alpha1.ElastiService{}
		if err := uc.Get(ctx, client.ObjectKeyFromObject(es), got); err != nil {
			t.Fatalf("%s reads the ElastiService: %v", user, err)
		}
		got.Status.ProxyPorts = []elastiv1alpha1.ProxyPort{{Name: "http", Port: 80, Protocol: "TCP", ResolverPort: port}}
		return uc.Status().Update(ctx, got)
	}

	// The namespace admin may do everything else in the namespace: the
	// refusal is the policy's, not RBAC's.
	err := claim("ns-admin", 30001)
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		t.Fatalf("namespace admin's status write: got %v, want a refusal", err)
	}
	if !strings.Contains(err.Error(), "only the Elasti operator writes it") {
		t.Errorf("refusal does not say why: %v", err)
	}
	if err := impersonate(t, "ns-admin").Get(ctx, client.ObjectKeyFromObject(es), &elastiv1alpha1.ElastiService{}); err != nil {
		t.Errorf("namespace admin should still read the ElastiService: %v", err)
	}
	got := &elastiv1alpha1.ElastiService{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(es), got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.ProxyPorts) != 0 {
		t.Errorf("refused write left proxyPorts %v", got.Status.ProxyPorts)
	}

	if err := claim(operatorSA, 30002); err != nil {
		t.Errorf("operator ServiceAccount with a namespace Role: %v", err)
	}
	if err := claim("cluster-operator", 30003); err != nil {
		t.Errorf("user bound cluster-wide: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(es), got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.ProxyPorts) != 1 || got.Status.ProxyPorts[0].ResolverPort != 30003 {
		t.Errorf("proxyPorts = %v, want the last allowed write (30003)", got.Status.ProxyPorts)
	}
}
