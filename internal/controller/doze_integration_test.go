//go:build integration

package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/scaling"
)

// A Doze target here is a Deployment with two pods that the test creates
// itself (envtest runs no controller-manager) on a Node of its own: the API
// server refuses a resize on a node it does not know, or beyond the node's
// allocatable resources. The test plays the kubelet: dozeKubelet writes a
// pod's status as a kubelet that applied its spec's resources would.

func dozeTarget(t *testing.T, ns string) {
	t.Helper()
	dozeTargetWith(t, ns, corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
	})
}

// dozeTargetWith makes the Deployment web, its two pods web-a and web-b
// with resources res, and their Node.
func dozeTargetWith(t *testing.T, ns string, res corev1.ResourceRequirements) {
	t.Helper()
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: ns + "-node"}}
	mustCreate(t, node)
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), node) })
	node.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")}
	node.Status.Allocatable = node.Status.Capacity
	if err := k8s.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "web"}
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1", Resources: res}}},
	}
	mustCreate(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To(int32(2)), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: tmpl}})
	for _, name := range []string{"web-a", "web-b"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, Spec: *tmpl.Spec.DeepCopy()}
		pod.Spec.NodeName = node.Name
		mustCreate(t, pod)
		dozeKubelet(t, ns, name, nil)
	}
}

// dozeKubelet writes pod ns/name's status as a kubelet that applied the
// resources of its spec would; edit may change it before the write.
func dozeKubelet(t *testing.T, ns, name string, edit func(*corev1.Pod)) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, pod); err != nil {
		t.Fatal(err)
	}
	restarts := int32(0)
	if len(pod.Status.ContainerStatuses) > 0 {
		restarts = pod.Status.ContainerStatuses[0].RestartCount
	}
	c := pod.Spec.Containers[0]
	pod.Status.Phase = corev1.PodRunning
	pod.Status.ObservedGeneration = pod.Generation
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, ObservedGeneration: pod.Generation}}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: c.Name, Image: c.Image, Ready: true, RestartCount: restarts,
		Resources: c.Resources.DeepCopy(), AllocatedResources: c.Resources.Requests.DeepCopy(),
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	if edit != nil {
		edit(pod)
	}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
}

func podCPU(ns, name string) (string, error) {
	pod := &corev1.Pod{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, pod); err != nil {
		return "", err
	}
	return pod.Spec.Containers[0].Resources.Requests.Cpu().String(), nil
}

func wantPodCPU(ns, cpu string, names ...string) func() error {
	return func() error {
		for _, n := range names {
			got, err := podCPU(ns, n)
			if err != nil {
				return err
			}
			if got != cpu {
				return fmt.Errorf("pod %s requests %s CPU, want %s", n, got, cpu)
			}
		}
		return nil
	}
}

func dozing(cpu string) func(*elastiv1alpha1.ElastiService) {
	return func(es *elastiv1alpha1.ElastiService) {
		es.Spec.SleepMode = elastiv1alpha1.SleepModeDoze
		es.Spec.Doze = &elastiv1alpha1.DozeSpec{CPU: resource.MustParse(cpu)}
	}
}

// dozeSetup gives op a ready resolver, the two-pod target web with its
// Service (a ready endpoint of its own), and an ElastiService with
// sleepMode Doze at a CPU floor of cpu.
func dozeSetup(t *testing.T, op *operator, cpu string) {
	t.Helper()
	createResolver(t, op.resolverNS, "resolver-a", true, "10.0.0.1")
	dozeTarget(t, op.ns)
	createService(t, op.ns, "web")
	setOwnSlice(t, op.ns, "web", true)
	createES(t, op.ns, "web", "web", "web", dozing(cpu))
}

// dozedAndApplied waits until both pods of web request cpu (the operator
// dozed them), then plays their kubelet applying it.
func dozedAndApplied(t *testing.T, ns, cpu string) {
	t.Helper()
	eventually(t, wait, "dozing", wantPodCPU(ns, cpu, "web-a", "web-b"))
	for _, n := range []string{"web-a", "web-b"} {
		dozeKubelet(t, ns, n, nil)
	}
}

func wantDozeRecords(ns string, n int) func() error {
	return func() error {
		es := &elastiv1alpha1.ElastiService{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "web"}, es); err != nil {
			return err
		}
		switch {
		case n < 0 && es.Status.Doze != nil:
			return fmt.Errorf("status.doze still set: %+v", es.Status.Doze)
		case n >= 0 && (es.Status.Doze == nil || len(es.Status.Doze.Pods) != n):
			return fmt.Errorf("status.doze %+v, want %d pods", es.Status.Doze, n)
		}
		return nil
	}
}

