//go:build bench

package main

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"elasti.dev/elasti/bench/report"
	"elasti.dev/elasti/internal/testenv/estest"
	"elasti.dev/elasti/test/e2e"
)

// Scale: Deployments at zero, each with a Service and an ElastiService, all
// in proxy mode on one resolver; 1,000 first, then 9,000 more up to 10,000
// (docs/benchmarks.md, "Scale"). At each step: how long until every one is
// in proxy mode, the RSS of the operator and of the resolver, and the API
// traffic of a steady minute in which nothing changes.

const (
	secScale    = "Scale: 1,000 ElastiServices, Deployments at 0"
	secScale10k = "Scale: 10,000 ElastiServices, Deployments at 0"
	scaleFirst  = 1000
	scaleAll    = 10000
	// steadyWindow is the quiet minute whose API requests are counted.
	steadyWindow = time.Minute
)

// The goals of the 10,000 step (issue 43).
var (
	goalProxyAfterLast = &report.Goal{Stat: "median", Max: 60}
	goalOperatorRSS    = &report.Goal{Stat: "median", Max: 300}
	goalResolverRSS    = &report.Goal{Stat: "median", Max: 100}
	goalSteadyWrites   = &report.Goal{Stat: "median", Max: 1} // none
	goalReadGrowth     = &report.Goal{Stat: "median", Max: 1.5}
)

func (b *bench) scale(ctx context.Context) error {
	// The cold app stays: the cold start at scale wakes it.
	for _, ns := range []string{nsHPA, nsBurst} {
		if err := deleteAllES(ctx, ns); err != nil {
			return err
		}
	}
	if err := createNamespace(ctx, nsScale); err != nil {
		return err
	}
	// The burst left the resolver's heap grown (the Go runtime returns
	// memory to the OS slowly); a fresh resolver makes the RSS below about
	// the mappings alone.
	if err := restartResolver(ctx); err != nil {
		return err
	}
	_, opod, err := componentPID(ctx, operatorPods)
	if err != nil {
		return err
	}
	metricsURL := "http://" + net.JoinHostPort(opod.Status.PodIP, "8080") + "/metrics"
	beforeText, err := b.scrape(ctx, metricsURL)
	if err != nil {
		return err
	}
	const hist = "elasti_operator_reconcile_duration_seconds"
	beforeB := report.ParseHistogram(beforeText, hist, "")
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watch, err := watchProxy(watchCtx, nsScale)
	if err != nil {
		return err
	}

	first, err := scaleUp(ctx, watch, 0, scaleFirst)
	if err != nil {
		b.add(skipped(secScale, "time until all 1,000 are in proxy mode (from the first create)", "s", nil, err.Error()))
		return err
	}
	b.add(fig(secScale, "time until all 1,000 are in proxy mode (from the first create)", "s", []float64{first.converged.Seconds()}, nil,
		fmt.Sprintf("mode proxy, one resolver port each, and a proxy slice with a ready resolver; creating the 3,000 objects took %.1f s of it", first.created.Seconds())))

	afterText, err := b.scrape(ctx, metricsURL)
	if err != nil {
		return err
	}
	delta := report.SubtractBuckets(report.ParseHistogram(afterText, hist, ""), beforeB)
	n := 0.0
	for _, bk := range delta {
		n = max(n, bk.Count)
	}
	b.add(report.Figure{Section: secScale, Name: "reconcile duration during the scale-up", Unit: "ms",
		Summary: report.Summary{N: int(n), Min: 0,
			Median: report.HistogramQuantile(0.5, delta) * 1000, P99: report.HistogramQuantile(0.99, delta) * 1000},
		Note: "from the operator's elasti_operator_reconcile_duration_seconds histogram (buckets 1, 2, 4, ... ms), interpolated as histogram_quantile does; min is not available from a histogram"})
	b.scaleRSS(ctx, secScale, "1,000", nil, nil)
	steady1, err := b.steadyAPI(ctx, metricsURL)
	if err != nil {
		b.note("Scale: the steady minute at 1,000 could not be measured: %s", oneLine(err.Error()))
	} else {
		b.addSteady(secScale, "1,000", steady1, nil)
	}

	if err := createSlowApps(ctx); err != nil {
		return err
	}
	requestsBefore, err := b.scrape(ctx, metricsURL)
	if err != nil {
		return err
	}
	all, err := scaleUp(ctx, watch, scaleFirst, scaleAll)
	if err != nil {
		b.add(skipped(secScale10k, "time until all 10,000 are in proxy mode, after the last object exists", "s", goalProxyAfterLast, err.Error()))
		return err
	}
	b.add(fig(secScale10k, "time until all 10,000 are in proxy mode, after the last object exists", "s", []float64{(all.converged - all.created).Seconds()}, goalProxyAfterLast,
		fmt.Sprintf("the 9,000 added to the 1,000 above: creating their 27,000 objects, 16 at a time, took %.1f s, and %.1f s passed from the first create until all 10,000 were in proxy mode with a proxy slice listing a ready resolver", all.created.Seconds(), all.converged.Seconds())))
	if requestsAfter, err := b.scrape(ctx, metricsURL); err == nil {
		b.addRequestsPerES(requestsBefore, requestsAfter, scaleAll-scaleFirst)
	}
	b.scaleRSS(ctx, secScale10k, "10,000", goalOperatorRSS, goalResolverRSS)
	steady10, err := b.steadyAPI(ctx, metricsURL)
	if err != nil {
		b.note("Scale: the steady minute at 10,000 could not be measured: %s", oneLine(err.Error()))
		return nil
	}
	b.addSteady(secScale10k, "10,000", steady10, goalSteadyWrites)
	if steady1.operatorReads > 0 {
		b.add(fig(secScale10k, "operator API reads in the steady minute, at 10,000 ÷ at 1,000", "×", []float64{steady10.operatorReads / steady1.operatorReads}, goalReadGrowth,
			fmt.Sprintf("%.0f ÷ %.0f GET requests (elasti_operator_api_requests_total); a read rate that grew with the ElastiServices would be about 10×", steady10.operatorReads, steady1.operatorReads)))
	}
	// kube-controller-manager may still be writing the 9,000 Deployments'
	// ReplicaSets and status; until it is done the cold app's scale to
	// zero (whose pod the ReplicaSet controller deletes) and the
	// resolvers' Deployment wait in its queues (a run of 2026-12-04, at
	// its default 20 requests a second: the cold app's pod was still an
	// endpoint 2 minutes after its scale to zero).
	logf("scale: waiting until nothing in %s has been written for 5 s", nsScale)
	if _, err := quietVersions(ctx, 30*time.Minute); err != nil {
		return fmt.Errorf("before the cold start at scale: %w", err)
	}
	if err := b.coldAtScale(ctx, metricsURL); err != nil {
		return err
	}
	return b.churnAtScale(ctx, watch)
}

