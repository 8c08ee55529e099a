//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/testenv/estest"
)

// rolloutAsleep is how many ElastiServices sleep through the resolver
// rollout: the e2e budget's size of the 10,000 make bench measures (issue
// 43 asks for at least 500).
const rolloutAsleep = 500

// TestResolverRolloutAtScale: with 500 ElastiServices asleep, the
// resolvers are restarted as `kubectl rollout restart` does, and then one
// of them is killed (SIGKILL), while clients
// send requests to 20 of them throughout, half on new connections and half
// on kept-alive ones. The 20 answer from a static response, so every
// request goes through a resolver and none wakes its target. Not one
// request fails: each new resolver is in every proxy slice before an old
// one stops being ready (the rollout's maxUnavailable 0), the operator
// rewrites the 500 slices in one pass when the resolvers change, and an
// old resolver keeps accepting until no slice lists it
// (docs/architecture.md, "When the resolvers change"). The test logs how
// long after each old pod's deletion the slices stopped listing it. After
// the kill, requests fail only until kube-proxy has applied the slices
// without the killed resolver, which must come within 30 s (crashResolver);
// the kubelet restarts it, and it is in every slice again before the
// traffic stops.
func TestResolverRolloutAtScale(t *testing.T) {
	e := Get(t)
	e.InstallElasti(t)
	ns := e.NewNamespace(t)
	ctx := context.Background()
	t.Cleanup(func() { deleteAtScale(t, e, ns) })

	path := "/ping"
	static := &elastiv1alpha1.ProxySpec{StaticResponses: []elastiv1alpha1.StaticResponse{{
		Name:    "ping",
		Match:   elastiv1alpha1.StaticResponseMatch{Path: &elastiv1alpha1.PathMatch{Exact: &path}},
		Respond: elastiv1alpha1.StaticReply{Body: "asleep\n"},
	}}}
	start := time.Now()
	createAtScale(t, e, ns, rolloutAsleep, func(i int, es *elastiv1alpha1.ElastiService) {
		if i < 20 {
			es.Spec.Proxy = static
		}
	})
	t.Logf("%d Deployments at 0, Services and ElastiServices created in %s", rolloutAsleep, time.Since(start).Round(time.Second))
	Eventually(t, 5*time.Minute, time.Second, func(ctx context.Context) error {
		_, n, err := proxySlicesIn(ctx, e, ns)
		if err == nil && n < rolloutAsleep {
			err = fmt.Errorf("%d of %d proxy slices list a resolver", n, rolloutAsleep)
		}
		return err
	})
	t.Logf("all %d asleep behind the resolvers %s after the first create", rolloutAsleep, time.Since(start).Round(time.Second))

	var ips []string
	for i := range 20 {
		var svc corev1.Service
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: scaleName(i)}, &svc); err != nil {
			t.Fatal(err)
		}
		ips = append(ips, svc.Spec.ClusterIP)
	}
	old, err := e.Pods(ctx, ElastiNamespace, map[string]string{contract.LabelComponent: contract.ComponentResolver})
	if err != nil || len(old) == 0 {
		t.Fatalf("resolver pods: %d, %v", len(old), err)
	}

	stop := make(chan struct{})
	var sent, failed atomic.Int64
	var mu sync.Mutex
	var failures []failure
	var wg sync.WaitGroup
	for i, ip := range ips {
		c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: e.Dialer.DialContext, DisableKeepAlives: i%2 == 0}}
		wg.Go(func() {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				sent.Add(1)
				if err := getStatic(c, strings.TrimSuffix(httpURL(ip, DemoHTTPPort), "/")+path); err != nil {
					failed.Add(1)
					mu.Lock()
					failures = append(failures, failure{at: time.Now(), what: fmt.Sprintf("%s (keep-alive %v): %v", ip, i%2 == 1, err)})
					mu.Unlock()
				}
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		})
	}

	time.Sleep(2 * time.Second) // traffic before the rollout too
	restartAt := time.Now()
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, restartAt.Format(time.RFC3339))
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ElastiNamespace, Name: ResolverDeployment}}
	if err := e.Client.Patch(ctx, d, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	// Until every old pod is gone: its drain is over.
	unlisted := map[string]time.Duration{}
	Eventually(t, 5*time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
		listing, _, err := proxySlicesIn(ctx, e, ns)
		if err != nil {
			return err
		}
		var left []string
		for _, p := range old {
			if _, done := unlisted[p.Name]; !done && listing[p.Name] == 0 {
				unlisted[p.Name] = time.Since(restartAt)
			}
			var pod corev1.Pod
			if err := e.Client.Get(ctx, client.ObjectKeyFromObject(&p), &pod); err == nil && pod.UID == p.UID {
				left = append(left, p.Name)
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("old resolver pods still running: %v", left)
		}
		return e.WaitRolledOut(ctx, ElastiNamespace, ResolverDeployment)
	})
	t.Logf("rollout done and the old resolvers gone %s after the restart; no proxy slice listed each old pod at the test's first look after: %v",
		time.Since(restartAt).Round(100*time.Millisecond), unlisted)
	time.Sleep(2 * time.Second) // traffic after the rollout too
	mu.Lock()
	rolloutFailures := len(failures)
	mu.Unlock()

	// A crash: one of the new resolvers SIGKILLed, no drain. Its pod turns
	// NotReady as soon as the kubelet sees the container gone, the
	// operator's pass takes it out of the 500 proxy slices, and the kubelet
	// restarts it in place. Requests may fail from the kill until
	// kube-proxy has applied the pass (crashSlack after the test sees the
	// last slice without it), and not after.
	victim := crashResolver(t, e, ns)
	time.Sleep(2 * time.Second) // traffic once it is back, too

	// The operator's leader restarted, traffic still on.
	opRestart := restartOperatorLeader(t, e, ns)
	close(stop)
	wg.Wait()

	t.Logf("%d requests to 20 of the %d asleep during the rollout, the crash and the operator's restart, %d failed", sent.Load(), rolloutAsleep, failed.Load())
	for i, f := range failures {
		switch {
		case i < rolloutFailures:
			t.Errorf("failed during the rollout: %s %s", f.at.Format("15:04:05.000"), f.what)
		case !f.at.Before(opRestart):
			t.Errorf("failed during the operator's restart: %s %s", f.at.Format("15:04:05.000"), f.what)
		case f.at.Before(victim.killed) || f.at.After(victim.unlisted.Add(crashSlack)):
			t.Errorf("failed outside the crash's bound (killed %s, out of every slice %s): %s %s",
				victim.killed.Format("15:04:05.000"), victim.unlisted.Format("15:04:05.000"), f.at.Format("15:04:05.000"), f.what)
		}
	}
	t.Logf("%d requests failed inside the crash's bound (kill until %s after the last slice dropped the pod)", len(failures)-rolloutFailures, crashSlack)
	var ds appsv1.DeploymentList
	if err := e.Client.List(ctx, &ds, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, d := range ds.Items {
		if n := ptr.Deref(d.Spec.Replicas, 1); n != 0 {
			t.Errorf("%s at %d replicas: a static response, the rollout, the crash or the operator's restart woke it", d.Name, n)
		}
	}
}

// restartOperatorLeader deletes the operator's leader pod (as a node drain
// or an eviction would) and waits until another operator pod holds the
// Lease and has reconciled every ElastiService in ns, its queue empty. It
// wants nothing written meanwhile: the resource versions of the
// ElastiServices, their Deployments and the proxy slices in ns are the
// same after as before (issue 43: no write for an ElastiService that did
// not change, nothing woken). It returns when the pod was deleted.
func restartOperatorLeader(t *testing.T, e *Env, ns string) time.Time {
	t.Helper()
	ctx := context.Background()
	var before map[string]string
	Eventually(t, time.Minute, time.Second, func(ctx context.Context) error {
		a, err := versionsIn(ctx, e, ns)
		if err != nil {
			return err
		}
		time.Sleep(5 * time.Second)
		b, err := versionsIn(ctx, e, ns)
		if err != nil {
			return err
		}
		if d := changedVersions(a, b); len(d) > 0 {
			return fmt.Errorf("still settling: %d objects changed in 5 s, e.g. %v", len(d), d[:min(len(d), 5)])
		}
		before = b
		return nil
	})

	old, err := e.OperatorLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	if err := e.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ElastiNamespace, Name: old}}); err != nil {
		t.Fatal(err)
	}
	var now string
	Eventually(t, 3*time.Minute, time.Second, func(ctx context.Context) error {
		leader, err := e.OperatorLeader(ctx)
		if err != nil {
			return err
		}
		now = leader
		if now == old {
			return fmt.Errorf("the Lease is still held by %q", now)
		}
		var pod corev1.Pod
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ElastiNamespace, Name: now}, &pod); err != nil {
			return err
		}
		m, err := e.PodMetrics(ctx, &pod, "8080")
		if err != nil {
			return err
		}
		reconciled := sumFamilyWhere(m["controller_runtime_reconcile_total"], "controller", "elastiservice")
		depth := sumFamilyWhere(m["workqueue_depth"], "name", "elastiservice")
		if reconciled < rolloutAsleep || depth > 0 {
			return fmt.Errorf("the new leader %s has reconciled %v times, %v queued", now, reconciled, depth)
		}
		return nil
	})
	t.Logf("operator leader %s deleted; %s leads and has reconciled all %d %s after", old, now, rolloutAsleep, time.Since(deleted).Round(100*time.Millisecond))
	time.Sleep(5 * time.Second) // what the reconciles might still write
	after, err := versionsIn(ctx, e, ns)
	if err != nil {
		t.Fatal(err)
	}
	if d := changedVersions(before, after); len(d) > 0 {
		t.Errorf("%d of %d objects written across the operator's restart, want none; e.g. %v", len(d), len(before), d[:min(len(d), 10)])
	} else {
		t.Logf("none of the %d ElastiServices, Deployments and proxy slices was written across the operator's restart", len(before))
	}
	return deleted
}

