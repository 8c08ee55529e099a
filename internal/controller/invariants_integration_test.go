//go:build integration

package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/targets"
	"elasti.dev/elasti/internal/scaling"
)

// wantGone checks that an ElastiService no longer exists.
func wantGone(ns, name string) func() error {
	return func() error {
		err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &elastiv1alpha1.ElastiService{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("get ElastiService %s/%s: %w", ns, name, err)
		}
		return fmt.Errorf("ElastiService %s/%s still there", ns, name)
	}
}

// wantEvent checks that an Event with reason was recorded on an
// ElastiService.
func wantEvent(ns, name, reason string) func() error {
	return func() error {
		list := &eventsv1.EventList{}
		if err := k8s.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Reason == reason && e.Regarding.Name == name {
				return nil
			}
		}
		return fmt.Errorf("no %s Event on %s/%s among %d", reason, ns, name, len(list.Items))
	}
}

// TestDeletionKeepsTheProxyUntilTheTargetIsReady: deleting an ElastiService
// whose target sleeps wakes the target first and removes the proxy slice
// only once the Service's own slice lists a ready endpoint, so that the
// Service is never left without an endpoint during the cold start. A target
// that never becomes ready does not hold the deletion forever: after
// spec.proxy.holdTimeout the slice goes anyway, with an Event.
func TestDeletionKeepsTheProxyUntilTheTargetIsReady(t *testing.T) {
	op := startOperator(t, operatorOptions{triggers: newFakeTriggers(scaling.StateIdle)})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	createDeployment(t, op.ns, "web", 1)
	createService(t, op.ns, "web")
	createES(t, op.ns, "web", "web", "web", func(es *elastiv1alpha1.ElastiService) { es.Spec.MinTargetReplicas = 2 })
	createDeployment(t, op.ns, "stuck", 1)
	createService(t, op.ns, "stuck")
	createES(t, op.ns, "stuck", "stuck", "stuck", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.Proxy = &elastiv1alpha1.ProxySpec{HoldTimeout: "3s"}
	})
	for _, name := range []string{"web", "stuck"} {
		eventually(t, wait, name+" asleep", wantReplicas(op.ns, name, 0))
		eventually(t, wait, name+" proxied", wantProxySlices(op.ns, name, 1))
		setOwnSlice(t, op.ns, name, false) // the endpointslice controller lists no ready pod at zero
	}

	if err := k8s.Delete(context.Background(), getES(t, op.ns, "web")); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "target woken first", wantReplicas(op.ns, "web", 2))
	never(t, 3*time.Second, "proxy slice kept while the target has no ready endpoint", func() error {
		if err := wantProxySlices(op.ns, "web", 1)(); err != nil {
			return err
		}
		if err := wantGone(op.ns, "web")(); err == nil {
			return errors.New("the ElastiService is gone before its target was ready")
		}
		return nil
	})
	setOwnSlice(t, op.ns, "web", true) // the woken pods are ready
	eventually(t, wait, "released once ready", wantGone(op.ns, "web"))
	if err := wantProxySlices(op.ns, "web", 0)(); err != nil {
		t.Fatal(err)
	}

	// Never ready: the deletion fails open after the hold timeout.
	start := time.Now()
	if err := k8s.Delete(context.Background(), getES(t, op.ns, "stuck")); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "target woken", wantReplicas(op.ns, "stuck", 1))
	eventually(t, wait, "released after the hold timeout", wantGone(op.ns, "stuck"))
	if d := time.Since(start); d < 2*time.Second {
		t.Fatalf("released after %s, before the 3s hold timeout", d)
	}
	if err := wantProxySlices(op.ns, "stuck", 0)(); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "fail-open Event", wantEvent(op.ns, "stuck", EventRemovedBeforeReady))
}

// raisingDownScaler is the real /scale client, except that just before its
// first conditional scale to zero another writer raises the target to
// raiseTo (and the load that made it do so shows in the triggers): the race
// a scale-down must lose.
type raisingDownScaler struct {
	*scaling.Scaler
	raiseTo int32
	onRaise func()
	once    sync.Once
}

func (s *raisingDownScaler) ScaleToZero(ctx context.Context, ns string, ref elastiv1alpha1.ScaleTargetRef, from int32) (bool, error) {
	var err error
	s.once.Do(func() {
		err = s.Scale(ctx, ns, ref, s.raiseTo)
		s.onRaise()
	})
	if err != nil {
		return false, err
	}
	return s.Scaler.ScaleToZero(ctx, ns, ref, from)
}

// TestScaleDownNeverLowersARaisedTarget: the scale to zero is conditional
// on the replica count observe read. A target raised between that read and
// the write keeps the raised count, and the scale-down is called off.
func TestScaleDownNeverLowersARaisedTarget(t *testing.T) {
	trig := newFakeTriggers(scaling.StateIdle)
	rs := &raisingDownScaler{Scaler: &scaling.Scaler{Client: k8s}, raiseTo: 3, onRaise: func() { trig.set(scaling.StateActive) }}
	op := startOperator(t, operatorOptions{triggers: trig, deps: func(d *Deps) { d.Scaler = rs }})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	createDeployment(t, op.ns, "web", 1)
	createService(t, op.ns, "web")
	setOwnSlice(t, op.ns, "web", true)
	createES(t, op.ns, "web", "web", "web")

	eventually(t, wait, "raised by the other writer", wantReplicas(op.ns, "web", 3))
	never(t, 3*time.Second, "the raised count stays", wantReplicas(op.ns, "web", 3))
	eventually(t, wait, "back to serve", wantMode(op.ns, "web", elastiv1alpha1.ModeServe))
	eventually(t, wait, "called-off Event", wantEvent(op.ns, "web", EventScaleDownCalledOff))
	if es := getES(t, op.ns, "web"); es.Status.LastScaledDownTime != nil {
		t.Fatalf("lastScaledDownTime recorded for a scale-down that did not happen: %v", es.Status.LastScaledDownTime)
	}
}

// rollout builds an Argo Rollout with replicas.
func rollout(ns, name string, replicas int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"replicas": replicas,
			"selector": map[string]any{"matchLabels": map[string]any{"app": name}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": name}},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "app", "image": "example.invalid/app:1"}}},
			},
			"strategy": map[string]any{"canary": map[string]any{}},
		},
	}}
}

func wantRolloutReplicas(ns, name string, want int64) func() error {
	return func() error {
		u := rollout(ns, name, 0)
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, u); err != nil {
			return err
		}
		if got, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); got != want {
			return fmt.Errorf("rollout %s has %d replicas, want %d", name, got, want)
		}
		return nil
	}
}

// restrictedOperator returns a rest.Config that impersonates a user with
// what the operator needs, except list and watch on Argo Rollouts (get on
// them and their /scale is granted).
func restrictedOperator(t *testing.T, user string) *rest.Config {
	t.Helper()
	all := []string{"*"}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "pods", "events", "namespaces"}, Verbs: all},
			{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: all},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: all},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments", "deployments/scale"}, Verbs: all},
			{APIGroups: []string{"elasti.dev"}, Resources: all, Verbs: all},
			{APIGroups: []string{"keda.sh"}, Resources: []string{"scaledobjects"}, Verbs: all},
			{APIGroups: []string{"autoscaling"}, Resources: []string{"horizontalpodautoscalers"}, Verbs: all},
			{APIGroups: []string{"argoproj.io"}, Resources: []string{"rollouts"}, Verbs: []string{"get"}},
			{APIGroups: []string{"argoproj.io"}, Resources: []string{"rollouts/scale"}, Verbs: []string{"get", "update", "patch"}},
		},
	}
	mustCreate(t, role)
	mustCreate(t, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	})
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return cfg
}

// TestWakeDoesNotWaitForATargetKindItCannotWatch: an operator that may get
// and scale a custom kind but not list or watch it still wakes a sleeping
// target of that kind at once. The metadata watch of the kind never syncs;
// the wake reads /scale instead of waiting for it, and Ready says what is
// missing.
func TestWakeDoesNotWaitForATargetKindItCannotWatch(t *testing.T) {
	user := fmt.Sprintf("elasti-no-rollout-watch-%d", time.Now().UnixNano()%100000)
	op := startOperator(t, operatorOptions{triggers: newFakeTriggers(scaling.StateActive), rest: restrictedOperator(t, user)})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	createService(t, op.ns, "ro")
	ro := rollout(op.ns, "ro", 0) // put to zero by someone else: held in proxy mode
	mustCreate(t, ro)
	createES(t, op.ns, "ro", "ro", "ro", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.ScaleTargetRef = elastiv1alpha1.ScaleTargetRef{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: "ro"}
	})
	eventually(t, wait, "asleep in proxy mode", wantCondition(op.ns, "ro", elastiv1alpha1.ConditionActive, metav1.ConditionFalse, contract.ReasonScaledToZero))
	eventually(t, wait, "Ready names the missing permission",
		wantCondition(op.ns, "ro", elastiv1alpha1.ConditionReady, metav1.ConditionFalse, targets.ReasonWatchForbidden))
	t.Logf("Ready: %s", meta.FindStatusCondition(getES(t, op.ns, "ro").Status.Conditions, elastiv1alpha1.ConditionReady).Message)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := op.waker.Wake(ctx, types.NamespacedName{Namespace: op.ns, Name: "ro"})
	if err != nil || res.Replicas != 1 {
		t.Fatalf("wake: %+v %v; want 1 replica at once", res, err)
	}
	if err := wantRolloutReplicas(op.ns, "ro", 1)(); err != nil {
		t.Fatalf("after the wake: %v", err)
	}
}