// addRequestsPerES adds the operator's API requests per ElastiService of
// the step, by method and resource, from its
// elasti_operator_api_requests_total: what bringing one more ElastiService
// to proxy mode costs the API server, a figure that does not drift with the
// machine as times do.
func (b *bench) addRequestsPerES(before, after string, n int) {
	d := subtract(apiRequests(after), apiRequests(before))
	keys := slices.SortedFunc(maps.Keys(d), func(x, y string) int { return int(d[y] - d[x]) })
	var by []string
	for _, k := range keys {
		if per := d[k] / float64(n); per >= 0.05 {
			by = append(by, fmt.Sprintf("%s %.2f", k, per))
		}
	}
	b.add(fig(secScale10k, "operator API requests per ElastiService brought to proxy mode", "requests", []float64{total(d) / float64(n)}, nil,
		fmt.Sprintf("elasti_operator_api_requests_total over the %d added, until all were in proxy mode, ÷ %d; by method and resource (0.05 and more): %s. It includes the admission webhook's access reviews, and the reconciles that Kubernetes' own writes to the new Deployments and Services cause meanwhile", n, n, strings.Join(by, ", "))))
}

// scaleStep is how long one step of scaleUp took.
type scaleStep struct {
	// created is from the first create until the last object existed;
	// converged from the first create until every ElastiService so far
	// was in proxy mode with a proxy slice listing a ready resolver.
	created, converged time.Duration
}

