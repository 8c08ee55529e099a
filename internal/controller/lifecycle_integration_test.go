//go:build integration

package controller

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/plan"
	"elasti.dev/elasti/internal/scaling"
)

func getScaledObject(t *testing.T, ns, name string) *unstructured.Unstructured {
	t.Helper()
	so := &unstructured.Unstructured{}
	so.SetGroupVersionKind(scaling.ScaledObjectGVK)
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, so); err != nil {
		t.Fatalf("get ScaledObject: %v", err)
	}
	return so
}

func wantKEDAPaused(t *testing.T, ns, name string, paused bool) func() error {
	return func() error {
		ann := getScaledObject(t, ns, name).GetAnnotations()
		_, p := ann[scaling.KEDAPausedReplicasAnnotation]
		_, mark := ann[contract.AnnotationKEDAPaused]
		if p != paused || mark != paused {
			return fmt.Errorf("ScaledObject annotations %v, want paused=%v", ann, paused)
		}
		if paused && ann[scaling.KEDAPausedReplicasAnnotation] != "0" {
			return fmt.Errorf("paused-replicas %q", ann[scaling.KEDAPausedReplicasAnnotation])
		}
		return nil
	}
}

// TestKEDAPauseUnpauseAndDeletionRestores: KEDA is paused before the target
// goes to zero and unpaused on wake; deleting the ElastiService while asleep
// restores the Service, the target and KEDA.
func TestKEDAPauseUnpauseAndDeletionRestores(t *testing.T) {
	trig := newFakeTriggers(scaling.StateIdle)
	op := startOperator(t, operatorOptions{triggers: trig})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	createDeployment(t, op.ns, "worker", 2)
	createService(t, op.ns, "worker")
	if err := k8s.Create(context.Background(), scaledObject(op.ns, "worker", "worker")); err != nil {
		t.Fatalf("create ScaledObject: %v", err)
	}
	withKEDA := func(es *elastiv1alpha1.ElastiService) {
		es.Spec.Autoscaler = &elastiv1alpha1.AutoscalerRef{Type: elastiv1alpha1.AutoscalerKEDA, Name: "worker"}
		es.Spec.MinTargetReplicas = 3
	}
	createES(t, op.ns, "worker", "worker", "worker", withKEDA)
	eventually(t, wait, "scaled to zero", wantReplicas(op.ns, "worker", 0))
	eventually(t, wait, "KEDA paused", wantKEDAPaused(t, op.ns, "worker", true))

	trig.set(scaling.StateActive)
	patchAnnotation(t, op.ns, "worker", contract.AnnotationWakeNow, "test")
	eventually(t, wait, "woken to minTargetReplicas", wantReplicas(op.ns, "worker", 3))
	eventually(t, wait, "KEDA unpaused", wantKEDAPaused(t, op.ns, "worker", false))
	setOwnSlice(t, op.ns, "worker", true) // the woken pods are ready
	eventually(t, wait, "serve", wantMode(op.ns, "worker", elastiv1alpha1.ModeServe))
	eventually(t, wait, "wake-now removed", func() error {
		if _, ok := getES(t, op.ns, "worker").Annotations[contract.AnnotationWakeNow]; ok {
			return errors.New("wake-now still set")
		}
		return nil
	})

	// Asleep again, then deleted.
	trig.set(scaling.StateIdle)
	eventually(t, wait, "asleep again", wantReplicas(op.ns, "worker", 0))
	eventually(t, wait, "KEDA paused again", wantKEDAPaused(t, op.ns, "worker", true))
	eventually(t, wait, "proxy slice", wantProxySlices(op.ns, "worker", 1))
	if err := k8s.Delete(context.Background(), getES(t, op.ns, "worker")); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "ElastiService gone", func() error {
		err := k8s.Get(context.Background(), types.NamespacedName{Namespace: op.ns, Name: "worker"}, &elastiv1alpha1.ElastiService{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %w", err)
	})
	for what, check := range map[string]func() error{
		"target restored": wantReplicas(op.ns, "worker", 3),
		"slice removed":   wantProxySlices(op.ns, "worker", 0),
		"KEDA unpaused":   wantKEDAPaused(t, op.ns, "worker", false),
	} {
		if err := check(); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
}

// TestKEDAPausedByUserIsLeftAlone: a pause Elasti did not set survives a wake.
func TestKEDAPausedByUserIsLeftAlone(t *testing.T) {
	op := startOperator(t, operatorOptions{triggers: newFakeTriggers(scaling.StateActive)})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	createDeployment(t, op.ns, "job", 0)
	createService(t, op.ns, "job")
	so := scaledObject(op.ns, "job", "job")
	so.SetAnnotations(map[string]string{scaling.KEDAPausedReplicasAnnotation: "0"})
	if err := k8s.Create(context.Background(), so); err != nil {
		t.Fatal(err)
	}
	createES(t, op.ns, "job", "job", "job", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.Autoscaler = &elastiv1alpha1.AutoscalerRef{Type: elastiv1alpha1.AutoscalerKEDA, Name: "job"}
	})
	eventually(t, wait, "proxy for a target at zero", wantMode(op.ns, "job", elastiv1alpha1.ModeProxy))
	patchAnnotation(t, op.ns, "job", contract.AnnotationWakeNow, "x")
	eventually(t, wait, "woken", wantReplicas(op.ns, "job", 1))
	if v := getScaledObject(t, op.ns, "job").GetAnnotations()[scaling.KEDAPausedReplicasAnnotation]; v != "0" {
		t.Fatalf("user's pause removed: %q", v)
	}
}

// TestSpecServiceAndTargetChange: changing spec.service moves the proxy slice
// to the new Service; changing scaleTargetRef restores the old target.
func TestSpecServiceAndTargetChange(t *testing.T) {
	op := startOperator(t, operatorOptions{triggers: newFakeTriggers(scaling.StateIdle)})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	createDeployment(t, op.ns, "old", 1)
	createDeployment(t, op.ns, "new", 1)
	// Both Services select the pods of both targets (createDeployment's
	// common label), so that neither change makes the Service miss the
	// target's pods (TestRefusedServiceShapes covers that).
	bothTargets := func(s *corev1.Service) { s.Spec.Selector = map[string]string{testPodLabel: "yes"} }
	createServiceWith(t, op.ns, "svc-a", "", bothTargets)
	createServiceWith(t, op.ns, "svc-b", "", func(s *corev1.Service) {
		bothTargets(s)
		s.Spec.Ports = []corev1.ServicePort{{Name: "tcp", Port: 5432}}
	})
	createES(t, op.ns, "es", "svc-a", "old")
	eventually(t, wait, "old asleep", wantReplicas(op.ns, "old", 0))
	eventually(t, wait, "proxy slice on svc-a", wantProxySlices(op.ns, "svc-a", 1))

	// The operator writes the status meanwhile: update as a user's
	// kubectl edit does, retrying on a conflict.
	updateES(t, op.ns, "es", func(es *elastiv1alpha1.ElastiService) { es.Spec.Service = "svc-b" })
	eventually(t, wait, "slice left svc-a", wantProxySlices(op.ns, "svc-a", 0))
	eventually(t, wait, "slice on svc-b", wantProxySlices(op.ns, "svc-b", 1))
	eventually(t, wait, "ports of svc-b", func() error {
		pp := getES(t, op.ns, "es").Status.ProxyPorts
		if len(pp) != 1 || pp[0].Name != "tcp" || pp[0].Port != 5432 {
			return fmt.Errorf("proxyPorts %+v", pp)
		}
		return nil
	})

	updateES(t, op.ns, "es", func(es *elastiv1alpha1.ElastiService) { es.Spec.ScaleTargetRef.Name = "new" })
	eventually(t, wait, "old target restored", wantReplicas(op.ns, "old", 1))
	// The new target is up but has no ready endpoint yet: it is held in
	// proxy mode (Waking). Once its pods are ready the Service is served
	// directly; the idle triggers then put the new target to sleep, which
	// only happens from serve. The serve window itself can be too short to
	// observe on a busy machine, so the test asserts its durable outcome.
	eventually(t, wait, "new target held while waking", wantMode(op.ns, "es", elastiv1alpha1.ModeProxy))
	setOwnSlice(t, op.ns, "svc-b", true) // the new target's pods are ready
	eventually(t, wait, "new target managed (asleep)", wantReplicas(op.ns, "new", 0))
	eventually(t, wait, "proxy for the sleeping new target", wantMode(op.ns, "es", elastiv1alpha1.ModeProxy))
}

// TestCooldown drives the cooldown with a fake clock: it counts from
// lastScaledUpTime, or from creation before the first wake.
func TestCooldown(t *testing.T) {
	fake := clocktesting.NewFakeClock(time.Now())
	op := startOperator(t, operatorOptions{
		triggers: newFakeTriggers(scaling.StateIdle),
		cfg:      func(c *Config) { c.Clock = fake },
	})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	createDeployment(t, op.ns, "cool", 1)
	createService(t, op.ns, "cool")
	createES(t, op.ns, "cool", "cool", "cool", func(es *elastiv1alpha1.ElastiService) { es.Spec.CooldownPeriod = 600 })
	eventually(t, wait, "reconciled", wantMode(op.ns, "cool", elastiv1alpha1.ModeServe))
	never(t, 2*time.Second, "inside the cooldown", wantReplicas(op.ns, "cool", 1))
	fake.Step(9 * time.Minute)
	never(t, 2*time.Second, "still inside the cooldown", wantReplicas(op.ns, "cool", 1))
	fake.Step(2 * time.Minute)
	passGrace(t, fake, op.ns, "cool")
	eventually(t, wait, "asleep after the cooldown", wantReplicas(op.ns, "cool", 0))

	// A wake restarts the cooldown.
	setOwnSlice(t, op.ns, "cool", true)
	patchAnnotation(t, op.ns, "cool", contract.AnnotationWakeNow, "x")
	eventually(t, wait, "woken", wantReplicas(op.ns, "cool", 1))
	eventually(t, wait, "serve", wantMode(op.ns, "cool", elastiv1alpha1.ModeServe))
	fake.Step(5 * time.Minute)
	never(t, 2*time.Second, "cooldown restarted at the wake", wantReplicas(op.ns, "cool", 1))
	fake.Step(6 * time.Minute)
	passGrace(t, fake, op.ns, "cool")
	eventually(t, wait, "asleep again", wantReplicas(op.ns, "cool", 0))
}

// passGrace waits for a scale-down to start, then moves the fake clock past
// the grace period, which the reconciler times with the same clock.
func passGrace(t *testing.T, fake *clocktesting.FakeClock, ns, name string) {
	t.Helper()
	eventually(t, wait, "scale-down started", wantCondition(ns, name, elastiv1alpha1.ConditionActive, metav1.ConditionTrue, contract.ReasonScalingDown))
	fake.Step(time.Second)
}

// TestEnabledPeriod drives the enabledPeriod window with a fake clock.
func TestEnabledPeriod(t *testing.T) {
	// Tomorrow 08:00 UTC: after the objects' real creation times (so the
	// 1s cooldown is over), an hour before the 09:00 window opens.
	now := time.Now().UTC()
	start := time.Date(now.Year(), now.Month(), now.Day(), 8, 0, 0, 0, time.UTC).Add(24 * time.Hour)
	fake := clocktesting.NewFakeClock(start)
	op := startOperator(t, operatorOptions{
		triggers: newFakeTriggers(scaling.StateIdle),
		cfg:      func(c *Config) { c.Clock = fake },
	})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	createDeployment(t, op.ns, "win", 1)
	createService(t, op.ns, "win")
	createES(t, op.ns, "win", "win", "win", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.EnabledPeriod = &elastiv1alpha1.EnabledPeriod{Schedule: "0 9 * * *", Duration: "1h"}
	})
	eventually(t, wait, "reconciled", wantMode(op.ns, "win", elastiv1alpha1.ModeServe))
	never(t, 2*time.Second, "outside the window", wantReplicas(op.ns, "win", 1))
	fake.SetTime(start.Add(time.Hour + 30*time.Second))
	passGrace(t, fake, op.ns, "win")
	eventually(t, wait, "asleep inside the window", wantReplicas(op.ns, "win", 0))

	// After the window closes a woken target stays up.
	fake.SetTime(start.Add(2*time.Hour + time.Minute))
	setOwnSlice(t, op.ns, "win", true)
	patchAnnotation(t, op.ns, "win", contract.AnnotationWakeNow, "x")
	eventually(t, wait, "woken", wantReplicas(op.ns, "win", 1))
	eventually(t, wait, "serve", wantMode(op.ns, "win", elastiv1alpha1.ModeServe))
	never(t, 2*time.Second, "outside the window again", wantReplicas(op.ns, "win", 1))
}

