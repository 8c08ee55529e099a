//go:build bench

package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/bench/report"
	"elasti.dev/elasti/test/e2e"
)

// Churn at scale (issue 43): with the 10,000 asleep and clients sending
// requests to 20 of them throughout, the resolvers are rolled as `kubectl
// rollout restart` does, one of them is killed (SIGKILL), the operator's
// pod is deleted, and then both are replaced at once, as an upgrade does
// (docs/benchmarks.md, "Churn at scale"). TestResolverRolloutAtScale runs
// the same at 500, with a real `helm upgrade`.

const (
	secChurn = "Scale: 10,000 asleep while the resolvers and the operator are replaced"
	// churnClients is how many of the 10,000 are sent requests.
	churnClients = 20
	// churnSlack is how long after the proxy slices stop listing a killed
	// resolver its connections may still be refused: kube-proxy's next
	// sync, which takes seconds with 10,000 Services.
	churnSlack = 10 * time.Second
)

var (
	goalNoFailure  = &report.Goal{Stat: "median", Max: 1} // none
	goalCrashBound = &report.Goal{Stat: "median", Max: 30}
	goalNoWrite    = &report.Goal{Stat: "median", Max: 1} // none
)

// churnTraffic sends a GET every 100 ms to each of the static responses,
// half on new connections and half on kept-alive ones, and records when a
// request failed.
type churnTraffic struct {
	stop chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	sent int
	fail []failure
}

// failure is one failed request: when, and why.
type failure struct {
	at  time.Time
	err string
}

func startChurnTraffic(urls []string) *churnTraffic {
	tr := &churnTraffic{stop: make(chan struct{})}
	for i, url := range urls {
		c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: kube.Dialer.DialContext, DisableKeepAlives: i%2 == 0}}
		tr.wg.Go(func() {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				err := e2e.GetPrefix(c, url, "asleep")
				tr.mu.Lock()
				tr.sent++
				if err != nil {
					tr.fail = append(tr.fail, failure{at: time.Now(), err: err.Error()})
				}
				tr.mu.Unlock()
				select {
				case <-tr.stop:
					return
				case <-tick.C:
				}
			}
		})
	}
	return tr
}

// failedBetween counts the failures in [from, to].
func (tr *churnTraffic) failedBetween(from, to time.Time) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, f := range tr.fail {
		if !f.at.Before(from) && !f.at.After(to) {
			n++
		}
	}
	return n
}

// end stops the clients and returns how many requests they sent and how
// many failed.
func (tr *churnTraffic) end() (sent, failed int) {
	close(tr.stop)
	tr.wg.Wait()
	return tr.sent, len(tr.fail)
}