// scaleUp creates apps from..to-1 (a Deployment at 0, a Service and an
// ElastiService each) in nsScale and waits until watch sees all to
// ElastiServices in the namespace in proxy mode, each with a proxy slice
// that lists a ready resolver.
func scaleUp(ctx context.Context, watch *proxyWatch, from, to int) (scaleStep, error) {
	var step scaleStep
	logf("scale: creating %d Deployments at 0, Services and ElastiServices (to %d)", to-from, to)
	start := time.Now()
	err := e2e.CreateInParallel(ctx, kube.Client, 16, from, to, func(i int) []client.Object {
		name := fmt.Sprintf("app-%05d", i)
		return []client.Object{demoDeployment(nsScale, name, 0), e2e.DemoAppHTTPService(nsScale, name), estest.New(nsScale, name)}
	})
	if err != nil {
		return step, err
	}
	step.created = time.Since(start)
	logf("scale: created in %s; waiting for proxy mode", step.created.Round(time.Millisecond))
	err = e2e.Poll(ctx, 10*time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
		proxied, ready := watch.counts()
		if proxied < to || ready < to {
			return fmt.Errorf("%d/%d in proxy mode, %d/%d proxy slices list a ready resolver", proxied, to, ready, to)
		}
		return nil
	})
	step.converged = time.Since(start)
	logf("scale: %d in proxy mode %s after the first create", to, step.converged.Round(time.Millisecond))
	return step, err
}

// scaleRSS adds the operator's and the resolver's RSS at a step.
func (b *bench) scaleRSS(ctx context.Context, section, count string, operatorGoal, resolverGoal *report.Goal) {
	// The resolver's informer follows status.proxyPorts within moments.
	time.Sleep(5 * time.Second)
	for _, c := range []struct {
		name string
		pods map[string]string
		goal *report.Goal
	}{
		{"operator RSS with " + count + " ElastiServices", operatorPods, operatorGoal},
		{"resolver RSS with " + count + " port mappings", resolverPods, resolverGoal},
	} {
		if xs, err := sampleRSS(ctx, c.pods, 5); err == nil {
			b.add(fig(section, c.name, "MiB", xs, c.goal, "VmRSS, 5 samples 1 s apart"))
		} else {
			b.add(skipped(section, c.name, "MiB", c.goal, err.Error()))
		}
	}
}

// steadyMinute is the API traffic of steadyWindow in which nothing changes.
type steadyMinute struct {
	// writes is the operator's own writes, by resource, besides its
	// leader lease (elasti_operator_api_requests_total).
	writes map[string]float64
	// clusterWrites is what the API server counted of writes to the
	// resources the operator writes, from every client.
	clusterWrites map[string]float64
	// operatorReads is the operator's GET requests, its leader lease's
	// included.
	operatorReads float64
	// settled is how long it took until a 10 s interval had no write to
	// those resources.
	settled time.Duration
}

func total(m map[string]float64) float64 {
	t := 0.0
	for _, n := range m {
		t += n
	}
	return t
}

// apiRequests reads the operator's elasti_operator_api_requests_total
// from its metrics, by "METHOD resource".
func apiRequests(text string) map[string]float64 {
	return countersBy(text, "elasti_operator_api_requests_total", func(l map[string]string) (string, bool) {
		return l["method"] + " " + l["resource"], true
	})
}

// operatorRequests splits apiRequests into the operator's writes by
// resource (its leader lease aside) and its reads.
func operatorRequests(text string) (writes map[string]float64, reads float64) {
	writes = map[string]float64{}
	for k, n := range apiRequests(text) {
		method, resource, _ := strings.Cut(k, " ")
		switch {
		case method == "GET":
			reads += n
		case resource != "leases":
			writes[resource] += n
		}
	}
	return writes, reads
}

// operatorWrites are the resources the operator writes besides its lease.
var operatorWrites = map[string]bool{
	"elastiservices": true, "endpointslices": true, "deployments": true, "statefulsets": true,
	"services": true, "horizontalpodautoscalers": true, "events": true, "configmaps": true,
}

