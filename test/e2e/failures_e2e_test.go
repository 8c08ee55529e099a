//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller"
	"elasti.dev/elasti/internal/scaling"
)

// StableFor checks that check holds on every poll for the whole of d: the
// bounded "nothing happens" assertion (no scale-down, no flapping).
func StableFor(t testing.TB, d, interval time.Duration, check func(ctx context.Context) error) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := check(ctx)
		cancel()
		if err != nil {
			t.Fatalf("not stable for %s: %v", d, err)
		}
		time.Sleep(interval)
	}
}

// ReapplyElasti applies the install's overlay again (restoring anything a test
// deleted) and waits until the operator and the resolvers are rolled out.
func (e *Env) ReapplyElasti(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if _, err := e.Cluster.Kubectl(ctx, "", "apply", "--server-side", "--force-conflicts", "-k", e.Overlay()); err != nil {
		t.Fatalf("re-apply Elasti: %v", err)
	}
	if err := e.WaitRolledOut(ctx, ElastiNamespace, OperatorDeployment, ResolverDeployment); err != nil {
		t.Fatalf("Elasti not rolled out again: %v", err)
	}
}

// answers polls an HTTP GET of url until it is answered by the demo app.
func answers(t testing.TB, e *Env, url string, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, 250*time.Millisecond, func(ctx context.Context) error {
		body, err := e.HTTPGet(ctx, url)
		if err == nil && !strings.HasPrefix(body, "hello from ") {
			return fmt.Errorf("unexpected body %q", body)
		}
		return err
	})
}

func httpURL(ip string, port int) string {
	return "http://" + net.JoinHostPort(ip, fmt.Sprint(port)) + "/"
}

// TestPrometheusDown: with the cluster's Prometheus stopped an idle-looking
// service never sleeps, TriggersHealthy says why, and once Prometheus is back
// the service sleeps as usual.
func TestPrometheusDown(t *testing.T) {
	e := Get(t)
	e.InstallElasti(t)
	ns := e.NewNamespace(t)
	e.Create(t, DemoAppDeployment(ns, "demoapp", 1), DemoAppService(ns, "demoapp"))
	e.WaitReadyEndpoints(t, ns, "demoapp", 1, 2*time.Minute)

	if err := e.ClusterCLI("prometheus-stop"); err != nil {
		t.Fatalf("stop Prometheus: %v", err)
	}
	restarted := false
	restart := func() {
		if restarted {
			return
		}
		restarted = true
		if err := e.ClusterCLI("prometheus-start"); err != nil {
			t.Errorf("restart Prometheus: %v", err)
		}
	}
	t.Cleanup(restart)

	// The query would say idle, if Prometheus could answer it.
	e.Create(t, e.ElastiServiceFor(ns, "demoapp", IdleQuery))
	created := time.Now()
	Eventually(t, time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
		es, err := e.GetElastiService(ctx, ns, "demoapp")
		if err != nil {
			return err
		}
		c := Condition(es, elastiv1alpha1.ConditionTriggersHealthy)
		if c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("TriggersHealthy not False yet (conditions %s)", conditions(es))
		}
		if c.Reason != scaling.ReasonPrometheusUnreachable {
			return fmt.Errorf("TriggersHealthy reason %q, want %s", c.Reason, scaling.ReasonPrometheusUnreachable)
		}
		t.Logf("TriggersHealthy=False %s: %s", c.Reason, c.Message)
		return nil
	})
	// Well past the 5 s cooldown (counted from creation): still serving.
	window := max(time.Until(created.Add(15*time.Second)), 5*time.Second)
	StableFor(t, window, 500*time.Millisecond, func(ctx context.Context) error {
		es, err := e.GetElastiService(ctx, ns, "demoapp")
		if err != nil {
			return err
		}
		if es.Status.Mode != elastiv1alpha1.ModeServe {
			return fmt.Errorf("mode %q while Prometheus is down (conditions %s)", es.Status.Mode, conditions(es))
		}
		n, _, err := e.Replicas(ctx, ns, "demoapp")
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("%d replicas while Prometheus is down, want 1", n)
		}
		return nil
	})
	Eventually(t, 30*time.Second, 250*time.Millisecond, func(ctx context.Context) error {
		n, err := e.EventCount(ctx, ns, "demoapp", controller.EventTriggerUnhealthy)
		if err == nil && n == 0 {
			err = errors.New("no TriggerUnhealthy Event")
		}
		return err
	})

	// Prometheus back: the trigger is healthy again and the service sleeps.
	restart()
	e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)
	es, err := e.GetElastiService(context.Background(), ns, "demoapp")
	if err != nil {
		t.Fatal(err)
	}
	if c := Condition(es, elastiv1alpha1.ConditionTriggersHealthy); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("asleep with TriggersHealthy %v", c)
	}
}

