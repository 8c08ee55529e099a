//go:build integration

package dozer

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/doze"
	"elasti.dev/elasti/internal/testenv/estest"
)

// The API server refuses a resize unless the pod's node exists and has
// the allocatable resources for it, and envtest runs no kubelet: each test
// makes its own Node and plays the kubelet by writing the pods' status,
// as a kubelet that applied (or deferred) the resize would.

var seq int

func fixture(t *testing.T, kind string, allocatableCPU string) (*elastiv1alpha1.ElastiService, *corev1.Node) {
	t.Helper()
	ctx := context.Background()
	c := env.Client
	seq++
	ns := fmt.Sprintf("doze-%d-%d", time.Now().UnixNano()%100000, seq)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: ns + "-node"}}
	if err := c.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), node) })
	setAllocatable(t, node, allocatableCPU)

	labels := map[string]string{"app": "web"}
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		}}}},
	}
	one := int32(2)
	sel := &metav1.LabelSelector{MatchLabels: labels}
	var target client.Object = &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: sel, Template: tmpl}}
	if kind == "StatefulSet" {
		target = &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
			Spec: appsv1.StatefulSetSpec{Replicas: &one, Selector: sel, Template: tmpl}}
	}
	if err := c.Create(ctx, target); err != nil {
		t.Fatal(err)
	}
	// A pod of another workload in the namespace, which must never be
	// touched.
	other := tmpl.DeepCopy()
	other.Labels = map[string]string{"app": "other"}
	for _, name := range []string{"web-0", "web-1"} {
		createPod(t, ns, name, node.Name, &tmpl)
	}
	createPod(t, ns, "other-0", node.Name, other)

	es := estest.New(ns, "web", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.ScaleTargetRef = elastiv1alpha1.ScaleTargetRef{APIVersion: "apps/v1", Kind: kind, Name: "web"}
		es.Spec.SleepMode = elastiv1alpha1.SleepModeDoze
		mem := resource.MustParse("32Mi")
		es.Spec.Doze = &elastiv1alpha1.DozeSpec{CPU: resource.MustParse("5m"), Memory: &mem}
	})
	return es, node
}

func setAllocatable(t *testing.T, node *corev1.Node, cpu string) {
	t.Helper()
	node.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")}
	node.Status.Allocatable = node.Status.Capacity
	if err := env.Client.Status().Update(context.Background(), node); err != nil {
		t.Fatal(err)
	}
}

// createPod creates a running pod from tmpl on node, with the status a
// kubelet would write.
func createPod(t *testing.T, ns, name, node string, tmpl *corev1.PodTemplateSpec) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: tmpl.Labels}, Spec: *tmpl.Spec.DeepCopy()}
	pod.Spec.NodeName = node
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	kubelet(t, pod, nil)
	return pod
}

// kubelet writes pod's status as a kubelet that applied its spec's
// resources would, then lets edit change it (a pending resize, a restart).
func kubelet(t *testing.T, pod *corev1.Pod, edit func(*corev1.Pod)) {
	t.Helper()
	ctx := context.Background()
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		t.Fatal(err)
	}
	restarts := map[string]int32{}
	for _, s := range pod.Status.ContainerStatuses {
		restarts[s.Name] = s.RestartCount
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.ObservedGeneration = pod.Generation
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, ObservedGeneration: pod.Generation}}
	pod.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		r := c.Resources.DeepCopy()
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: true, RestartCount: restarts[c.Name], Resources: r, AllocatedResources: r.Requests,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
		})
	}
	if edit != nil {
		edit(pod)
	}
	if err := env.Client.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
}

func requests(t *testing.T, ns, name string) string {
	t.Helper()
	pod := &corev1.Pod{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
		t.Fatal(err)
	}
	r := pod.Spec.Containers[0].Resources
	return fmt.Sprintf("cpu=%s memory=%s limit=%s", r.Requests.Cpu(), r.Requests.Memory(), r.Limits.Memory())
}

