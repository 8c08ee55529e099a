//go:build integration

package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/fallback"
	"elasti.dev/elasti/internal/controller/plan"
	"elasti.dev/elasti/internal/controller/wakeprogress"
	"elasti.dev/elasti/internal/scaling"
	"elasti.dev/elasti/internal/testenv/estest"
)

// workloadFailedCreate is the reason the workload controllers give a pod
// they cannot create, in their ReplicaFailure condition and their Events;
// the tests write it as Kubernetes does, not from the operator's constant.
const workloadFailedCreate = "FailedCreate"

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
	eventually(t, wait, "TargetReady=True", wantCondition(op.ns, "llm", elastiv1alpha1.ConditionTargetReady, metav1.ConditionTrue, plan.ReasonEndpointReady))
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
	eventually(t, wait, "FallbackActive=False while serving", wantCondition(op.ns, "gpu", elastiv1alpha1.ConditionFallbackActive, metav1.ConditionFalse, fallback.ReasonNotNeeded))
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
	eventually(t, wait, "FallbackActive=True PodsUnschedulable", wantCondition(op.ns, "gpu", elastiv1alpha1.ConditionFallbackActive, metav1.ConditionTrue, fallback.ReasonPodsUnschedulable))
	if c, err := fallbackCondition(op.ns, "gpu"); err != nil || !strings.Contains(c.Message, "Insufficient nvidia.com/gpu") || !strings.Contains(c.Message, "gpu-static") {
		t.Fatalf("condition %+v %v: want the scheduler's message and the fallback's name", c, err)
	}
	eventually(t, wait, "a FallbackActive Event", func() error {
		for _, e := range eventsOf(t, op.ns, "gpu", fallback.EventActive) {
			if e.Type == corev1.EventTypeWarning && strings.Contains(e.Note, fallback.ReasonPodsUnschedulable) {
				return nil
			}
		}
		return fmt.Errorf("no Warning Event %s naming %s", fallback.EventActive, fallback.ReasonPodsUnschedulable)
	})

	// The fallback loses its endpoint: requests are held, and status says why.
	setOwnSlice(t, op.ns, "gpu-static", false)
	eventually(t, wait, "FallbackActive=False FallbackUnavailable", wantCondition(op.ns, "gpu", elastiv1alpha1.ConditionFallbackActive, metav1.ConditionFalse, fallback.ReasonUnavailable))
	if c, err := fallbackCondition(op.ns, "gpu"); err != nil || !strings.Contains(c.Message, "no ready endpoint") {
		t.Fatalf("condition %+v %v: want it to say the fallback has no ready endpoint", c, err)
	}
	eventually(t, wait, "a FallbackUnavailable Event", func() error {
		if len(eventsOf(t, op.ns, "gpu", fallback.EventUnavailable)) == 0 {
			return fmt.Errorf("no Event %s", fallback.EventUnavailable)
		}
		return nil
	})

	// The target becomes ready: back to serve, no fallback.
	setOwnSlice(t, op.ns, "gpu", true)
	eventually(t, wait, "serve mode", wantMode(op.ns, "gpu", elastiv1alpha1.ModeServe))
	eventually(t, wait, "FallbackActive=False NotNeeded", wantCondition(op.ns, "gpu", elastiv1alpha1.ConditionFallbackActive, metav1.ConditionFalse, fallback.ReasonNotNeeded))
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
	eventually(t, wait, "FallbackActive=True DeadlinePassed", wantCondition(op.ns, "slow", elastiv1alpha1.ConditionFallbackActive, metav1.ConditionTrue, fallback.ReasonDeadlinePassed))
	eventually(t, wait, "a FallbackActive Event", func() error {
		for _, e := range eventsOf(t, op.ns, "slow", fallback.EventActive) {
			if strings.Contains(e.Note, fallback.ReasonDeadlinePassed) {
				return nil
			}
		}
		return fmt.Errorf("no Event %s naming %s", fallback.EventActive, fallback.ReasonDeadlinePassed)
	})
}

// setReplicaFailure writes the Deployment's ReplicaFailure condition as the
// deployment controller would (envtest runs none): True with reason
// FailedCreate, msg and transition time at, or removed when msg is "".
func setReplicaFailure(t *testing.T, ns, name, msg string, at time.Time) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d := &appsv1.Deployment{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, d); err != nil {
			return err
		}
		var conds []appsv1.DeploymentCondition
		for _, c := range d.Status.Conditions {
			if c.Type != appsv1.DeploymentReplicaFailure {
				conds = append(conds, c)
			}
		}
		if msg != "" {
			conds = append(conds, appsv1.DeploymentCondition{
				Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue, Reason: workloadFailedCreate, Message: msg,
				LastUpdateTime: metav1.NewTime(at), LastTransitionTime: metav1.NewTime(at),
			})
		}
		d.Status.Conditions = conds
		return k8s.Status().Update(context.Background(), d)
	})
	if err != nil {
		t.Fatalf("set the ReplicaFailure condition of Deployment %s: %v", name, err)
	}
}

