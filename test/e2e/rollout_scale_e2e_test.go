//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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

// TestResolverRolloutAtScale: 500 ElastiServices asleep on a Helm
// release installed from the chart as it was before its last change, and
// clients sending requests throughout: to 20 of the 500, half on new
// connections and half on kept-alive ones (static responses, so every
// request goes through a resolver and none wakes its target), and to one
// awake service in a second namespace. Then, one after another:
//
//   - the release's resolvers restarted as `kubectl rollout restart` does.
//     Each new resolver is in every proxy slice before an old one stops
//     being ready (the rollout's maxUnavailable 0), the operator rewrites
//     the 500 slices in one pass when the resolvers change, and an old
//     resolver keeps accepting until no slice lists it (docs/architecture.md,
//     "When the resolvers change"). Not one request fails.
//   - one resolver killed (SIGKILL, no drain): requests fail only until
//     kube-proxy has applied the slices without it, which must come within
//     30 s (crashResolver); the kubelet restarts it, and it is in every slice
//     again before the next phase.
//   - the operator's leader pod deleted: another takes over and reconciles
//     all 500 without writing anything (restartOperatorLeader).
//   - the release upgraded to this commit's chart, the CRD first as
//     docs/configuration.md says (upgradeAtScale): operator and resolvers
//     roll at once, no request fails, and no ElastiService or Deployment is
//     written.
//
// At the end the 500 are still at zero and the awake one at one replica.
// The shared install's operator is set aside meanwhile, as in
// TestTwoNamespacedInstallsSideBySide.
func TestResolverRolloutAtScale(t *testing.T) {
	e := Get(t)
	e.InstallElasti(t)
	ctx := context.Background()
	ns, awakeNS := e.NewNamespace(t), e.NewNamespace(t)
	rel := installPreviousRelease(t, e, ns, awakeNS)
	t.Cleanup(func() {
		// Before the release is uninstalled: its operator finalizes them.
		deleteAtScale(t, e, ns)
		deleteAtScale(t, e, awakeNS)
	})

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
	const awake = "awake"
	e.Create(t, DemoAppDeployment(awakeNS, awake, 1), DemoAppHTTPService(awakeNS, awake))
	Eventually(t, 5*time.Minute, time.Second, func(ctx context.Context) error {
		_, n, err := proxySlicesIn(ctx, e, ns)
		if err == nil && n < rolloutAsleep {
			err = fmt.Errorf("%d of %d proxy slices list a resolver", n, rolloutAsleep)
		}
		return err
	})
	t.Logf("all %d asleep behind the resolvers %s after the first create", rolloutAsleep, time.Since(start).Round(time.Second))
	e.WaitReadyEndpoints(t, awakeNS, awake, 1, 2*time.Minute)
	e.Create(t, e.ElastiServiceFor(awakeNS, awake, BusyQuery))
	e.WaitAwake(t, awakeNS, awake, 2*time.Minute)

	type target struct{ url, want string }
	var targets []target
	for i := range 20 {
		var svc corev1.Service
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: scaleName(i)}, &svc); err != nil {
			t.Fatal(err)
		}
		targets = append(targets, target{strings.TrimSuffix(httpURL(svc.Spec.ClusterIP, DemoHTTPPort), "/") + path, "asleep"})
	}
	var svc corev1.Service
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: awakeNS, Name: awake}, &svc); err != nil {
		t.Fatal(err)
	}
	targets = append(targets, target{httpURL(svc.Spec.ClusterIP, DemoHTTPPort), "hello from " + awake + "-"})
	// Every target answers before the traffic starts: kube-proxy programs
	// the awake service's new endpoint a moment after it is ready.
	Eventually(t, time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
		for _, tg := range targets {
			if err := GetPrefix(e.HTTPClient(), tg.url, tg.want); err != nil {
				return fmt.Errorf("%s: %w", tg.url, err)
			}
		}
		return nil
	})
	old, err := e.Pods(ctx, rel.ns, map[string]string{contract.LabelComponent: contract.ComponentResolver})
	if err != nil || len(old) == 0 {
		t.Fatalf("resolver pods: %d, %v", len(old), err)
	}

	stop := make(chan struct{})
	var sent, failed atomic.Int64
	var mu sync.Mutex
	var failures []failure
	var wg sync.WaitGroup
	for i, tg := range targets {
		c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: e.Dialer.DialContext, DisableKeepAlives: i%2 == 0}}
		wg.Go(func() {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				sent.Add(1)
				if err := GetPrefix(c, tg.url, tg.want); err != nil {
					failed.Add(1)
					mu.Lock()
					failures = append(failures, failure{at: time.Now(), what: fmt.Sprintf("%s (keep-alive %v): %v", tg.url, i%2 == 1, err)})
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
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: rel.ns, Name: rel.resolver()}}
	if err := e.Client.Patch(ctx, d, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	unlisted := waitResolversReplaced(t, e, rel, ns, old, restartAt)
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
	victim := crashResolver(t, e, rel.ns, ns)
	time.Sleep(2 * time.Second) // traffic once it is back, too

	// The operator's leader restarted, then the upgrade, traffic still on.
	opRestart := restartOperatorLeader(t, e, rel.ns, ns)
	upgradeAtScale(t, e, rel, ns)
	time.Sleep(2 * time.Second) // traffic after the upgrade too
	close(stop)
	wg.Wait()

	t.Logf("%d requests to 20 of the %d asleep and to one awake service during the rollout, the crash, the operator's restart and the upgrade, %d failed", sent.Load(), rolloutAsleep, failed.Load())
	for i, f := range failures {
		switch {
		case i < rolloutFailures:
			t.Errorf("failed during the rollout: %s %s", f.at.Format("15:04:05.000"), f.what)
		case !f.at.Before(opRestart):
			t.Errorf("failed during the operator's restart or the upgrade: %s %s", f.at.Format("15:04:05.000"), f.what)
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
			t.Errorf("%s at %d replicas: a static response, the rollout, the crash, the operator's restart or the upgrade woke it", d.Name, n)
		}
	}
	var aw appsv1.Deployment
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: awakeNS, Name: awake}, &aw); err != nil {
		t.Fatal(err)
	} else if n := ptr.Deref(aw.Spec.Replicas, 1); n != 1 {
		t.Errorf("the awake service, busy and sent requests throughout, is at %d replicas, want 1", n)
	}
}

