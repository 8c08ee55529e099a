//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller"
)

// The demo app's requests and limits in the doze tests (Burstable, so a
// doze may lower its requests), and the floor it dozes at.
var (
	dozeAwakeCPU, dozeAwakeMemory = resource.MustParse("100m"), resource.MustParse("64Mi")
	dozeFloorCPU, dozeFloorMemory = resource.MustParse("5m"), resource.MustParse("16Mi")
)

// dozePark is how long the doze tests keep the target dozing with its
// probes running: 10 minutes, or ELASTI_DOZE_PARK (a Go duration) for a
// longer look at the probes.
func dozePark(t *testing.T) time.Duration {
	park := 10 * time.Minute
	if v := os.Getenv("ELASTI_DOZE_PARK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("ELASTI_DOZE_PARK: %v", err)
		}
		park = d
	}
	return park
}

// dozable gives the demo app requests below its limits and a liveness
// probe with a 1 s timeout as well as its readiness probe, both every 2 s:
// a dozing container whose probes failed would be restarted and lose its
// warm state, which is what the tests look for.
func dozable(d *appsv1.Deployment) {
	c := &d.Spec.Template.Spec.Containers[0]
	c.Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: dozeAwakeCPU, corev1.ResourceMemory: dozeAwakeMemory},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
	}
	c.LivenessProbe = &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}},
		PeriodSeconds:    2,
		TimeoutSeconds:   1,
		FailureThreshold: 3,
	}
	c.ReadinessProbe.PeriodSeconds = 2
}

// TestDozeUnderClients: sleepMode Doze on a Deployment and on a
// StatefulSet, two pods each, with the demo app's request rate in
// Prometheus as the trigger once the first clients are done. The target dozes
// (its pods keep running, their requests at the floor, reported applied
// by the kubelet), stays so for a 10-minute park with its liveness and
// readiness probes running, and is woken by keep-alive clients POSTing
// bodies: not one request fails or runs twice, and the same pods, never
// restarted, have their requests back.
//
// The dozing pods are Ready, so kube-proxy sends each client's connection
// either to a resolver, which forwards it and asks for the wake, or
// straight to a pod, which serves it at the floor; there the trigger sees
// the traffic and wakes the target. Which comes first varies from run to
// run; TestDozeWokenPastTheResolvers covers the second alone.
func TestDozeUnderClients(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"Deployment", "StatefulSet"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			dozeUnderClients(t, kind)
		})
	}
}

// dozyApp creates the demo app as a Deployment or StatefulSet of replicas
// dozable pods that write to l, its Service, and an ElastiService with
// sleepMode Doze whose trigger says busy (until sleepWhenIdle); it returns
// the namespace and the Service's URL once the app is awake and served.
func dozyApp(t *testing.T, e *Env, kind string, replicas int32, l *ledger) (string, string) {
	t.Helper()
	e.InstallElasti(t)
	ns := e.NewNamespace(t)
	d := DemoAppDeployment(ns, "demoapp", replicas)
	dozable(d)
	l.mount(d)
	es := e.ElastiServiceFor(ns, "demoapp", BusyQuery)
	es.Spec.SleepMode = elastiv1alpha1.SleepModeDoze
	es.Spec.Doze = &elastiv1alpha1.DozeSpec{CPU: dozeFloorCPU, Memory: ptr.To(dozeFloorMemory)}
	var target client.Object = d
	if kind == "StatefulSet" {
		target = &appsv1.StatefulSet{
			ObjectMeta: d.ObjectMeta,
			Spec: appsv1.StatefulSetSpec{
				Replicas:            d.Spec.Replicas,
				ServiceName:         "demoapp",
				Selector:            d.Spec.Selector,
				Template:            d.Spec.Template,
				PodManagementPolicy: appsv1.ParallelPodManagement,
			},
		}
		es.Spec.ScaleTargetRef = elastiv1alpha1.ScaleTargetRef{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "demoapp"}
	}
	svc := DemoAppHTTPService(ns, "demoapp")
	e.Create(t, target, svc)
	e.WaitReadyEndpoints(t, ns, "demoapp", int(replicas), 2*time.Minute)
	e.Create(t, es)
	e.WaitAwake(t, ns, "demoapp", time.Minute)
	url := httpURL(svc.Spec.ClusterIP, DemoHTTPPort)
	// A new Service: kube-proxy may not route it yet.
	answers(t, e, url, 30*time.Second)
	return ns, url
}