// TestFallbackOnPodsNotCreated: a wake whose pods a ResourceQuota forbids
// (the Deployment's ReplicaFailure=True, FailedCreate) turns FallbackActive
// True with reason PodsNotCreated and a Warning Event, long before
// fallback.after, and status.wakeProgress stays Scaling with the
// controller's message; a condition older than the wake does neither. The
// condition cleared takes both back, and the target's ready endpoint ends
// the wake.
func TestFallbackOnPodsNotCreated(t *testing.T) {
	trig := newFakeTriggers(scaling.StateIdle)
	op := startOperator(t, operatorOptions{triggers: trig})
	createResolver(t, op.resolverNS, "resolver-a", true, "10.0.0.1")
	createDeployment(t, op.ns, "quota", 1)
	createTempService(t, op.ns, "quota")
	createTempService(t, op.ns, "quota-static")
	setOwnSlice(t, op.ns, "quota", true)
	setOwnSlice(t, op.ns, "quota-static", true)
	createES(t, op.ns, "quota", "quota", "quota", withFallback("quota-static", "10m", "20m"))
	putToSleep(t, op, "quota")

	// A failure from before the wake: not this wake's.
	const quota = `pods "quota-7d9f8-x2kq" is forbidden: exceeded quota: compute, requested: requests.cpu=2, used: requests.cpu=8, limited: requests.cpu=8`
	setReplicaFailure(t, op.ns, "quota", "old: "+quota, time.Now().Add(-time.Hour))
	if _, err := op.waker.Wake(ctxT(t), types.NamespacedName{Namespace: op.ns, Name: "quota"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "waking", wantCondition(op.ns, "quota", elastiv1alpha1.ConditionActive, metav1.ConditionTrue, contract.ReasonWaking))
	never(t, 2*time.Second, "no fallback on a failure older than the wake", func() error {
		if c, err := fallbackCondition(op.ns, "quota"); err == nil && c.Status == metav1.ConditionTrue {
			return fmt.Errorf("FallbackActive=True (%s: %s) on an old condition", c.Reason, c.Message)
		}
		return wantWakePhase(op.ns, "quota", elastiv1alpha1.WakePhaseScaling, wakeprogress.MsgNoPod)()
	})

	setReplicaFailure(t, op.ns, "quota", quota, time.Now())
	eventually(t, wait, "FallbackActive=True PodsNotCreated", wantCondition(op.ns, "quota", elastiv1alpha1.ConditionFallbackActive, metav1.ConditionTrue, fallback.ReasonPodsNotCreated))
	if c, err := fallbackCondition(op.ns, "quota"); err != nil || !strings.Contains(c.Message, wakeprogress.MsgPodsNotCreated+quota) || !strings.Contains(c.Message, "quota-static") {
		t.Fatalf("condition %+v %v: want the controller's message and the fallback's name", c, err)
	}
	eventually(t, wait, "a FallbackActive Event", func() error {
		for _, e := range eventsOf(t, op.ns, "quota", fallback.EventActive) {
			if e.Type == corev1.EventTypeWarning && strings.Contains(e.Note, fallback.ReasonPodsNotCreated) && strings.Contains(e.Note, "exceeded quota") {
				return nil
			}
		}
		return fmt.Errorf("no Warning Event %s naming %s", fallback.EventActive, fallback.ReasonPodsNotCreated)
	})
	eventually(t, wait, "wakeProgress says why", wantWakePhase(op.ns, "quota", elastiv1alpha1.WakePhaseScaling, wakeprogress.MsgPodsNotCreated+quota))

	// The quota is raised: the controller clears the condition.
	setReplicaFailure(t, op.ns, "quota", "", time.Time{})
	eventually(t, wait, "FallbackActive=False NotNeeded once cleared", wantCondition(op.ns, "quota", elastiv1alpha1.ConditionFallbackActive, metav1.ConditionFalse, fallback.ReasonNotNeeded))
	eventually(t, wait, "wakeProgress waits again", wantWakePhase(op.ns, "quota", elastiv1alpha1.WakePhaseScaling, wakeprogress.MsgNoPod))

	// Busy from here on: with idle triggers, the 1 s cooldown could put the
	// woken target back to sleep before a slow (busy) test saw serve mode.
	trig.set(scaling.StateActive)
	setOwnSlice(t, op.ns, "quota", true)
	eventually(t, wait, "serve mode", wantMode(op.ns, "quota", elastiv1alpha1.ModeServe))
	eventually(t, wait, "FallbackActive=False NotNeeded", wantCondition(op.ns, "quota", elastiv1alpha1.ConditionFallbackActive, metav1.ConditionFalse, fallback.ReasonNotNeeded))
	eventually(t, wait, "no progress in serve mode", wantWakePhase(op.ns, "quota", "", ""))
}

// TestFallbackOnPodsNotCreatedStatefulSet: a StatefulSet has no
// ReplicaFailure condition; its controller's FailedCreate Warning Event
// about it, recorded since the wake, turns FallbackActive True with reason
// PodsNotCreated. One recorded before the wake does not.
func TestFallbackOnPodsNotCreatedStatefulSet(t *testing.T) {
	op := startOperator(t, operatorOptions{triggers: newFakeTriggers(scaling.StateIdle)})
	createResolver(t, op.resolverNS, "resolver-a", true, "10.0.0.1")
	labels := map[string]string{"app": "db"}
	mustCreate(t, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: op.ns, Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](1), ServiceName: "db",
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1"}}},
			},
		},
	})
	createTempService(t, op.ns, "db")
	createTempService(t, op.ns, "db-static")
	setOwnSlice(t, op.ns, "db", true)
	setOwnSlice(t, op.ns, "db-static", true)
	createES(t, op.ns, "db", "db", "db", withFallback("db-static", "10m", "20m"), func(es *elastiv1alpha1.ElastiService) {
		es.Spec.ScaleTargetRef = elastiv1alpha1.ScaleTargetRef{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"}
	})
	eventually(t, wait, "scaled to zero", func() error {
		s := &appsv1.StatefulSet{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: op.ns, Name: "db"}, s); err != nil {
			return err
		}
		if r := ptr.Deref(s.Spec.Replicas, 1); r != 0 {
			return fmt.Errorf("StatefulSet db has %d replicas, want 0", r)
		}
		return nil
	})
	eventually(t, wait, "proxy mode", wantMode(op.ns, "db", elastiv1alpha1.ModeProxy))
	setOwnSlice(t, op.ns, "db", false)

	sts := &appsv1.StatefulSet{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: op.ns, Name: "db"}, sts); err != nil {
		t.Fatal(err)
	}
	// The statefulset controller records through core/v1.
	failedCreateEvent := func(name, msg string, at time.Time) {
		t.Helper()
		mustCreate(t, &corev1.Event{
			ObjectMeta: metav1.ObjectMeta{Namespace: op.ns, Name: name},
			InvolvedObject: corev1.ObjectReference{
				Kind: "StatefulSet", APIVersion: "apps/v1", Namespace: op.ns, Name: "db", UID: sts.UID,
			},
			Reason: workloadFailedCreate, Message: msg, Type: corev1.EventTypeWarning, Count: 1,
			FirstTimestamp: metav1.NewTime(at), LastTimestamp: metav1.NewTime(at), Source: corev1.EventSource{Component: "statefulset-controller"},
		})
	}
	const quota = `create Pod db-0 in StatefulSet db failed error: pods "db-0" is forbidden: exceeded quota: compute, requested: requests.memory=4Gi, used: requests.memory=16Gi, limited: requests.memory=16Gi`
	failedCreateEvent("db.old", "old: "+quota, time.Now().Add(-time.Hour))

	if _, err := op.waker.Wake(ctxT(t), types.NamespacedName{Namespace: op.ns, Name: "db"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "waking", wantCondition(op.ns, "db", elastiv1alpha1.ConditionActive, metav1.ConditionTrue, contract.ReasonWaking))
	never(t, 2*time.Second, "no fallback on an Event older than the wake", func() error {
		if c, err := fallbackCondition(op.ns, "db"); err == nil && c.Status == metav1.ConditionTrue {
			return fmt.Errorf("FallbackActive=True (%s: %s) on an old Event", c.Reason, c.Message)
		}
		return nil
	})

	failedCreateEvent("db.new", quota, time.Now())
	eventually(t, wait, "FallbackActive=True PodsNotCreated", wantCondition(op.ns, "db", elastiv1alpha1.ConditionFallbackActive, metav1.ConditionTrue, fallback.ReasonPodsNotCreated))
	if c, err := fallbackCondition(op.ns, "db"); err != nil || !strings.Contains(c.Message, wakeprogress.MsgPodsNotCreated+quota) {
		t.Fatalf("condition %+v %v: want the controller's message", c, err)
	}
	eventually(t, wait, "wakeProgress says why", wantWakePhase(op.ns, "db", elastiv1alpha1.WakePhaseScaling, wakeprogress.MsgPodsNotCreated+quota))

	setOwnSlice(t, op.ns, "db", true)
	eventually(t, wait, "FallbackActive=False NotNeeded", wantCondition(op.ns, "db", elastiv1alpha1.ConditionFallbackActive, metav1.ConditionFalse, fallback.ReasonNotNeeded))
}