// helmRelease is a release of the chart the test installed.
type helmRelease struct {
	h      *helmCLI
	name   string
	ns     string
	values string // the values file, for the install and the upgrade
}

func (r *helmRelease) operator() string { return r.name + "-operator" }
func (r *helmRelease) resolver() string { return r.name + "-resolver" }

// installPreviousRelease sets the shared operator aside and installs the
// chart as it was before its last change (previousChart) into a namespace
// of its own, watching the given namespaces, with this commit's images (the
// previous commit's are not built) and values close to the shared
// install's: triggers polled every second, the local Prometheus. The
// resolvers keep the chart's drain and probe settings. The release is
// uninstalled at cleanup.
func installPreviousRelease(t *testing.T, e *Env, watch ...string) *helmRelease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	chart, rev := previousChart(t, e.Cluster.RepoRoot)
	if out, err := exec.Command("git", "-C", e.Cluster.RepoRoot, "diff", "--stat", rev, "--", "charts/elasti").Output(); err == nil {
		t.Logf("the chart from %s to this checkout:\n%s", rev, out)
	}
	relNS := e.NewNamespace(t)
	rel := &helmRelease{
		h:      &helmCLI{bin: buildHelm(t, e.Cluster.RepoRoot), kubeconfig: e.Cluster.Kubeconfig(), home: t.TempDir(), dir: e.Cluster.RepoRoot},
		name:   "elasti-" + strings.TrimPrefix(relNS, "e2e-"),
		ns:     relNS,
		values: filepath.Join(t.TempDir(), "values.yaml"),
	}
	values := fmt.Sprintf(`operator:
  image: {repository: elasti/operator, tag: dev, pullPolicy: IfNotPresent}
  pollingInterval: 1s
  gracePeriod: 2s
resolver:
  image: {repository: elasti/resolver, tag: dev, pullPolicy: IfNotPresent}
prometheusAddress: %q
watchNamespaces: [%s]
`, e.Cluster.PrometheusURL(), strings.Join(watch, ", "))
	if err := os.WriteFile(rel.values, []byte(values), 0o600); err != nil {
		t.Fatal(err)
	}
	setSharedOperatorAside(ctx, t, e)
	t.Cleanup(func() {
		if out, err := rel.h.run(context.Background(), "uninstall", rel.name, "--namespace", rel.ns, "--wait", "--timeout", "2m"); err != nil {
			t.Errorf("helm uninstall %s: %v\n%s", rel.name, err, out)
		}
	})
	start := time.Now()
	if out, err := rel.h.run(ctx, "install", rel.name, chart, "--namespace", rel.ns, "-f", rel.values, "--timeout", "4m"); err != nil {
		t.Fatalf("helm install %s (the chart at %s): %v\n%s", rel.name, rev, err, out)
	}
	if err := e.WaitRolledOut(ctx, rel.ns, rel.operator(), rel.resolver()); err != nil {
		t.Fatalf("release %s did not become ready: %v", rel.name, err)
	}
	t.Logf("release %s of the chart at %s ready %s after helm install started", rel.name, rev, time.Since(start).Round(100*time.Millisecond))
	return rel
}