// TestDozeSleepsAndWakesInPlace: with sleepMode Doze, idle triggers lower
// the requests of the target's pods instead of scaling it to zero, behind
// the proxy slice; a wake writes them back, and the Service returns to
// serve only once the kubelet reports them applied.
func TestDozeSleepsAndWakesInPlace(t *testing.T) {
	trig := newFakeTriggers(scaling.StateActive)
	op := startOperator(t, operatorOptions{triggers: trig})
	dozeSetup(t, op, "5m")
	eventually(t, wait, "serve mode", wantMode(op.ns, "web", elastiv1alpha1.ModeServe))

	trig.set(scaling.StateIdle)
	eventually(t, wait, "Active=False Dozing", wantCondition(op.ns, "web", elastiv1alpha1.ConditionActive, metav1.ConditionFalse, contract.ReasonDozing))
	eventually(t, wait, "both pods at the floor", wantPodCPU(op.ns, "5m", "web-a", "web-b"))
	if err := wantDozeRecords(op.ns, 2)(); err != nil {
		t.Fatal(err)
	}
	es := getES(t, op.ns, "web")
	if r := es.Status.Doze.Pods[0].Containers[0].Requests.CPU; r == nil || r.String() != "250m" {
		t.Fatalf("the record keeps %v as the CPU request from before, want 250m", r)
	}
	if es.Status.Mode != elastiv1alpha1.ModeProxy || es.Status.LastScaledDownTime == nil {
		t.Fatalf("dozing: mode %q lastScaledDownTime %v, want proxy and set", es.Status.Mode, es.Status.LastScaledDownTime)
	}
	for _, n := range []string{"web-a", "web-b"} {
		dozeKubelet(t, op.ns, n, nil)
	}
	// Dozing, the target keeps its replicas and its Ready pods, and stays
	// in proxy mode though the Service lists a ready endpoint.
	never(t, 1500*1e6, "dozing with its replicas, in proxy mode", func() error {
		if err := wantReplicas(op.ns, "web", 2)(); err != nil {
			return err
		}
		return wantMode(op.ns, "web", elastiv1alpha1.ModeProxy)()
	})

	trig.set(scaling.StateActive)
	res, err := op.waker.Wake(ctxT(t), types.NamespacedName{Namespace: op.ns, Name: "web"})
	if err != nil || !res.Found || res.Replicas != 2 {
		t.Fatalf("wake: %+v %v", res, err)
	}
	eventually(t, wait, "requests written back", wantPodCPU(op.ns, "250m", "web-a", "web-b"))
	eventually(t, wait, "waking until the kubelet applies them", wantCondition(op.ns, "web", elastiv1alpha1.ConditionActive, metav1.ConditionTrue, contract.ReasonWaking))
	if err := wantMode(op.ns, "web", elastiv1alpha1.ModeProxy)(); err != nil {
		t.Fatalf("before the kubelet applied the wake: %v", err)
	}
	dozeKubelet(t, op.ns, "web-a", nil)
	never(t, 1500*1e6, "one pod applied is not a wake", wantMode(op.ns, "web", elastiv1alpha1.ModeProxy))
	dozeKubelet(t, op.ns, "web-b", nil)
	eventually(t, wait, "serve mode once both are applied", wantMode(op.ns, "web", elastiv1alpha1.ModeServe))
	eventually(t, wait, "status.doze cleared", wantDozeRecords(op.ns, -1))
	if err := wantReplicas(op.ns, "web", 2)(); err != nil {
		t.Fatal(err)
	}
}