// TestKeepAwake: the keep-awake annotation wins over idle triggers.
func TestKeepAwake(t *testing.T) {
	op := startOperator(t, operatorOptions{triggers: newFakeTriggers(scaling.StateIdle)})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	createDeployment(t, op.ns, "pinned", 1)
	createService(t, op.ns, "pinned")
	createES(t, op.ns, "pinned", "pinned", "pinned", func(es *elastiv1alpha1.ElastiService) {
		es.Annotations = map[string]string{contract.AnnotationKeepAwake: "true"}
	})
	eventually(t, wait, "Idle=False KeepAwake", wantCondition(op.ns, "pinned", elastiv1alpha1.ConditionIdle, metav1.ConditionFalse, plan.ReasonKeepAwake))
	never(t, 2*time.Second, "kept awake", wantReplicas(op.ns, "pinned", 1))
	patchAnnotation(t, op.ns, "pinned", contract.AnnotationKeepAwake, "false")
	eventually(t, wait, "sleeps once released", wantReplicas(op.ns, "pinned", 0))
}

// TestRolloutTarget: an Argo Rollout sleeps and wakes through /scale.
func TestRolloutTarget(t *testing.T) {
	trig := newFakeTriggers(scaling.StateIdle)
	op := startOperator(t, operatorOptions{triggers: trig})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	createService(t, op.ns, "ro")
	ro := rollout(op.ns, "ro", 2)
	mustCreate(t, ro)
	createES(t, op.ns, "ro", "ro", "ro", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.ScaleTargetRef = elastiv1alpha1.ScaleTargetRef{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: "ro"}
	})
	eventually(t, wait, "rollout asleep", wantRolloutReplicas(op.ns, "ro", 0))
	trig.set(scaling.StateActive)
	res, err := op.waker.Wake(ctxT(t), types.NamespacedName{Namespace: op.ns, Name: "ro"})
	if err != nil || res.Replicas != 1 {
		t.Fatalf("wake: %+v %v", res, err)
	}
	eventually(t, wait, "rollout awake", wantRolloutReplicas(op.ns, "ro", 1))
}

// updateES applies mutate to the ElastiService ns/name, retrying on
// conflicts with the operator's own writes.
func updateES(t *testing.T, ns, name string, mutate func(*elastiv1alpha1.ElastiService)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		es := getES(t, ns, name)
		mutate(es)
		return k8s.Update(context.Background(), es)
	})
	if err != nil {
		t.Fatal(err)
	}
}