// TestDozeAndWakeInPlace dozes a target's two pods through the real
// pods/resize subresource, follows the resize through the status a kubelet
// writes, and wakes them back, for a Deployment and a StatefulSet.
func TestDozeAndWakeInPlace(t *testing.T) {
	for _, kind := range []string{"Deployment", "StatefulSet"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			es, _ := fixture(t, kind, "4")
			d := &Dozer{Live: env.Client, Client: env.Client}

			tgt, err := d.Read(ctx, es)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"web-0", "web-1"}, names(tgt.Pods)); diff != "" {
				t.Fatalf("target's pods (-want +got):\n%s", diff)
			}
			recs, err := d.Shrink(ctx, tgt.Pods, *es.Spec.Doze, nil)
			if err != nil {
				t.Fatal(err)
			}
			st := &elastiv1alpha1.DozeStatus{TemplateHash: tgt.TemplateHash, Pods: recs}
			for _, name := range []string{"web-0", "web-1"} {
				if got, want := requests(t, es.Namespace, name), "cpu=5m memory=32Mi limit=256Mi"; got != want {
					t.Errorf("%s dozing: %s, want %s", name, got, want)
				}
			}
			if got := requests(t, es.Namespace, "other-0"); got != "cpu=250m memory=128Mi limit=256Mi" {
				t.Errorf("another workload's pod was resized: %s", got)
			}
			if len(recs) != 2 || recs[0].Generation != 2 || recs[0].Containers[0].Requests.CPU.String() != "250m" {
				t.Fatalf("records %+v, want two, at generation 2, with the 250m CPU request from before", recs)
			}
			if f := doze.Freed(recs); f.CPU.MilliValue() != 2*245 || f.Memory.Value() != 2*96<<20 {
				t.Errorf("freed %s CPU %s memory, want 490m and 192Mi", f.CPU, f.Memory)
			}

			// The kubelet has not caught up: still in progress.
			tgt, _ = d.Read(ctx, es)
			if r := Observe(tgt, st); r.Done || len(r.Waiting) != 2 {
				t.Errorf("before the kubelet acted: %+v, want both pods waiting", r)
			}
			for i := range tgt.Pods {
				kubelet(t, &tgt.Pods[i], nil)
			}
			tgt, _ = d.Read(ctx, es)
			if r := Observe(tgt, st); !r.Done || r.TemplateChanged || len(r.Unrecorded)+len(r.Gone)+len(r.Restarted) != 0 {
				t.Errorf("after the kubelet acted: %+v, want done and nothing else", r)
			}

			// A doze reconciled again (an operator restart) writes nothing
			// and keeps the requests from before the doze.
			again, err := d.Shrink(ctx, tgt.Pods, *es.Spec.Doze, recs)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(recs, again, quantities); diff != "" {
				t.Errorf("records of a second doze (-first +second):\n%s", diff)
			}

			// Wake: the requests from before, limits untouched.
			if err := d.Restore(ctx, tgt.Pods, recs); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"web-0", "web-1"} {
				if got, want := requests(t, es.Namespace, name), "cpu=250m memory=128Mi limit=256Mi"; got != want {
					t.Errorf("%s woken: %s, want %s", name, got, want)
				}
			}
			tgt, _ = d.Read(ctx, es)
			if r := Observe(tgt, st); r.Done {
				t.Errorf("wake reported done before the kubelet acted: %+v", r)
			}
			kubelet(t, &tgt.Pods[0], nil)
			kubelet(t, &tgt.Pods[1], func(p *corev1.Pod) {
				p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue,
					Reason: corev1.PodReasonDeferred, Message: "Node didn't have enough resource: cpu", ObservedGeneration: p.Generation})
				p.Status.ContainerStatuses[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5m"), corev1.ResourceMemory: resource.MustParse("32Mi")}
			})
			tgt, _ = d.Read(ctx, es)
			if r := Observe(tgt, st); r.Done || len(r.Deferred) != 1 || r.Deferred[0] != "web-1" {
				t.Errorf("a deferred wake of web-1: %+v, want it alone reported deferred", r)
			}
		})
	}
}