// sleepWhenIdle makes the demo app's request rate in Prometheus its
// trigger, as a user would have it, and waits until it dozes with the pods
// of want. The rate is set only now, with no client running: over a 10 s
// window a new series can read zero while requests flow, which would
// start a doze under the test's clients.
func (e *Env) sleepWhenIdle(t *testing.T, ns string, want map[string]corev1.Pod) {
	t.Helper()
	e.SetQuery(t, ns, "demoapp", RequestRateQuery(ns, "demoapp"))
	start := time.Now()
	Eventually(t, 3*time.Minute, time.Second, func(ctx context.Context) error {
		return e.dozing(ctx, ns, want)
	})
	t.Logf("dozing after %s of waiting", time.Since(start).Round(time.Second))
}

func dozeUnderClients(t *testing.T, kind string) {
	e := Get(t)
	l := newLedger(t)
	ns, url := dozyApp(t, e, kind, 2, l)
	ctx := context.Background()
	before := e.dozePods(t, ns)

	// Awake, under clients: served by the pods.
	fleet := startKeepAliveFleet(e, url, 4, 200*time.Millisecond, 4*5*10)
	time.Sleep(5 * time.Second)
	fleet.finish()
	sent := append([]postResult(nil), fleet.ok...)
	failed := append([]postResult(nil), fleet.bad...)

	// Doze: once the rate is zero, after the cooldown and the grace period,
	// the pods' requests go down to the floor, and the kubelet applies it.
	e.sleepWhenIdle(t, ns, before)

	// The park: probes keep running; the pods stay Ready, not restarted,
	// at the floor, and the Service in proxy mode.
	park := dozePark(t)
	parkStart := time.Now()
	for time.Since(parkStart) < park {
		if err := e.dozing(ctx, ns, before); err != nil {
			t.Fatalf("%s into the park: %v", time.Since(parkStart).Round(time.Second), err)
		}
		time.Sleep(15 * time.Second)
	}
	t.Logf("%s parked %s: pods not restarted, requests at the floor", kind, park)

	// The wake, by the clients. Once awake the target is kept so (the
	// trigger says busy), so that the clients' last seconds come after
	// the wake and the Events count one of each.
	wakeStart := time.Now()
	fleet = startKeepAliveFleet(e, url, 4, 200*time.Millisecond, 4*5*120)
	e.WaitAwake(t, ns, "demoapp", 2*time.Minute)
	t.Logf("%s back in serve mode %s after the clients started", kind, time.Since(wakeStart).Round(10*time.Millisecond))
	e.SetQuery(t, ns, "demoapp", BusyQuery)
	time.Sleep(5 * time.Second)
	fleet.finish()
	sent = append(sent, fleet.ok...)
	failed = append(failed, fleet.bad...)
	t.Logf("%d POSTs answered, %d failed", len(sent), len(failed))
	for i, f := range failed {
		if i == 10 {
			t.Errorf("... and %d more", len(failed)-10)
			break
		}
		t.Errorf("POST %s at %s (reused connection: %v): %v", f.id, f.at.Format("15:04:05.000"), f.reused, f.err)
	}
	checkLedger(t, t.Errorf, l, sent)

	// Woken in place: the same pods, never restarted, their requests back
	// in their spec and as the kubelet reports them; status.doze cleared.
	after := e.dozePods(t, ns)
	for uid, p := range before {
		q, ok := after[uid]
		if !ok {
			t.Errorf("pod %s (%s) is gone after the wake: the doze did not keep it", p.Name, uid)
			continue
		}
		if n := RestartCount(&q); n != 0 {
			t.Errorf("pod %s restarted %d times", q.Name, n)
		}
		if err := atRequests(q, dozeAwakeCPU, dozeAwakeMemory); err != nil {
			t.Errorf("after the wake: %v", err)
		}
	}
	if len(after) != len(before) {
		t.Errorf("%d pods after the wake, want the %d from before", len(after), len(before))
	}
	got, err := e.GetElastiService(ctx, ns, "demoapp")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Doze != nil {
		t.Errorf("status.doze still set after the wake: %+v", got.Status.Doze)
	}
	for _, reason := range []string{controller.EventDozed, controller.EventDozeWoke} {
		if n, err := e.EventCount(ctx, ns, "demoapp", reason); err != nil || n != 1 {
			t.Errorf("%d %s Events (err %v), want 1", n, reason, err)
		}
	}
}

// TestDozeWokenPastTheResolvers: traffic that reaches a dozing pod
// straight, as kube-proxy sends part of it (the pods stay Ready), and a
// kept-alive connection opened before the doze, never passes a resolver;
// the trigger sees it, and the target wakes. Here the client calls the
// pod's own address, so no resolver can have seen it, and every request
// is answered meanwhile, at the floor.
func TestDozeWokenPastTheResolvers(t *testing.T) {
	t.Parallel()
	e := Get(t)
	l := newLedger(t)
	ns, _ := dozyApp(t, e, "Deployment", 1, l)
	before := e.dozePods(t, ns)
	e.sleepWhenIdle(t, ns, before)
	var pod corev1.Pod
	for _, p := range before {
		pod = p
	}
	url := httpURL(pod.Status.PodIP, DemoHTTPTarget)
	start := time.Now()
	fleet := startKeepAliveFleet(e, url, 2, 200*time.Millisecond, 2*5*180)
	e.WaitAwake(t, ns, "demoapp", 2*time.Minute)
	t.Logf("woken %s after the clients started calling the pod", time.Since(start).Round(100*time.Millisecond))
	fleet.finish()
	t.Logf("%d POSTs answered, %d failed", len(fleet.ok), len(fleet.bad))
	for i, f := range fleet.bad {
		if i == 10 {
			t.Errorf("... and %d more", len(fleet.bad)-10)
			break
		}
		t.Errorf("POST %s at %s: %v", f.id, f.at.Format("15:04:05.000"), f.err)
	}
	checkLedger(t, t.Errorf, l, fleet.ok)
	after := e.dozePods(t, ns)
	if q, ok := after[string(pod.UID)]; !ok {
		t.Errorf("pod %s is gone after the wake", pod.Name)
	} else if err := atRequests(q, dozeAwakeCPU, dozeAwakeMemory); err != nil {
		t.Errorf("after the wake: %v", err)
	}
	if n, err := e.EventCount(context.Background(), ns, "demoapp", controller.EventDozeWoke); err != nil || n == 0 {
		t.Errorf("%d DozeWoke Events (err %v), want one", n, err)
	}
}

// dozePods returns the demo app's running pods by UID.
func (e *Env) dozePods(t *testing.T, ns string) map[string]corev1.Pod {
	t.Helper()
	pods, err := e.Pods(context.Background(), ns, map[string]string{"app": "demoapp"})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]corev1.Pod{}
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			m[string(p.UID)] = p
		}
	}
	return m
}

// dozing returns nil while the ElastiService dozes the very pods of want:
// proxy mode, reason Dozing, every pod Ready, not restarted, with its
// requests at the floor in its spec and as the kubelet reports them.
func (e *Env) dozing(ctx context.Context, ns string, want map[string]corev1.Pod) error {
	es, err := e.GetElastiService(ctx, ns, "demoapp")
	if err != nil {
		return err
	}
	active := Condition(es, elastiv1alpha1.ConditionActive)
	if es.Status.Mode != elastiv1alpha1.ModeProxy || active == nil || active.Reason != contract.ReasonDozing || es.Status.Doze == nil {
		return fmt.Errorf("not dozing: mode %q, conditions %s", es.Status.Mode, conditions(es))
	}
	if n := len(es.Status.Doze.Pods); n != len(want) {
		return fmt.Errorf("status.doze records %d pods, want %d", n, len(want))
	}
	pods, err := e.Pods(ctx, ns, map[string]string{"app": "demoapp"})
	if err != nil {
		return err
	}
	if len(pods) != len(want) {
		return fmt.Errorf("%d pods, want %d", len(pods), len(want))
	}
	for _, p := range pods {
		if _, ok := want[string(p.UID)]; !ok {
			return fmt.Errorf("pod %s (%s) is not one of the pods from before the doze", p.Name, p.UID)
		}
		if n := RestartCount(&p); n != 0 {
			return fmt.Errorf("pod %s restarted %d times", p.Name, n)
		}
		if !PodReady(&p) {
			return fmt.Errorf("pod %s is not Ready", p.Name)
		}
		if err := atRequests(p, dozeFloorCPU, dozeFloorMemory); err != nil {
			return err
		}
	}
	return nil
}

// atRequests checks the demo app container's CPU and memory requests, in
// the pod's spec and in what the kubelet reports applied.
func atRequests(p corev1.Pod, cpu, memory resource.Quantity) error {
	c := p.Spec.Containers[0]
	if !c.Resources.Requests.Cpu().Equal(cpu) || !c.Resources.Requests.Memory().Equal(memory) {
		return fmt.Errorf("pod %s requests %s CPU and %s memory in its spec, want %s and %s",
			p.Name, c.Resources.Requests.Cpu(), c.Resources.Requests.Memory(), &cpu, &memory)
	}
	if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].Resources == nil {
		return fmt.Errorf("pod %s: the kubelet reports no resources", p.Name)
	}
	// The kubelet reads CPU back from cpu.shares (1024 a core), which
	// may round it down by a millicore.
	got := p.Status.ContainerStatuses[0].Resources.Requests
	if d := cpu.MilliValue() - got.Cpu().MilliValue(); d < 0 || d > 1 || !got.Memory().Equal(memory) {
		return fmt.Errorf("pod %s: the kubelet reports %s CPU and %s memory requested, want %s and %s",
			p.Name, got.Cpu(), got.Memory(), &cpu, &memory)
	}
	return nil
}
