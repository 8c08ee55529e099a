//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/test/cluster"
)

var rolloutGVK = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "Rollout"}

// rollout reads a Rollout's spec.replicas and its status's ready replicas.
func (e *Env) rollout(ctx context.Context, ns, name string) (spec, ready int64, err error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(rolloutGVK)
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		return 0, 0, err
	}
	spec, _, _ = unstructured.NestedInt64(u.Object, "spec", "replicas")
	ready, _, _ = unstructured.NestedInt64(u.Object, "status", "readyReplicas")
	return spec, ready, nil
}

// TestArgoRolloutTarget: a Rollout, run by Argo Rollouts' real controller
// (v1.10.1, built from the Go module proxy by hack/argo-rollouts.sh and
// started with elasti-cluster rollouts-start), sleeps and is woken by a
// request: Elasti scales it through its /scale subresource, and the
// controller scales its ReplicaSet to 0 and back. The held request is
// answered by the Rollout's pod.
//
// The controller, a cluster component with its CRDs, is started before
// t.Parallel, while no other test runs (see the package doc); the rest of
// the test works in its own namespace.
func TestArgoRolloutTarget(t *testing.T) {
	e := Get(t)
	if os.Getenv(cluster.RolloutsDirEnv) == "" {
		t.Fatalf("%s is not set: `make test-e2e` sets it (hack/argo-rollouts.sh builds the controller); by hand: export %s=$(hack/argo-rollouts.sh)", cluster.RolloutsDirEnv, cluster.RolloutsDirEnv)
	}
	if err := e.ClusterCLI("rollouts-start"); err != nil {
		t.Fatalf("start Argo Rollouts: %v", err)
	}
	t.Parallel()
	e.InstallElasti(t)
	ns := e.NewNamespace(t)
	d := DemoAppDeployment(ns, "demoapp", 1)
	template, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&d.Spec.Template)
	if err != nil {
		t.Fatal(err)
	}
	ro := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "demoapp", "namespace": ns},
		"spec": map[string]any{
			"replicas": int64(1),
			"selector": map[string]any{"matchLabels": map[string]any{"app": "demoapp"}},
			"template": template,
			// A canary without steps: a new template goes all the way at
			// once; scaling keeps the one ReplicaSet.
			"strategy": map[string]any{"canary": map[string]any{}},
		},
	}}
	ro.SetGroupVersionKind(rolloutGVK)
	svc := DemoAppService(ns, "demoapp")
	e.Create(t, ro, svc)
	e.WaitReadyEndpoints(t, ns, "demoapp", 1, 2*time.Minute)
	es := e.ElastiServiceFor(ns, "demoapp", IdleQuery)
	es.Spec.ScaleTargetRef = elastiv1alpha1.ScaleTargetRef{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: "demoapp"}
	e.Create(t, es)

	// Asleep: proxy mode and slice, the Rollout at 0 with no ready pod, its
	// endpoints gone and kube-proxy caught up.
	e.waitAsleepAt(t, ns, "demoapp", func(ctx context.Context) (string, error) {
		spec, ready, err := e.rollout(ctx, ns, "demoapp")
		if err == nil && (spec != 0 || ready != 0) {
			return fmt.Sprintf("rollout at %d replicas, %d ready", spec, ready), nil
		}
		return "", err
	})
	e.wakeWithRequest(t, ns, svc.Spec.ClusterIP, "Rollout", "hello from demoapp-")
	if spec, ready, err := e.rollout(context.Background(), ns, "demoapp"); err != nil || spec != 1 || ready != 1 {
		t.Errorf("rollout after the wake: %d replicas, %d ready (%v), want 1 and 1", spec, ready, err)
	}
}