// apiWrites reads the API server's count of writes to operatorWrites'
// resources, by resource.
func apiWrites(ctx context.Context) (map[string]float64, error) {
	raw, err := kube.Clientset.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("the API server's metrics: %w", err)
	}
	return countersBy(string(raw), "apiserver_request_total", func(l map[string]string) (string, bool) {
		switch l["verb"] {
		case "POST", "PUT", "PATCH", "DELETE", "APPLY", "CREATE", "UPDATE", "DELETECOLLECTION":
			return l["resource"], operatorWrites[l["resource"]]
		}
		return "", false
	}), nil
}

func subtract(after, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for r, n := range after {
		if d := n - before[r]; d != 0 {
			out[r] = d
		}
	}
	return out
}

// steadyAPI counts the API traffic of steadyWindow, once the cluster has
// settled: Kubernetes' own controllers go on writing the new Deployments'
// ReplicaSets and status and the Services' EndpointSlices for minutes after
// the creates, at their own rate limits. Settled is the first 10 s with no
// write counted, within 5 min (measured anyway after that).
func (b *bench) steadyAPI(ctx context.Context, metricsURL string) (steadyMinute, error) {
	var m steadyMinute
	start := time.Now()
	prev, err := apiWrites(ctx)
	if err != nil {
		return m, err
	}
	for time.Since(start) < 5*time.Minute {
		select {
		case <-ctx.Done():
			return m, ctx.Err()
		case <-time.After(10 * time.Second):
		}
		now, err := apiWrites(ctx)
		if err != nil {
			return m, err
		}
		d := subtract(now, prev)
		prev = now
		if len(d) == 0 {
			break
		}
		logf("scale: not settled yet, writes in 10 s: %v", d)
	}
	m.settled = time.Since(start)
	text, err := b.scrape(ctx, metricsURL)
	if err != nil {
		return m, err
	}
	writes0, reads0 := operatorRequests(text)
	logf("scale: settled after %s; counting the API requests of a steady %s", m.settled.Round(time.Second), steadyWindow)
	select {
	case <-ctx.Done():
		return m, ctx.Err()
	case <-time.After(steadyWindow):
	}
	now, err := apiWrites(ctx)
	if err != nil {
		return m, err
	}
	m.clusterWrites = subtract(now, prev)
	if text, err = b.scrape(ctx, metricsURL); err != nil {
		return m, err
	}
	writes1, reads1 := operatorRequests(text)
	m.writes, m.operatorReads = subtract(writes1, writes0), reads1-reads0
	return m, nil
}

func (b *bench) addSteady(section, count string, m steadyMinute, writesGoal *report.Goal) {
	by := func(w map[string]float64) string {
		if len(w) == 0 {
			return "none"
		}
		return fmt.Sprint(w)
	}
	b.add(fig(section, "operator API writes in a steady minute with "+count+" asleep", "writes", []float64{total(m.writes)}, writesGoal,
		fmt.Sprintf("the operator's elasti_operator_api_requests_total, every method but GET, its leader lease aside, over 60 s in which nothing changed, after %.0f s of settling (until 10 s passed with no write to %s from any client: Kubernetes' own controllers finish the creates at their own rate); by resource: %s; the API server counted %s from every client",
			m.settled.Seconds(), strings.Join(slices.Sorted(maps.Keys(operatorWrites)), ", "), by(m.writes), by(m.clusterWrites))))
	b.add(fig(section, "operator API reads per second in a steady minute with "+count+" asleep", "/s", []float64{m.operatorReads / steadyWindow.Seconds()}, nil,
		"GET requests in the operator's elasti_operator_api_requests_total over the same 60 s, its leader lease's included; the resolver's are not counted (it exports no client metrics)"))
}

// restartResolver replaces the resolver's pod and waits for the new one to
// be Ready.
func restartResolver(ctx context.Context) error {
	_, old, err := componentPID(ctx, resolverPods)
	if err != nil {
		return err
	}
	logf("restarting the resolver (pod %s)", old.Name)
	if err := kube.Client.Delete(ctx, old); err != nil {
		return err
	}
	return e2e.Poll(ctx, 2*time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
		_, p, err := componentPID(ctx, resolverPods)
		if err != nil {
			return err
		}
		if p.Name == old.Name {
			return fmt.Errorf("old resolver pod %s still running", p.Name)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("resolver pod %s not Ready", p.Name)
	})
}
