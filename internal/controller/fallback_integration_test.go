//go:build integration

package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/scaling"
	"elasti.dev/elasti/internal/testenv/estest"
)

// createTempService creates a Service that is deleted when the test ends:
// the suite creates hundreds of Services, and envtest's Service IP range
// is small.
func createTempService(t *testing.T, ns, name string) {
	t.Helper()
	createService(t, ns, name)
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	})
}

// putToSleep brings a fresh ElastiService's target to zero behind the
// proxy, with triggers that say idle.
func putToSleep(t *testing.T, op *operator, name string) {
	t.Helper()
	eventually(t, wait, "scaled to zero", wantReplicas(op.ns, name, 0))
	eventually(t, wait, "proxy mode", wantMode(op.ns, name, elastiv1alpha1.ModeProxy))
	setOwnSlice(t, op.ns, name, false) // the pods are gone (no kubelet here)
}

// TestLongColdStartNotPutToSleep: a target whose pod is not ready for much
// longer than its cooldown is not put to sleep while it wakes, and gets its
// whole cooldown once ready, counted from its first ready endpoint rather
// than from the wake (which would have sent it back to zero at once).
func TestLongColdStartNotPutToSleep(t *testing.T) {
	op := startOperator(t, operatorOptions{triggers: newFakeTriggers(scaling.StateIdle)})
	createResolver(t, op.resolverNS, "resolver-a", true, "10.0.0.1")
	createDeployment(t, op.ns, "llm", 1)
	createTempService(t, op.ns, "llm")
	setOwnSlice(t, op.ns, "llm", true)
	createES(t, op.ns, "llm", "llm", "llm", estest.Cooldown(4))
	putToSleep(t, op, "llm")

	if _, err := op.waker.Wake(ctxT(t), types.NamespacedName{Namespace: op.ns, Name: "llm"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "waking", wantCondition(op.ns, "llm", elastiv1alpha1.ConditionActive, metav1.ConditionTrue, contract.ReasonWaking))
	// The pod stays unready for twice the cooldown, with idle triggers.
	never(t, 8*time.Second, "the unready target is kept up", wantReplicas(op.ns, "llm", 1))

	setOwnSlice(t, op.ns, "llm", true)
	eventually(t, wait, "serve mode", wantMode(op.ns, "llm", elastiv1alpha1.ModeServe))
	eventually(t, wait, "TargetReady=True", wantCondition(op.ns, "llm", elastiv1alpha1.ConditionTargetReady, metav1.ConditionTrue, ReasonEndpointReady))
	// The cooldown (4s, counted from a time stamped to the second) runs
	// from the first ready endpoint: the target stays up for 2.5s at least.
	never(t, 2500*time.Millisecond, "the ready target keeps its cooldown", wantReplicas(op.ns, "llm", 1))
	eventually(t, wait, "asleep once the cooldown is over", wantReplicas(op.ns, "llm", 0))
}

func withFallback(service, after, hold string) estest.Option {
	return func(es *elastiv1alpha1.ElastiService) {
		es.Spec.Proxy = &elastiv1alpha1.ProxySpec{HoldTimeout: hold, Fallback: &elastiv1alpha1.Fallback{Service: service, After: after}}
	}
}

// createPendingPod creates a pod of the target and marks it unschedulable,
// as the scheduler would (envtest runs none).
func createPendingPod(t *testing.T, ns, name, app string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1"}}},
	}
	mustCreate(t, pod)
	pod.Status.Phase = corev1.PodPending
	pod.Status.Conditions = []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.", LastTransitionTime: metav1.Now(),
	}}
	if err := k8s.Status().Update(context.Background(), pod); err != nil {
		t.Fatalf("mark pod %s unschedulable: %v", name, err)
	}
}

func fallbackCondition(ns, name string) (*metav1.Condition, error) {
	es := &elastiv1alpha1.ElastiService{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, es); err != nil {
		return nil, err
	}
	c := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionFallbackActive)
	if c == nil {
		return nil, fmt.Errorf("no FallbackActive condition in %+v", es.Status.Conditions)
	}
	return c, nil
}