// TestDozeRestartWakesAndDeletionRestores: a container restarted while
// dozing wakes the target; deleting a dozing ElastiService gives the pods
// their requests back.
func TestDozeRestartWakesAndDeletionRestores(t *testing.T) {
	trig := newFakeTriggers(scaling.StateIdle)
	op := startOperator(t, operatorOptions{triggers: trig})
	dozeSetup(t, op, "10m")

	dozedAndApplied(t, op.ns, "10m")
	trig.set(scaling.StateActive)
	dozeKubelet(t, op.ns, "web-b", func(p *corev1.Pod) { p.Status.ContainerStatuses[0].RestartCount++ })
	eventually(t, wait, "a restart wakes the pods", wantPodCPU(op.ns, "250m", "web-a", "web-b"))
	for _, n := range []string{"web-a", "web-b"} {
		dozeKubelet(t, op.ns, n, nil)
	}
	eventually(t, wait, "serve", wantMode(op.ns, "web", elastiv1alpha1.ModeServe))
	eventually(t, wait, "status.doze cleared", wantDozeRecords(op.ns, -1))

	trig.set(scaling.StateIdle)
	eventually(t, wait, "dozing again", wantPodCPU(op.ns, "10m", "web-a", "web-b"))
	eventually(t, wait, "recorded", wantDozeRecords(op.ns, 2))
	if err := k8s.Delete(context.Background(), getES(t, op.ns, "web")); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "deletion gives the requests back", wantPodCPU(op.ns, "250m", "web-a", "web-b"))
	eventually(t, wait, "the ElastiService is gone", func() error {
		err := k8s.Get(context.Background(), types.NamespacedName{Namespace: op.ns, Name: "web"}, &elastiv1alpha1.ElastiService{})
		if client.IgnoreNotFound(err) != nil {
			return err
		}
		if err == nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
	if err := wantReplicas(op.ns, "web", 2)(); err != nil {
		t.Fatal(err)
	}
}

// TestDozeRefusedScalesToZero: pods that cannot doze (Guaranteed: lowering
// requests alone would change their QoS class, which a resize may not do)
// are left as they are, and the target sleeps by scaling to zero, with an
// Event that says why. Admission refuses such a target when it exists at
// creation; here there is no webhook, as when the target changed since.
func TestDozeRefusedScalesToZero(t *testing.T) {
	op := startOperator(t, operatorOptions{triggers: newFakeTriggers(scaling.StateIdle)})
	createResolver(t, op.resolverNS, "resolver-a", true, "10.0.0.1")
	guaranteed := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")}
	dozeTargetWith(t, op.ns, corev1.ResourceRequirements{Requests: guaranteed, Limits: guaranteed})
	createService(t, op.ns, "web")
	setOwnSlice(t, op.ns, "web", true)
	createES(t, op.ns, "web", "web", "web", dozing("5m"))

	eventually(t, wait, "scaled to zero instead", wantReplicas(op.ns, "web", 0))
	eventually(t, wait, "Active=False ScaledToZero", wantCondition(op.ns, "web", elastiv1alpha1.ConditionActive, metav1.ConditionFalse, contract.ReasonScaledToZero))
	if err := wantDozeRecords(op.ns, -1)(); err != nil {
		t.Fatal(err)
	}
	if err := wantPodCPU(op.ns, "500m", "web-a", "web-b")(); err != nil {
		t.Fatalf("a refused doze resized a pod: %v", err)
	}
	eventually(t, wait, "a DozeRefused Event", func() error {
		list := &eventsv1.EventList{}
		if err := k8s.List(context.Background(), list, client.InNamespace(op.ns)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Reason == EventDozeRefused && strings.Contains(e.Note, "Guaranteed") {
				return nil
			}
		}
		return fmt.Errorf("no DozeRefused Event naming the Guaranteed pods among %d Events", len(list.Items))
	})
}

// TestDozeRolloutWakesAndNewPodsDoze: a pod that appears while the target
// dozes (a scale-out) dozes too; a change of the pod template (a rollout,
// which brings pods at full size) wakes the target.
func TestDozeRolloutWakesAndNewPodsDoze(t *testing.T) {
	op := startOperator(t, operatorOptions{triggers: newFakeTriggers(scaling.StateIdle)})
	dozeSetup(t, op, "5m")
	eventually(t, wait, "dozing", wantPodCPU(op.ns, "5m", "web-a", "web-b"))

	// A third pod, as the ReplicaSet would make it after a scale-out.
	d := &appsv1.Deployment{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: op.ns, Name: "web"}, d); err != nil {
		t.Fatal(err)
	}
	a := &corev1.Pod{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: op.ns, Name: "web-a"}, a); err != nil {
		t.Fatal(err)
	}
	c := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: op.ns, Name: "web-c", Labels: d.Spec.Template.Labels}, Spec: *d.Spec.Template.Spec.DeepCopy()}
	c.Spec.NodeName = a.Spec.NodeName
	mustCreate(t, c)
	dozeKubelet(t, op.ns, "web-c", nil)
	eventually(t, wait, "the new pod dozes too", wantPodCPU(op.ns, "5m", "web-c"))
	eventually(t, wait, "and is recorded", wantDozeRecords(op.ns, 3))
	if err := wantMode(op.ns, "web", elastiv1alpha1.ModeProxy)(); err != nil {
		t.Fatal(err)
	}

	d.Spec.Template.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-12-04T17:00:00Z"}
	if err := k8s.Update(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "a rollout wakes the dozing pods", wantPodCPU(op.ns, "250m", "web-a", "web-b", "web-c"))
	eventually(t, wait, "waking", wantCondition(op.ns, "web", elastiv1alpha1.ConditionActive, metav1.ConditionTrue, contract.ReasonWaking))
}

// TestDozeWokenByBusyTriggers: the triggers are evaluated while the target
// dozes, and one that reports activity wakes it: the traffic it saw went
// straight to the Ready dozing pods, past the resolvers
// (docs/architecture.md, "Doze").
func TestDozeWokenByBusyTriggers(t *testing.T) {
	trig := newFakeTriggers(scaling.StateIdle)
	op := startOperator(t, operatorOptions{triggers: trig})
	dozeSetup(t, op, "5m")
	dozedAndApplied(t, op.ns, "5m")
	never(t, 1500*1e6, "idle triggers leave it dozing", wantPodCPU(op.ns, "5m", "web-a", "web-b"))

	trig.set(scaling.StateActive)
	eventually(t, wait, "busy triggers write the requests back", wantPodCPU(op.ns, "250m", "web-a", "web-b"))
	eventually(t, wait, "waking", wantCondition(op.ns, "web", elastiv1alpha1.ConditionActive, metav1.ConditionTrue, contract.ReasonWaking))
}