// versionsIn maps each ElastiService, Deployment and proxy slice in ns
// ("kind/name") to its resource version.
func versionsIn(ctx context.Context, e *Env, ns string) (map[string]string, error) {
	out := map[string]string{}
	var ess elastiv1alpha1.ElastiServiceList
	if err := e.Client.List(ctx, &ess, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	for _, o := range ess.Items {
		out["ElastiService/"+o.Name] = o.ResourceVersion
	}
	var ds appsv1.DeploymentList
	if err := e.Client.List(ctx, &ds, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	for _, o := range ds.Items {
		out["Deployment/"+o.Name] = o.ResourceVersion
	}
	proxy, err := e.Clientset.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: contract.LabelManagedBy + "=" + contract.ManagedBy})
	if err != nil {
		return nil, err
	}
	for _, o := range proxy.Items {
		out["EndpointSlice/"+o.Name] = o.ResourceVersion
	}
	return out, nil
}

// changedVersions lists the keys whose version differs, or that only one
// of a and b has, sorted.
func changedVersions(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if b[k] != v {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// crashSlack is how long after the proxy slices stop listing a crashed
// resolver its connections may still be refused: kube-proxy applies a
// slice change at its next sync, at most a second later when idle, several
// on this busy 2-CPU machine.
const crashSlack = 5 * time.Second

// crashBound is issue 43's goal for taking a crashed resolver out of every
// slice (measured by make bench at 10,000).
const crashBound = 30 * time.Second

type failure struct {
	at   time.Time
	what string
}

// crashedResolver is when a resolver was killed, and when the test first
// saw the proxy slices right again: none listing it, or it restarted and
// Ready.
type crashedResolver struct {
	killed, unlisted time.Time
}

// crashResolver SIGKILLs one ready resolver's process, waits until no proxy
// slice in ns lists it or it is restarted and Ready again (within
// crashBound), then until it is in every slice again.
func crashResolver(t *testing.T, e *Env, ns string) crashedResolver {
	t.Helper()
	ctx := context.Background()
	pods, err := e.Pods(ctx, ElastiNamespace, map[string]string{contract.LabelComponent: contract.ComponentResolver})
	if err != nil || len(pods) < 2 {
		t.Fatalf("resolver pods: %d, %v (the crash needs two)", len(pods), err)
	}
	victim := pods[0]
	restarts := restartCount(&victim)
	var c crashedResolver
	c.killed = time.Now()
	if err := KillContainer(&victim); err != nil {
		t.Fatal(err)
	}
	// The slices are right again once none lists the killed resolver, or
	// once the kubelet has restarted it and it is Ready again (a fast
	// restart can come before the operator's pass is done: the pass that
	// follows puts it back, and rightly).
	var how string
	Eventually(t, crashBound, 250*time.Millisecond, func(ctx context.Context) error {
		listing, _, err := proxySlicesIn(ctx, e, ns)
		if err != nil {
			return err
		}
		if listing[victim.Name] == 0 {
			how = "no proxy slice lists it"
			return nil
		}
		var pod corev1.Pod
		if err := e.Client.Get(ctx, client.ObjectKeyFromObject(&victim), &pod); err != nil {
			return err
		}
		if restartCount(&pod) > restarts && podReady(&pod) {
			how = fmt.Sprintf("it was restarted and Ready again while %d proxy slices still listed it", listing[victim.Name])
			return nil
		}
		return fmt.Errorf("%d proxy slices still list the killed resolver %s, not restarted yet", listing[victim.Name], victim.Name)
	})
	c.unlisted = time.Now()
	t.Logf("killed resolver %s: %s, %s after the kill", victim.Name, how, c.unlisted.Sub(c.killed).Round(100*time.Millisecond))
	Eventually(t, 3*time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
		listing, _, err := proxySlicesIn(ctx, e, ns)
		if err != nil {
			return err
		}
		if n := listing[victim.Name]; n < rolloutAsleep {
			return fmt.Errorf("%d of %d proxy slices list the restarted resolver %s", n, rolloutAsleep, victim.Name)
		}
		return nil
	})
	t.Logf("the killed resolver restarted and is in every proxy slice again %s after the kill", time.Since(c.killed).Round(100*time.Millisecond))
	return c
}

func restartCount(p *corev1.Pod) int32 {
	if len(p.Status.ContainerStatuses) == 0 {
		return 0
	}
	return p.Status.ContainerStatuses[0].RestartCount
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func scaleName(i int) string { return fmt.Sprintf("app-%04d", i) }

// createAtScale creates n Deployments at zero, their Services, and an
// ElastiService for each (idle trigger), 16 at a time; adjust may change
// the i-th ElastiService.
func createAtScale(t *testing.T, e *Env, ns string, n int, adjust func(i int, es *elastiv1alpha1.ElastiService)) {
	t.Helper()
	err := CreateInParallel(context.Background(), e.Client, 16, 0, n, func(i int) []client.Object {
		es := e.ElastiServiceFor(ns, scaleName(i), IdleQuery, estest.Service(scaleName(i)), estest.Deployment(scaleName(i)))
		adjust(i, es)
		return []client.Object{DemoAppDeployment(ns, scaleName(i), 0), DemoAppHTTPService(ns, scaleName(i)), es}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// deleteAtScale removes the Deployments first, so that the operator has no
// target to restore for each ElastiService it finalizes, then the
// ElastiServices, and waits for them to be gone.
func deleteAtScale(t *testing.T, e *Env, ns string) {
	ctx := context.Background()
	if err := e.Client.DeleteAllOf(ctx, &appsv1.Deployment{}, client.InNamespace(ns)); err != nil {
		t.Errorf("delete Deployments: %v", err)
	}
	if err := e.Client.DeleteAllOf(ctx, &elastiv1alpha1.ElastiService{}, client.InNamespace(ns)); err != nil {
		t.Errorf("delete ElastiServices: %v", err)
	}
	Eventually(t, 5*time.Minute, time.Second, func(ctx context.Context) error {
		var l elastiv1alpha1.ElastiServiceList
		if err := e.Client.List(ctx, &l, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(l.Items) > 0 {
			return fmt.Errorf("%d ElastiServices left", len(l.Items))
		}
		return nil
	})
}

// proxySlicesIn reads the proxy slices in ns: how many list each resolver
// pod, and how many have a ready endpoint.
func proxySlicesIn(ctx context.Context, e *Env, ns string) (byPod map[string]int, ready int, err error) {
	l, err := e.Clientset.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: contract.LabelManagedBy + "=" + contract.ManagedBy})
	if err != nil {
		return nil, 0, err
	}
	byPod = map[string]int{}
	for _, s := range l.Items {
		if readyIn(s) > 0 {
			ready++
		}
		for _, ep := range s.Endpoints {
			if ep.TargetRef != nil {
				byPod[ep.TargetRef.Name]++
			}
		}
	}
	return byPod, ready, nil
}

// getStatic GETs url and wants the static response.
func getStatic(c *http.Client, url string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(b)) != "asleep" {
		return fmt.Errorf("%d %q", resp.StatusCode, b)
	}
	return nil
}