// TestFallbackOnUnschedulablePods: a wake whose pod cannot be scheduled
// turns FallbackActive True with reason PodsUnschedulable and a Warning
// Event, long before fallback.after; a fallback Service without a ready
// endpoint turns it False (FallbackUnavailable), so the resolvers keep
// holding; the target's first ready endpoint ends it.
func TestFallbackOnUnschedulablePods(t *testing.T) {
	op := startOperator(t, operatorOptions{triggers: newFakeTriggers(scaling.StateIdle)})
	createResolver(t, op.resolverNS, "resolver-a", true, "10.0.0.1")
	createDeployment(t, op.ns, "gpu", 1)
	createTempService(t, op.ns, "gpu")
	createTempService(t, op.ns, "gpu-static")
	setOwnSlice(t, op.ns, "gpu", true)
	setOwnSlice(t, op.ns, "gpu-static", true)
	createES(t, op.ns, "gpu", "gpu", "gpu", estest.Cooldown(600), withFallback("gpu-static", "10m", "20m"))
	eventually(t, wait, "FallbackActive=False while serving", wantCondition(op.ns, "gpu", elastiv1alpha1.ConditionFallbackActive, metav1.ConditionFalse, ReasonFallbackNotNeeded))
	// Sleep at once: keep-awake off, cooldown over.
	es := getES(t, op.ns, "gpu")
	es.Spec.CooldownPeriod = 1
	if err := k8s.Update(context.Background(), es); err != nil {
		t.Fatal(err)
	}
	putToSleep(t, op, "gpu")

	if _, err := op.waker.Wake(ctxT(t), types.NamespacedName{Namespace: op.ns, Name: "gpu"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "waking", wantCondition(op.ns, "gpu", elastiv1alpha1.ConditionActive, metav1.ConditionTrue, contract.ReasonWaking))
	never(t, time.Second, "no fallback within fallback.after", func() error {
		if c, err := fallbackCondition(op.ns, "gpu"); err == nil && c.Status == metav1.ConditionTrue {
			return fmt.Errorf("FallbackActive=True (%s) before any cause", c.Reason)
		}
		return nil
	})

	createPendingPod(t, op.ns, "gpu-abc", "gpu")
	eventually(t, wait, "FallbackActive=True PodsUnschedulable", wantCondition(op.ns, "gpu", elastiv1alpha1.ConditionFallbackActive, metav1.ConditionTrue, ReasonFallbackPodsUnschedulable))
	if c, err := fallbackCondition(op.ns, "gpu"); err != nil || !strings.Contains(c.Message, "Insufficient nvidia.com/gpu") || !strings.Contains(c.Message, "gpu-static") {
		t.Fatalf("condition %+v %v: want the scheduler's message and the fallback's name", c, err)
	}
	eventually(t, wait, "a FallbackActive Event", func() error {
		for _, e := range eventsOf(t, op.ns, "gpu", EventFallbackActive) {
			if e.Type == corev1.EventTypeWarning && strings.Contains(e.Note, ReasonFallbackPodsUnschedulable) {
				return nil
			}
		}
		return fmt.Errorf("no Warning Event %s naming %s", EventFallbackActive, ReasonFallbackPodsUnschedulable)
	})

	// The fallback loses its endpoint: requests are held, and status says why.
	setOwnSlice(t, op.ns, "gpu-static", false)
	eventually(t, wait, "FallbackActive=False FallbackUnavailable", wantCondition(op.ns, "gpu", elastiv1alpha1.ConditionFallbackActive, metav1.ConditionFalse, ReasonFallbackUnavailable))
	if c, err := fallbackCondition(op.ns, "gpu"); err != nil || !strings.Contains(c.Message, "no ready endpoint") {
		t.Fatalf("condition %+v %v: want it to say the fallback has no ready endpoint", c, err)
	}
	eventually(t, wait, "a FallbackUnavailable Event", func() error {
		if len(eventsOf(t, op.ns, "gpu", EventFallbackUnavailable)) == 0 {
			return fmt.Errorf("no Event %s", EventFallbackUnavailable)
		}
		return nil
	})

	// The target becomes ready: back to serve, no fallback.
	setOwnSlice(t, op.ns, "gpu", true)
	eventually(t, wait, "serve mode", wantMode(op.ns, "gpu", elastiv1alpha1.ModeServe))
	eventually(t, wait, "FallbackActive=False NotNeeded", wantCondition(op.ns, "gpu", elastiv1alpha1.ConditionFallbackActive, metav1.ConditionFalse, ReasonFallbackNotNeeded))
}

// TestFallbackDeadlinePassed: a wake that has not brought a ready endpoint
// within fallback.after turns FallbackActive True with DeadlinePassed.
func TestFallbackDeadlinePassed(t *testing.T) {
	op := startOperator(t, operatorOptions{triggers: newFakeTriggers(scaling.StateIdle)})
	createResolver(t, op.resolverNS, "resolver-a", true, "10.0.0.1")
	createDeployment(t, op.ns, "slow", 1)
	createTempService(t, op.ns, "slow")
	createTempService(t, op.ns, "slow-static")
	setOwnSlice(t, op.ns, "slow", true)
	setOwnSlice(t, op.ns, "slow-static", true)
	createES(t, op.ns, "slow", "slow", "slow", withFallback("slow-static", "2s", "1m"))
	putToSleep(t, op, "slow")
	if _, err := op.waker.Wake(ctxT(t), types.NamespacedName{Namespace: op.ns, Name: "slow"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "FallbackActive=True DeadlinePassed", wantCondition(op.ns, "slow", elastiv1alpha1.ConditionFallbackActive, metav1.ConditionTrue, ReasonFallbackDeadlinePassed))
	eventually(t, wait, "a FallbackActive Event", func() error {
		for _, e := range eventsOf(t, op.ns, "slow", EventFallbackActive) {
			if strings.Contains(e.Note, ReasonFallbackDeadlinePassed) {
				return nil
			}
		}
		return fmt.Errorf("no Event %s naming %s", EventFallbackActive, ReasonFallbackDeadlinePassed)
	})
}