// TestResolversDeleted: deleting the resolver Deployment while a service is
// asleep fails open: the target is woken, the proxy slice removed and the
// Service answers from its pods. With the resolvers back it sleeps again.
func TestResolversDeleted(t *testing.T) {
	e := Get(t)
	ns, clusterIP := sleepyDemoApp(t, e, idle)
	e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)

	// Restore the install whatever happens, so later tests have resolvers.
	t.Cleanup(func() { e.ReapplyElasti(t) })
	ctx := context.Background()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ElastiNamespace, Name: ResolverDeployment}}
	start := time.Now()
	e.DeleteAndWait(t, d, 2*time.Minute)

	// The trigger still says idle: only the missing resolvers keep it awake.
	e.WaitAwake(t, ns, "demoapp", 2*time.Minute)
	t.Logf("awake %s after the resolver Deployment was deleted", time.Since(start).Round(10*time.Millisecond))
	answers(t, e, httpURL(clusterIP, DemoHTTPPort), time.Minute)
	Eventually(t, 30*time.Second, 250*time.Millisecond, func(ctx context.Context) error {
		n, err := e.EventCount(ctx, ns, "demoapp", controller.EventResolversGone)
		if err == nil && n == 0 {
			err = errors.New("no ResolversUnavailable Event")
		}
		return err
	})
	if n, _, err := e.Replicas(ctx, ns, "demoapp"); err != nil || n != 1 {
		t.Errorf("target at %d replicas (err %v), want 1", n, err)
	}

	e.ReapplyElasti(t)
	e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)
}

// TestOperatorKilledDuringWake: the leader operator pod is killed (grace 0)
// in the middle of a wake: after the resolver's activation call reached it
// and it scaled the target up, and before the target has a ready endpoint
// (the demo app boots in 8 s). The test proves the kill landed there: at the
// kill the Deployment had replicas, the status said Waking, and no endpoint
// was ready; the pod turned Ready only after the kill. The held request is
// still answered, and the replica that takes over the lease finishes the
// switch back to serve.
func TestOperatorKilledDuringWake(t *testing.T) {
	e := Get(t)
	ns, ip := sleepyDemoApp(t, e, idle, withEnv("STARTUP_DELAY", "8s"))
	e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)
	e.SetQuery(t, ns, "demoapp", BusyQuery)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		if err := e.WaitRolledOut(ctx, ElastiNamespace, OperatorDeployment); err != nil {
			t.Errorf("operator not rolled out again: %v", err)
		}
	})

	ctx := context.Background()
	var leader string
	Eventually(t, time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
		var err error
		leader, err = e.OperatorLeader(ctx)
		return err
	})

	type result struct {
		body string
		err  error
		took time.Duration
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		body, err := GetWith(ctx, e.LongHTTPClient(), httpURL(ip, DemoHTTPPort), "")
		done <- result{body, err, time.Since(start)}
	}()

	// Mid-wake: the leader has scaled the target up and says Waking, and no
	// endpoint is ready yet.
	Eventually(t, time.Minute, 20*time.Millisecond, func(ctx context.Context) error {
		n, _, err := e.Replicas(ctx, ns, "demoapp")
		if err != nil {
			return err
		}
		es, err := e.GetElastiService(ctx, ns, "demoapp")
		if err != nil {
			return err
		}
		if c := Condition(es, elastiv1alpha1.ConditionActive); n == 0 || c == nil || c.Reason != contract.ReasonWaking {
			return fmt.Errorf("not waking yet: %d replicas, conditions %s", n, conditions(es))
		}
		return nil
	})
	if err := e.Clientset.CoreV1().Pods(ElastiNamespace).Delete(ctx, leader, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatalf("delete leader %s: %v", leader, err)
	}
	killed := time.Now()
	if n, err := e.OwnReadyEndpoints(ctx, ns, "demoapp"); err != nil || n != 0 {
		t.Fatalf("the kill did not land mid-wake: %d ready endpoints (%v) right after it", n, err)
	}
	t.Logf("deleted leader %s with grace period 0, %s after the request, while the target was waking", leader, killed.Sub(start).Round(time.Millisecond))

	r := <-done
	if r.err != nil {
		t.Fatalf("request held while the leader died: after %s: %v", r.took.Round(time.Millisecond), r.err)
	}
	if !strings.HasPrefix(r.body, "hello from demoapp") {
		t.Errorf("body %q", r.body)
	}
	t.Logf("request answered %s after it was sent", r.took.Round(time.Millisecond))

	// The pod turned Ready after the kill: the kill was before the end of
	// the wake, as the kubelet saw it.
	pods, err := e.Pods(ctx, ns, map[string]string{"app": "demoapp"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.After(killed.Add(-time.Second)) {
				t.Errorf("pod %s was Ready at %s, before the kill at %s", p.Name, c.LastTransitionTime.Format("15:04:05"), killed.Format("15:04:05"))
			}
		}
	}
	// The wake was the killed leader's doing...
	evs, err := e.Clientset.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var byLeader bool
	for _, ev := range evs.Items {
		if ev.Reason == controller.EventWoke && ev.Regarding.Name == "demoapp" && strings.HasSuffix(ev.ReportingInstance, leader) {
			byLeader = true
		}
	}
	if !byLeader {
		t.Errorf("no Woke Event reported by the killed leader %s", leader)
	}
	// ...and a new leader finishes the switch back to serve.
	e.WaitAwake(t, ns, "demoapp", 2*time.Minute)
	Eventually(t, 2*time.Minute, 500*time.Millisecond, func(ctx context.Context) error {
		now, err := e.OperatorLeader(ctx)
		if err == nil && now == leader {
			err = fmt.Errorf("lease still names the killed pod %s", leader)
		}
		if err == nil {
			t.Logf("new leader %s", now)
		}
		return err
	})
}

// TestElastiServiceDeletedAtZero: deleting a sleeping service's
// ElastiService under steady traffic gives the Service back: proxy slice
// gone, the target at minTargetReplicas, the Service answering from its
// pods, and not one request failed meanwhile. The traffic is both kinds of
// client: a GET on a new connection every 50 ms, and four keep-alive clients
// POSTing bodies. It starts as the delete is sent, so the deletion's wake,
// the resolvers' activation calls and the proxy slice's removal all happen
// under it.
func TestElastiServiceDeletedAtZero(t *testing.T) {
	t.Parallel()
	e := Get(t)
	e.InstallElasti(t)
	ns := e.NewNamespace(t)
	e.Create(t, DemoAppDeployment(ns, "demoapp", 1), DemoAppService(ns, "demoapp"))
	e.WaitReadyEndpoints(t, ns, "demoapp", 1, 2*time.Minute)
	es := e.ElastiServiceFor(ns, "demoapp", IdleQuery)
	es.Spec.MinTargetReplicas = 2
	e.Create(t, es)
	e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)
	var svc corev1.Service
	if err := e.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "demoapp"}, &svc); err != nil {
		t.Fatal(err)
	}
	url := httpURL(svc.Spec.ClusterIP, DemoHTTPPort)
	// Bounded: at most 3 minutes of each.
	load := startLoad(e, url, 20, 20*180)
	fleet := startKeepAliveFleet(e, url, 4, 200*time.Millisecond, 4*5*180)

	start := time.Now()
	e.DeleteAndWait(t, es, time.Minute)
	Eventually(t, 2*time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
		slices, err := e.ProxySlices(ctx, ns, "demoapp")
		if err != nil {
			return err
		}
		if len(slices) != 0 {
			return fmt.Errorf("%d proxy slices left", len(slices))
		}
		n, _, err := e.Replicas(ctx, ns, "demoapp")
		if err != nil {
			return err
		}
		if n != 2 {
			return fmt.Errorf("target at %d replicas, want minTargetReplicas 2", n)
		}
		return nil
	})
	e.WaitReadyEndpoints(t, ns, "demoapp", 2, 2*time.Minute)
	t.Logf("Service back on its 2 pods %s after the delete", time.Since(start).Round(10*time.Millisecond))
	answers(t, e, url, time.Minute)
	time.Sleep(5 * time.Second)
	load.finish()
	fleet.finish()
	t.Logf("%d GETs on new connections (%d failed) and %d keep-alive POSTs (%d failed) across the delete",
		load.sent.Load(), len(load.failures), len(fleet.ok)+len(fleet.bad), len(fleet.bad))
	for _, f := range load.failures {
		t.Errorf("GET failed at %s", f)
	}
	for _, f := range fleet.bad {
		t.Errorf("POST %s failed at %s: %v", f.id, f.at.Format("15:04:05.000"), f.err)
	}
}