// waitResolversReplaced waits until every pod in old is gone (its drain
// over) and the release's resolver Deployment is rolled out. It returns,
// for each old pod, how long after since the test first saw no proxy slice
// in ns list it.
func waitResolversReplaced(t *testing.T, e *Env, rel *helmRelease, ns string, old []corev1.Pod, since time.Time) map[string]time.Duration {
	t.Helper()
	unlisted := map[string]time.Duration{}
	Eventually(t, 5*time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
		listing, _, err := proxySlicesIn(ctx, e, ns)
		if err != nil {
			return err
		}
		var left []string
		for _, p := range old {
			if _, done := unlisted[p.Name]; !done && listing[p.Name] == 0 {
				unlisted[p.Name] = time.Since(since)
			}
			var pod corev1.Pod
			if err := e.Client.Get(ctx, client.ObjectKeyFromObject(&p), &pod); err == nil && pod.UID == p.UID {
				left = append(left, p.Name)
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("old resolver pods still running: %v", left)
		}
		return e.WaitRolledOut(ctx, rel.ns, rel.resolver())
	})
	return unlisted
}

// restartOperatorLeader deletes the leader pod of the operator in opNS (as
// a node drain or an eviction would) and waits until another operator pod
// holds the Lease and has reconciled every ElastiService in ns, its queue
// empty. It wants nothing written meanwhile: the resource versions of the
// ElastiServices, their Deployments and the proxy slices in ns are the
// same after as before (issue 43: no write for an ElastiService that did
// not change, nothing woken). It returns when the pod was deleted.
func restartOperatorLeader(t *testing.T, e *Env, opNS, ns string) time.Time {
	t.Helper()
	ctx := context.Background()
	before := settledVersions(t, e, ns)
	old, err := e.OperatorLeaderIn(ctx, opNS)
	if err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	if err := e.Client.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: opNS, Name: old}}); err != nil {
		t.Fatal(err)
	}
	now := waitNewLeaderCaughtUp(t, e, opNS, old)
	t.Logf("operator leader %s deleted; %s leads and has reconciled all %d %s after", old, now, rolloutAsleep, time.Since(deleted).Round(100*time.Millisecond))
	time.Sleep(5 * time.Second) // what the reconciles might still write
	after, err := e.VersionsIn(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	if d := ChangedVersions(before, after); len(d) > 0 {
		t.Errorf("%d of %d objects written across the operator's restart, want none; e.g. %v", len(d), len(before), d[:min(len(d), 10)])
	} else {
		t.Logf("none of the %d ElastiServices, Deployments and proxy slices was written across the operator's restart", len(before))
	}
	return deleted
}