// TestDozeMeetsTheUnexpected: a pod that cannot doze stops the doze before
// anything is written; a restarted container, a recreated pod and a
// rollout are reported; a wake the node has no room for is ErrNoRoom.
func TestDozeMeetsTheUnexpected(t *testing.T) {
	ctx := context.Background()
	// The node's allocatable CPU is below one pod's full request: its
	// pods were placed when it had more, and the room was taken since.
	// A doze fits, a wake back to 250m does not.
	es, node := fixture(t, "StatefulSet", "100m")
	d := &Dozer{Live: env.Client, Client: env.Client}

	// A third pod a VPA made Guaranteed: nothing is resized.
	guaranteed := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		}}}}}
	vpa := createPod(t, es.Namespace, "web-2", node.Name, &guaranteed)
	tgt, err := d.Read(ctx, es)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Shrink(ctx, tgt.Pods, *es.Spec.Doze, nil); !errors.Is(err, doze.ErrRefused) {
		t.Fatalf("doze with a Guaranteed pod: %v, want doze.ErrRefused", err)
	}
	if got := requests(t, es.Namespace, "web-0"); got != "cpu=250m memory=128Mi limit=256Mi" {
		t.Errorf("web-0 resized though the doze was refused: %s", got)
	}
	if err := env.Client.Delete(ctx, vpa, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}

	tgt, _ = d.Read(ctx, es)
	recs, err := d.Shrink(ctx, tgt.Pods, *es.Spec.Doze, nil)
	if err != nil {
		t.Fatal(err)
	}
	tgt, _ = d.Read(ctx, es)
	for i := range tgt.Pods {
		kubelet(t, &tgt.Pods[i], nil)
	}
	st := &elastiv1alpha1.DozeStatus{TemplateHash: tgt.TemplateHash, Pods: recs}

	// web-0's container restarts (at the dozing size); web-1 is deleted
	// and recreated by its controller under the same name, at full size.
	kubelet(t, &tgt.Pods[0], func(p *corev1.Pod) { p.Status.ContainerStatuses[0].RestartCount++ })
	oldUID := string(tgt.Pods[1].UID)
	if err := env.Client.Delete(ctx, &tgt.Pods[1], client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	sts := &appsv1.StatefulSet{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: es.Namespace, Name: "web"}, sts); err != nil {
		t.Fatal(err)
	}
	createPod(t, es.Namespace, "web-1", node.Name, &sts.Spec.Template)
	tgt, _ = d.Read(ctx, es)
	r := Observe(tgt, st)
	want := Report{Done: true, Restarted: []string{"web-0"}, Gone: []string{oldUID}, Unrecorded: []string{"web-1"}}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	// The new web-1 has no record: a wake leaves it as it is.
	if err := d.Restore(ctx, tgt.Pods[1:], recs); err != nil {
		t.Fatal(err)
	}

	// A rollout restart changes the template.
	sts.Spec.Template.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-12-04T17:00:00Z"}
	if err := env.Client.Update(ctx, sts); err != nil {
		t.Fatal(err)
	}
	tgt, _ = d.Read(ctx, es)
	if r := Observe(tgt, st); !r.TemplateChanged {
		t.Errorf("a rollout restart while dozing is not reported: %+v", r)
	}

	// web-0 cannot get its 250m back on this node. The API server refuses
	// such a resize at admission from 1.37 on; before, it accepts it and
	// leaves the refusal to the kubelet (Infeasible), which envtest has not.
	if !version.MustParseGeneric(env.Version).AtLeast(version.MajorMinor(1, 37)) {
		t.Logf("kube-apiserver %s does not check a resize against the node's allocatable; the refused wake is not tried", env.Version)
		return
	}
	err = d.Restore(ctx, tgt.Pods, recs)
	if !errors.Is(err, ErrNoRoom) || !apierrors.IsForbidden(err) {
		t.Fatalf("wake without room: %v, want ErrNoRoom wrapping the API server's Forbidden", err)
	}
	if got := requests(t, es.Namespace, "web-0"); got != "cpu=5m memory=32Mi limit=256Mi" {
		t.Errorf("web-0 after a refused wake: %s, want still dozing", got)
	}
}

func TestReadRefusesOtherKinds(t *testing.T) {
	es := estest.New("default", "web", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.ScaleTargetRef = elastiv1alpha1.ScaleTargetRef{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: "web"}
	})
	d := &Dozer{Live: env.Client, Client: env.Client}
	if _, err := d.Read(context.Background(), es); !errors.Is(err, ErrUnsupportedTarget) {
		t.Errorf("a Rollout: %v, want ErrUnsupportedTarget", err)
	}
}

func names(pods []corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

var quantities = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })
