//go:build integration

package admission

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/testenv/estest"
)

// TestDozeChecksTheStoredTemplate reads real Deployments and StatefulSets
// from the API server through APIPodTemplates, as the webhook does: a
// Guaranteed StatefulSet and a floor above a Deployment's request are
// refused under the fields at fault, a Burstable target and a target not
// created yet are accepted.
func TestDozeChecksTheStoredTemplate(t *testing.T) {
	ctx := context.Background()
	const ns = "doze-admission"
	c := env.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	res := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	}
	labels := map[string]string{"app": "web"}
	podSpec := func(req, lim corev1.ResourceList) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1",
				Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}}},
		}
	}
	one := int32(1)
	web := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1.DeploymentSpec{
		Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: podSpec(res("100m", "64Mi"), nil)}}
	db := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}, Spec: appsv1.StatefulSetSpec{
		Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: podSpec(res("1", "1Gi"), res("1", "1Gi"))}}
	if err := c.Create(ctx, web); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(ctx, web); _ = c.Delete(ctx, db) })

	statefulSet := func(name string) estest.Option {
		return func(es *elastiv1alpha1.ElastiService) {
			es.Spec.ScaleTargetRef = elastiv1alpha1.ScaleTargetRef{APIVersion: "apps/v1", Kind: "StatefulSet", Name: name}
		}
	}
	v := Validator{Templates: APIPodTemplates{Reader: c}}
	for _, tc := range []struct {
		name string
		es   *elastiv1alpha1.ElastiService
		want string // "" accepted
	}{
		{"burstable deployment", estest.New(ns, "web", dozing("5m", "16Mi")), ""},
		{"deployment not created yet", estest.New(ns, "later", dozing("5m", "")), ""},
		{"floor above the deployment's request", estest.New(ns, "web", dozing("250m", "")),
			`spec.doze.cpu: 250m is above container "app"'s CPU request 100m`},
		{"guaranteed statefulset", estest.New(ns, "db", statefulSet("db"), dozing("5m", "")),
			"spec.doze: StatefulSet db: the target's pods are Guaranteed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.ValidateCreate(ctx, tc.es)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want Invalid saying %q", err, tc.want)
			}
		})
	}
}