// upgradeAtScale upgrades rel to this checkout's chart, the way
// docs/configuration.md ("Upgrading") says: the CRD with `kubectl apply
// --server-side --force-conflicts`, then `helm upgrade` with the install's
// values. The images stay the same, so the upgrade also sets a pod
// annotation on the operator and the resolvers, which rolls both as a new
// image would. It waits until the old resolvers are gone and a new
// operator leader has reconciled every ElastiService in ns, and wants no
// ElastiService or Deployment in ns written; the proxy slices are
// rewritten with the new resolvers, and it logs how many.
func upgradeAtScale(t *testing.T, e *Env, rel *helmRelease, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	before := settledVersions(t, e, ns)
	oldLeader, err := e.OperatorLeaderIn(ctx, rel.ns)
	if err != nil {
		t.Fatal(err)
	}
	oldResolvers, err := e.Pods(ctx, rel.ns, map[string]string{contract.LabelComponent: contract.ComponentResolver})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := e.Cluster.Kubectl(ctx, "", "apply", "--server-side", "--force-conflicts", "-f", filepath.Join(e.Cluster.RepoRoot, "charts", "elasti", "crds"))
	if err != nil {
		t.Fatalf("apply the chart's CRD: %v\n%s", err, out)
	}
	t.Logf("the chart's CRD: %s", strings.TrimSpace(out))
	roll := fmt.Sprint(start.Unix())
	out, err = rel.h.run(ctx, "upgrade", rel.name, filepath.Join("charts", "elasti"), "--namespace", rel.ns, "-f", rel.values,
		"--set-string", "operator.podAnnotations.e2e-upgrade="+roll+",resolver.podAnnotations.e2e-upgrade="+roll,
		"--wait", "--timeout", "5m")
	if err != nil {
		t.Fatalf("helm upgrade %s: %v\n%s", rel.name, err, out)
	}
	t.Logf("helm upgrade %s done %s after the CRD's apply", rel.name, time.Since(start).Round(100*time.Millisecond))
	waitResolversReplaced(t, e, rel, ns, oldResolvers, start)
	now := waitNewLeaderCaughtUp(t, e, rel.ns, oldLeader)
	t.Logf("upgraded: old resolvers gone, new leader %s has reconciled all %d, %s after the start", now, rolloutAsleep, time.Since(start).Round(100*time.Millisecond))
	time.Sleep(5 * time.Second) // what the reconciles might still write
	after, err := e.VersionsIn(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	var written, slices []string
	for _, k := range ChangedVersions(before, after) {
		if strings.HasPrefix(k, "EndpointSlice/") {
			slices = append(slices, k)
		} else {
			written = append(written, k)
		}
	}
	if len(written) > 0 {
		t.Errorf("%d ElastiServices or Deployments written across the upgrade, want none; e.g. %v", len(written), written[:min(len(written), 10)])
	}
	t.Logf("across the upgrade: %d ElastiServices and Deployments written, %d of %d proxy slices rewritten with the new resolvers", len(written), len(slices), rolloutAsleep)
}

// settledVersions waits until nothing in ns has been written for 5 s and
// returns the versions (Env.VersionsIn).
func settledVersions(t *testing.T, e *Env, ns string) map[string]string {
	t.Helper()
	var settled map[string]string
	Eventually(t, time.Minute, time.Second, func(ctx context.Context) error {
		a, err := e.VersionsIn(ctx, ns)
		if err != nil {
			return err
		}
		time.Sleep(5 * time.Second)
		b, err := e.VersionsIn(ctx, ns)
		if err != nil {
			return err
		}
		if d := ChangedVersions(a, b); len(d) > 0 {
			return fmt.Errorf("still settling: %d objects changed in 5 s, e.g. %v", len(d), d[:min(len(d), 5)])
		}
		settled = b
		return nil
	})
	return settled
}

// waitNewLeaderCaughtUp waits until an operator pod in opNS other than old
// holds the Lease and has reconciled at least rolloutAsleep ElastiServices,
// its queue empty, and returns its name.
func waitNewLeaderCaughtUp(t *testing.T, e *Env, opNS, old string) string {
	t.Helper()
	var now string
	Eventually(t, 3*time.Minute, time.Second, func(ctx context.Context) error {
		leader, err := e.OperatorLeaderIn(ctx, opNS)
		if err != nil {
			return err
		}
		now = leader
		if now == old {
			return fmt.Errorf("the Lease is still held by %q", now)
		}
		var pod corev1.Pod
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: opNS, Name: now}, &pod); err != nil {
			return err
		}
		m, err := e.PodMetrics(ctx, &pod, "8080")
		if err != nil {
			return err
		}
		reconciled := SumFamilyWhere(m["controller_runtime_reconcile_total"], "controller", "elastiservice")
		depth := SumFamilyWhere(m["workqueue_depth"], "name", "elastiservice")
		if reconciled < rolloutAsleep || depth > 0 {
			return fmt.Errorf("the new leader %s has reconciled %v times, %v queued", now, reconciled, depth)
		}
		return nil
	})
	return now
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

// crashResolver SIGKILLs the process of one ready resolver in resolverNS,
// waits until no proxy slice in ns lists it or it is restarted and Ready
// again (within crashBound), then until it is in every slice again.
func crashResolver(t *testing.T, e *Env, resolverNS, ns string) crashedResolver {
	t.Helper()
	ctx := context.Background()
	pods, err := e.Pods(ctx, resolverNS, map[string]string{contract.LabelComponent: contract.ComponentResolver})
	if err != nil || len(pods) < 2 {
		t.Fatalf("resolver pods: %d, %v (the crash needs two)", len(pods), err)
	}
	victim := pods[0]
	restarts := RestartCount(&victim)
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
		if RestartCount(&pod) > restarts && PodReady(&pod) {
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