// churnAtScale runs the churn once the 10,000 are asleep and watched.
func (b *bench) churnAtScale(ctx context.Context, watch *proxyWatch) error {
	// Two resolvers, so that one can be killed with another ready, with
	// the drain flags and grace period of config/default (the bench's
	// overlay shortens them for the figures before): a resolver drains
	// until no slice lists it.
	logf("churn: two resolvers, with config/default's drain")
	oldPods, err := kube.Pods(ctx, e2e.ElastiNamespace, resolverPods)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := b.resolversAsDefault(ctx, 2); err != nil {
		return err
	}
	pods, err := waitResolversEverywhere(ctx, watch, 2, oldPods)
	if err != nil {
		b.add(skipped(secChurn, "a second resolver in all 10,000 proxy slices", "s", nil, err.Error()))
		return err
	}
	b.add(fig(secChurn, "two resolvers in all 10,000 proxy slices", "s", []float64{time.Since(start).Seconds()}, nil,
		"from the update of the resolver Deployment (2 replicas, config/default's drain flags and grace period: a rollout of its own) until both new pods were in every proxy slice, as the bench's watch saw them"))

	// 20 of the 10,000 answer from a static response, so every request
	// goes through a resolver and none wakes its target.
	var urls []string
	for i := range churnClients {
		name := fmt.Sprintf("app-%05d", i)
		p := `{"spec":{"proxy":{"staticResponses":[{"name":"ping","match":{"path":{"exact":"/ping"}},"respond":{"body":"asleep\n"}}]}}}`
		if err := kube.Client.Patch(ctx, esRef(nsScale, name), client.RawPatch(types.MergePatchType, []byte(p))); err != nil {
			return err
		}
		ip, err := clusterIP(ctx, nsScale, name)
		if err != nil {
			return err
		}
		urls = append(urls, fmt.Sprintf("http://%s:%d/ping", ip, servicePort))
	}
	if err := e2e.Poll(ctx, time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
		for _, u := range urls {
			if err := e2e.GetPrefix(kube.HTTPClient(), u, "asleep"); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("churn: the static responses: %w", err)
	}
	tr := startChurnTraffic(urls)
	from := time.Now()
	ended := false
	defer func() {
		if !ended {
			tr.end()
		}
	}()
	time.Sleep(2 * time.Second)

	// The rollout.
	restart := time.Now()
	logf("churn: rolling the resolvers")
	if err := patchResolvers(ctx, fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, restart.Format(time.RFC3339))); err != nil {
		return err
	}
	pods, err = waitResolversEverywhere(ctx, watch, 2, pods)
	if err != nil {
		b.add(skipped(secChurn, "failed requests during the resolvers' rollout", "requests", goalNoFailure, err.Error()))
		return err
	}
	rolloutDone := time.Now()
	time.Sleep(2 * time.Second)
	rolled := time.Now()
	failed := tr.failedBetween(from, rolled)
	b.add(fig(secChurn, "resolvers' rollout: until the old ones are gone", "s", []float64{rolloutDone.Sub(restart).Seconds()}, nil,
		"from the restartedAt patch until both old pods were deleted (each drains until no proxy slice lists it) and both new ones were in every proxy slice"))
	b.add(fig(secChurn, "failed requests during the resolvers' rollout", "requests", []float64{float64(failed)}, goalNoFailure,
		fmt.Sprintf("GETs of a static response of %d of the 10,000, each every 100 ms, half on new connections and half kept alive, from 2 s before the patch to 2 s after; %s", churnClients, tr.lastFailure(from, rolled))))

	// The crash.
	victim := pods[0]
	logf("churn: killing resolver %s", victim.Name)
	killed := time.Now()
	if err := e2e.KillContainer(&victim); err != nil {
		return err
	}
	var how string
	err = e2e.Poll(ctx, 3*time.Minute, 100*time.Millisecond, func(ctx context.Context) error {
		if n := watch.listing(victim.Name); n == 0 {
			how = "no proxy slice listed it"
			return nil
		}
		var p corev1.Pod
		if err := kube.Client.Get(ctx, client.ObjectKeyFromObject(&victim), &p); err != nil {
			return err
		}
		if e2e.RestartCount(&p) > e2e.RestartCount(&victim) && e2e.PodReady(&p) {
			how = "the kubelet had restarted it and it was Ready again"
			return nil
		}
		return fmt.Errorf("%d proxy slices list the killed resolver", watch.listing(victim.Name))
	})
	unlisted := time.Now()
	if err != nil {
		b.add(skipped(secChurn, "a killed resolver: until the proxy slices are right again", "s", goalCrashBound, err.Error()))
		return err
	}
	b.add(fig(secChurn, "a killed resolver: until the proxy slices are right again", "s", []float64{unlisted.Sub(killed).Seconds()}, goalCrashBound,
		fmt.Sprintf("SIGKILL of one resolver's process until %s, as the bench's watch saw the 10,000 proxy slices", how)))
	if _, err := waitResolversEverywhere(ctx, watch, 2, nil); err != nil {
		return err
	}
	time.Sleep(2 * time.Second)
	back := time.Now()
	outside := tr.failedBetween(rolled, killed) + tr.failedBetween(unlisted.Add(churnSlack), back)
	b.add(fig(secChurn, "a killed resolver: failed requests outside the kill until the slices are right + 10 s", "requests", []float64{float64(outside)}, goalNoFailure,
		fmt.Sprintf("%d failed inside (kube-proxy applies a slice change at its next sync, seconds with 10,000 Services), %d outside, until the killed resolver was in every slice again", tr.failedBetween(killed, unlisted.Add(churnSlack)), outside)))

	// The operator restarted, once nothing in nsScale has been written
	// for 5 s (the killed resolver's return is the last write).
	before, err := quietVersions(ctx, 10*time.Minute)
	if err != nil {
		return fmt.Errorf("churn: before the operator's restart: %w", err)
	}
	_, op, err := componentPID(ctx, operatorPods)
	if err != nil {
		return err
	}
	logf("churn: deleting the operator's pod %s", op.Name)
	deleted := time.Now()
	if err := kube.Client.Delete(ctx, op); err != nil {
		return err
	}
	now, err := newOperatorCaughtUp(ctx, op.Name)
	if err != nil {
		b.add(skipped(secChurn, "operator restarted: until the new pod has reconciled all 10,000", "s", nil, err.Error()))
		return err
	}
	caughtUp := time.Now()
	b.add(fig(secChurn, "operator restarted: until the new pod has reconciled all 10,000", "s", []float64{caughtUp.Sub(deleted).Seconds()}, nil,
		fmt.Sprintf("one replica (the bench's install): from the delete of its pod until %s had controller_runtime_reconcile_total of 10,000 or more and an empty queue; the pod's start is in it", now.Name)))
	time.Sleep(5 * time.Second)
	after, err := kube.VersionsIn(ctx, nsScale)
	if err != nil {
		return err
	}
	written := e2e.ChangedVersions(before, after)
	restarted := time.Now()
	b.add(fig(secChurn, "operator restarted: ElastiServices, Deployments and proxy slices written", "objects", []float64{float64(len(written))}, goalNoWrite,
		"resource versions of the 30,000 before the delete and 5 s after the new pod caught up; "+examples(written, 5)))
	b.add(fig(secChurn, "operator restarted: failed requests", "requests", []float64{float64(tr.failedBetween(deleted, restarted))}, goalNoFailure,
		"from the delete until 5 s after the new pod caught up; "+tr.lastFailure(deleted, restarted)))

	// What an upgrade does to the cluster: the CRD applied again and both
	// Deployments' pod templates changed at once, as `helm upgrade` with
	// new images does (the bench installs with kustomize;
	// TestResolverRolloutAtScale runs `helm upgrade` itself, at 500).
	if before, err = quietVersions(ctx, 10*time.Minute); err != nil {
		return fmt.Errorf("churn: before the upgrade: %w", err)
	}
	if _, op, err = componentPID(ctx, operatorPods); err != nil {
		return err
	}
	oldResolvers, err := kube.Pods(ctx, e2e.ElastiNamespace, resolverPods)
	if err != nil {
		return err
	}
	logf("churn: upgrading (the CRD applied again, both pod templates changed)")
	upgrade := time.Now()
	if _, err := b.cfg.Kubectl(ctx, "", "apply", "--server-side", "--force-conflicts", "-f", filepath.Join(b.cfg.RepoRoot, "config", "crd", "bases")); err != nil {
		return fmt.Errorf("churn: apply the CRD: %w", err)
	}
	annotate := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"elasti.dev/bench-upgrade":%q}}}}}`, upgrade.Format(time.RFC3339Nano))
	for _, name := range []string{e2e.OperatorDeployment, e2e.ResolverDeployment} {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: e2e.ElastiNamespace, Name: name}}
		if err := kube.Client.Patch(ctx, d, client.RawPatch(types.MergePatchType, []byte(annotate))); err != nil {
			return err
		}
	}
	if now, err = newOperatorCaughtUp(ctx, op.Name); err != nil {
		b.add(skipped(secChurn, "upgrade: until the old resolvers are gone and the new operator has reconciled all 10,000", "s", nil, err.Error()))
		return err
	}
	opDone := time.Since(upgrade)
	if _, err := waitResolversEverywhere(ctx, watch, 2, oldResolvers); err != nil {
		b.add(skipped(secChurn, "upgrade: until the old resolvers are gone and the new operator has reconciled all 10,000", "s", nil, err.Error()))
		return err
	}
	upgraded := time.Now()
	b.add(fig(secChurn, "upgrade: until the old resolvers are gone and the new operator has reconciled all 10,000", "s", []float64{upgraded.Sub(upgrade).Seconds()}, nil,
		fmt.Sprintf("from the CRD's apply until both new resolvers were in every proxy slice with the old ones gone; the new operator %s had caught up after %.1f s", now.Name, opDone.Seconds())))
	time.Sleep(5 * time.Second)
	if after, err = kube.VersionsIn(ctx, nsScale); err != nil {
		return err
	}
	var objects, rewritten []string
	for _, k := range e2e.ChangedVersions(before, after) {
		if strings.HasPrefix(k, "EndpointSlice/") {
			rewritten = append(rewritten, k)
		} else {
			objects = append(objects, k)
		}
	}
	b.add(fig(secChurn, "upgrade: ElastiServices and Deployments written", "objects", []float64{float64(len(objects))}, goalNoWrite,
		fmt.Sprintf("resource versions of the 20,000 before the apply and 5 s after the resolvers were replaced; %s; %d of the 10,000 proxy slices were rewritten (they list the new resolvers)", examples(objects, 5), len(rewritten))))
	upgradeEnd := time.Now()
	upgradeFailed := tr.failedBetween(upgrade, upgradeEnd)
	sent, failedAll := tr.end()
	ended = true
	b.add(fig(secChurn, "upgrade: failed requests", "requests", []float64{float64(upgradeFailed)}, goalNoFailure,
		fmt.Sprintf("from the CRD's apply until 5 s after the resolvers were replaced; %d requests sent in all, %d failed (rollout, crash, restart and upgrade together); %s", sent, failedAll, tr.lastFailure(upgrade, upgradeEnd))))
	return nil
}

// quietVersions waits up to within until nothing in nsScale has been
// written for 5 s, and returns the resource versions then
// (kube.VersionsIn).
func quietVersions(ctx context.Context, within time.Duration) (map[string]string, error) {
	var quiet map[string]string
	err := e2e.Poll(ctx, within, time.Second, func(ctx context.Context) error {
		a, err := kube.VersionsIn(ctx, nsScale)
		if err != nil {
			return err
		}
		time.Sleep(5 * time.Second)
		if quiet, err = kube.VersionsIn(ctx, nsScale); err != nil {
			return err
		}
		if d := e2e.ChangedVersions(a, quiet); len(d) > 0 {
			return fmt.Errorf("%d objects written in 5 s, e.g. %v", len(d), d[:min(len(d), 3)])
		}
		return nil
	})
	return quiet, err
}

// newOperatorCaughtUp waits until the one running operator pod is not old
// and has reconciled all scaleAll ElastiServices with an empty queue.
func newOperatorCaughtUp(ctx context.Context, old string) (*corev1.Pod, error) {
	var now *corev1.Pod
	err := e2e.Poll(ctx, 10*time.Minute, time.Second, func(ctx context.Context) error {
		_, p, err := componentPID(ctx, operatorPods)
		if err != nil {
			return err
		}
		if p.Name == old {
			return fmt.Errorf("the old operator pod %s is still running", p.Name)
		}
		now = p
		m, err := kube.PodMetrics(ctx, p, "8080")
		if err != nil {
			return err
		}
		done := e2e.SumFamilyWhere(m["controller_runtime_reconcile_total"], "controller", "elastiservice")
		depth := e2e.SumFamilyWhere(m["workqueue_depth"], "name", "elastiservice")
		if done < scaleAll || depth > 0 {
			return fmt.Errorf("the new operator %s has reconciled %.0f times, %.0f queued", p.Name, done, depth)
		}
		return nil
	})
	return now, err
}

// lastFailure describes the last request that failed in [from, to], for
// a note.
func (tr *churnTraffic) lastFailure(from, to time.Time) string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, f := range slices.Backward(tr.fail) {
		if !f.at.Before(from) && !f.at.After(to) {
			return "the last failure: " + f.err
		}
	}
	return "none failed"
}

// examples lists up to n of keys for a note, or says there are none.
func examples(keys []string, n int) string {
	if len(keys) == 0 {
		return "none"
	}
	return "e.g. " + strings.Join(keys[:min(len(keys), n)], ", ")
}

// resolversAsDefault sets the resolver Deployment to replicas, with the
// --drain-* flags and terminationGracePeriodSeconds of
// config/resolver/deployment.yaml, what `kubectl apply -k config/default`
// installs.
func (b *bench) resolversAsDefault(ctx context.Context, replicas int32) error {
	raw, err := os.ReadFile(filepath.Join(b.cfg.RepoRoot, "config", "resolver", "deployment.yaml"))
	if err != nil {
		return err
	}
	var def appsv1.Deployment
	if err := yaml.Unmarshal(raw, &def); err != nil {
		return fmt.Errorf("config/resolver/deployment.yaml: %w", err)
	}
	if len(def.Spec.Template.Spec.Containers) == 0 || def.Spec.Template.Spec.TerminationGracePeriodSeconds == nil {
		return fmt.Errorf("config/resolver/deployment.yaml: no container or no terminationGracePeriodSeconds")
	}
	drain := map[string]string{} // flag name: the whole argument
	for _, a := range def.Spec.Template.Spec.Containers[0].Args {
		if name, _, ok := strings.Cut(a, "="); ok && strings.HasPrefix(name, "--drain-") {
			drain[name] = a
		}
	}
	if len(drain) == 0 {
		return fmt.Errorf("config/resolver/deployment.yaml: no --drain-* flag")
	}
	d := &appsv1.Deployment{}
	if err := kube.Client.Get(ctx, types.NamespacedName{Namespace: e2e.ElastiNamespace, Name: e2e.ResolverDeployment}, d); err != nil {
		return err
	}
	c := &d.Spec.Template.Spec.Containers[0]
	var args []string
	for _, a := range c.Args {
		if name, _, _ := strings.Cut(a, "="); drain[name] == "" {
			args = append(args, a)
		}
	}
	for _, a := range drain {
		args = append(args, a)
	}
	slices.Sort(args[len(args)-len(drain):])
	c.Args = args
	d.Spec.Replicas = &replicas
	d.Spec.Template.Spec.TerminationGracePeriodSeconds = def.Spec.Template.Spec.TerminationGracePeriodSeconds
	logf("churn: resolver args %v, grace %ds", c.Args, *d.Spec.Template.Spec.TerminationGracePeriodSeconds)
	return kube.Client.Update(ctx, d)
}

// patchResolvers merge-patches the resolver Deployment.
func patchResolvers(ctx context.Context, patch string) error {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: e2e.ElastiNamespace, Name: e2e.ResolverDeployment}}
	return kube.Client.Patch(ctx, d, client.RawPatch(types.MergePatchType, []byte(patch)))
}

// waitResolversEverywhere waits until none of old exists any more, want
// resolver pods run and are Ready, and the watch sees each of them in all
// scaleAll proxy slices; it returns those pods.
func waitResolversEverywhere(ctx context.Context, watch *proxyWatch, want int, old []corev1.Pod) ([]corev1.Pod, error) {
	var ready []corev1.Pod
	err := e2e.Poll(ctx, 10*time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
		pods, err := kube.Pods(ctx, e2e.ElastiNamespace, resolverPods)
		if err != nil {
			return err
		}
		ready = ready[:0]
		for _, p := range pods {
			for _, o := range old {
				if p.UID == o.UID {
					return fmt.Errorf("old resolver %s still running", p.Name)
				}
			}
			if p.DeletionTimestamp != nil {
				return fmt.Errorf("resolver %s still terminating", p.Name)
			}
			if !e2e.PodReady(&p) {
				return fmt.Errorf("resolver %s not Ready", p.Name)
			}
			if n := watch.listing(p.Name); n < scaleAll {
				return fmt.Errorf("resolver %s in %d of %d proxy slices", p.Name, n, scaleAll)
			}
			ready = append(ready, p)
		}
		if len(ready) != want {
			return fmt.Errorf("%d resolvers, want %d", len(ready), want)
		}
		return nil
	})
	return ready, err
}

func esRef(ns, name string) *elastiv1alpha1.ElastiService {
	return &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}
