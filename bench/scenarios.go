//go:build bench

package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/bench/report"
	"elasti.dev/elasti/test/e2e"
)

// Namespaces of the bench's workloads.
const (
	nsCold  = "bench-cold"  // demo app with an ElastiService
	nsPlain = "bench-plain" // the same demo app without Elasti
	nsBurst = "bench-burst" // the burst's slow-starting demo app
	nsScale = "bench-scale" // 1,000 ElastiServices
)

const (
	secCold    = "Cold start"
	secProxy   = "Proxy-mode forwarding (target warm, proxy slice in place)"
	secServe   = "Serve mode (Elasti out of the path)"
	secBurst   = "Burst: 5,000 concurrent requests held at zero on one resolver"
	secScale   = "Scale: 1,000 ElastiServices, Deployments at 0"
	secIdle    = "Idle"
	scaleCount = 1000
	burstCount = 5000
	serveRate  = 500
)

// The figures with goals (issue 7).
const (
	nameA  = "(a) request written to the resolver → scale write seen"
	nameB  = "(b) first ready endpoint seen in the EndpointSlice → first response byte at the client"
	nameCD = "(c)-(d), paired runs"
)

var goalRows = []report.Figure{
	{Section: secCold, Name: nameA, Unit: "ms", Goal: &report.Goal{Stat: "p99", Max: 5}},
	{Section: secCold, Name: nameB, Unit: "ms", Goal: &report.Goal{Stat: "p99", Max: 5}},
	{Section: secCold, Name: nameCD, Unit: "ms", Goal: &report.Goal{Stat: "median", Max: 50}},
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func fig(section, name, unit string, xs []float64, goal *report.Goal, note string) report.Figure {
	f := report.Figure{Section: section, Name: name, Unit: unit, Summary: report.Summarize(xs), Goal: goal, Note: note}
	if len(xs) == 0 {
		f.Skipped = "no samples"
	}
	return f
}

func skipped(section, name, unit string, goal *report.Goal, why string) report.Figure {
	return report.Figure{Section: section, Name: name, Unit: unit, Goal: goal, Skipped: why}
}

// clusterFigures measures everything that needs the cluster, in an order
// that keeps each figure clean: serve mode without Elasti first, then the
// install and idle RSS, then cold starts, forwarding, the burst, and the
// 1,000-object scale test last.
func (b *bench) clusterFigures(ctx context.Context) error {
	if b.cleanupAfter {
		defer b.cleanup()
	}
	b.note("Setup: Elasti from config/default with the overlay bench/testdata/elasti: one operator replica (so every activation lands on the leader), one resolver replica with a 1-CPU limit. The demo app (test/demoapp) has a 1 s readiness period. All load comes from `elasti-bench load` inside the node's network namespace, one new connection per request, on the same 2-CPU machine that runs the whole cluster, so every figure includes CPU contention with the load generator. The cluster's etcd runs with --unsafe-no-fsync (a throwaway cluster), so API writes cost no disk flush.")
	b.note("Scaled down to fit 20 minutes: %d cold-start runs each of (c) and (d); fixed-rate runs are 10 s at 500 rps and 5 s at 2,000 rps; max throughput is three 5 s runs; scale and burst figures are single runs (N is the number of samples in each row).", b.runs)
	b.note("(a) and (b) are measured from outside the product: the bench watches the Deployment and the Service's own EndpointSlices and timestamps the events as they arrive, and times the client request with httptrace. The last cold-start row gives the watch delivery delay that (a) includes.")
	if err := b.uninstall(ctx); err != nil {
		return fmt.Errorf("remove an earlier Elasti: %w", err)
	}
	for _, ns := range []string{nsCold, nsPlain, nsBurst} {
		if err := createNamespace(ctx, ns); err != nil {
			return err
		}
	}
	logf("deploying the demo apps")
	for _, ns := range []string{nsCold, nsPlain} {
		if err := benchKube.c.Create(ctx, demoDeployment(ns, appName, 1)); err != nil {
			return err
		}
		if err := benchKube.c.Create(ctx, demoService(ns, appName)); err != nil {
			return err
		}
	}
	for _, ns := range []string{nsCold, nsPlain} {
		if err := waitReady(ctx, ns, appName, 1); err != nil {
			return err
		}
	}
	coldIP, err := clusterIP(ctx, nsCold, appName)
	if err != nil {
		return err
	}
	serviceURL := "http://" + net.JoinHostPort(coldIP, fmt.Sprint(servicePort)) + "/"
	if err := b.warmUp(ctx, serviceURL); err != nil {
		return err
	}

	// Serve mode, before Elasti exists on the cluster at all.
	logf("serve mode without Elasti: %d rps for 10s through %s", serveRate, serviceURL)
	without, err := b.runLoad(ctx, "-mode", "rate", "-url", serviceURL, "-rate", fmt.Sprint(serveRate), "-duration", "10s")
	if err != nil {
		return err
	}

	logf("installing Elasti (bench/testdata/elasti)")
	if err := b.install(ctx); err != nil {
		return fmt.Errorf("install Elasti: %w", err)
	}
	b.idle(ctx)

	if err := benchKube.c.Create(ctx, elastiService(nsCold, appName, 0)); err != nil {
		return err
	}
	if err := waitMode(ctx, nsCold, appName, elastiv1alpha1.ModeServe); err != nil {
		return err
	}
	logf("serve mode with Elasti: %d rps for 10s through %s", serveRate, serviceURL)
	with, err := b.runLoad(ctx, "-mode", "rate", "-url", serviceURL, "-rate", fmt.Sprint(serveRate), "-duration", "10s")
	if err != nil {
		return err
	}
	b.addPair(secServe, fmt.Sprintf("%d rps through the Service", serveRate), "without Elasti installed", "with Elasti, ElastiService in serve mode", without, with,
		"a new connection per request from the node's network namespace to the ClusterIP; latency from each request's scheduled send time")

	if err := b.coldStarts(ctx); err != nil {
		return err
	}
	if err := b.forwarding(ctx); err != nil {
		return err
	}
	if err := b.burst(ctx); err != nil {
		return err
	}
	return b.scale(ctx)
}

// warmUp waits until a new ClusterIP answers (kube-proxy may lag).
func (b *bench) warmUp(ctx context.Context, url string) error {
	c := b.nodeClient(10 * time.Second)
	return e2e.Poll(ctx, time.Minute, 200*time.Millisecond, func(ctx context.Context) error {
		_, err := get(ctx, c, url, nil)
		return err
	})
}

func (b *bench) nodeClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		Proxy: nil, DialContext: b.cfg.NodeDialer().DialContext, DisableKeepAlives: true,
	}}
}

func get(ctx context.Context, c *http.Client, url string, trace *httptrace.ClientTrace) (int, error) {
	if trace != nil {
		ctx = httptrace.WithClientTrace(ctx, trace)
	}
	code, err := doGet(ctx, c, url)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("GET %s: %d %s", url, code, http.StatusText(code))
	}
	return code, err
}

// addPair adds two load runs' latencies and the difference of their
// statistics.
func (b *bench) addPair(section, what, baseName, otherName string, base, other *loadResult, note string) {
	b.add(fig(section, what+": "+baseName, "ms", base.LatencyMs, nil, loadNote(base, note)))
	b.add(fig(section, what+": "+otherName, "ms", other.LatencyMs, nil, loadNote(other, "")))
	sb, so := report.Summarize(base.LatencyMs), report.Summarize(other.LatencyMs)
	if sb.N == 0 || so.N == 0 {
		return
	}
	b.add(report.Figure{Section: section, Name: what + ": difference", Unit: "ms",
		Summary: report.Summary{N: min(sb.N, so.N), Min: so.Min - sb.Min, Median: so.Median - sb.Median, P99: so.P99 - sb.P99, Max: so.Max - sb.Max},
		Note:    "each statistic of the second row minus the same statistic of the first"})
}

func loadNote(r *loadResult, extra string) string {
	s := fmt.Sprintf("%d sent, %d ok, %.0f ok/s", r.Sent, r.OK, r.rps())
	if e := r.errorSummary(); e != "" {
		s += "; failed: " + e
	}
	if extra != "" {
		s += "; " + extra
	}
	return s
}

// idle samples the RSS of the freshly installed operator and resolver.
func (b *bench) idle(ctx context.Context) {
	// Let start-up garbage settle.
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
	}
	for _, c := range []struct{ name, sel string }{{"operator RSS, idle", operatorSel}, {"resolver RSS, idle (1,000 ports open, no mappings)", resolverSel}} {
		xs, err := sampleRSS(ctx, c.sel, 5)
		if err != nil {
			b.add(skipped(secIdle, c.name, "MiB", nil, err.Error()))
			continue
		}
		b.add(fig(secIdle, c.name, "MiB", xs, nil, "VmRSS of the container's process, sampled 5 times 1 s apart, 10 s after both were Ready"))
	}
}

// ---- cold start ----

// firstTime watches with w and returns a channel that receives the time the
// first event matching pred arrived. The watch stops after that, or at ctx's
// end.
func firstTime(ctx context.Context, w watch.Interface, pred func(obj any) bool) <-chan time.Time {
	ch := make(chan time.Time, 1)
	go func() {
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				if (ev.Type == watch.Added || ev.Type == watch.Modified) && pred(ev.Object) {
					ch <- time.Now()
					return
				}
			}
		}
	}()
	return ch
}

// watchScaled reports when Deployment ns/name is seen with spec.replicas ≥ 1.
func watchScaled(ctx context.Context, ns, name string) (<-chan time.Time, error) {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	l, err := benchKube.cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, err
	}
	w, err := benchKube.cs.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: l.ResourceVersion})
	if err != nil {
		return nil, err
	}
	return firstTime(ctx, w, func(o any) bool {
		d, ok := o.(*appsv1.Deployment)
		return ok && ptr.Deref(d.Spec.Replicas, 1) >= 1
	}), nil
}

// watchReady reports when Service ns/svc's own EndpointSlices are seen with
// a ready endpoint.
func watchReady(ctx context.Context, ns, svc string) (<-chan time.Time, error) {
	opts := metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc + "," + managedByNot}
	l, err := benchKube.cs.DiscoveryV1().EndpointSlices(ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	opts.ResourceVersion = l.ResourceVersion
	w, err := benchKube.cs.DiscoveryV1().EndpointSlices(ns).Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return firstTime(ctx, w, func(o any) bool {
		s, ok := o.(*discoveryv1.EndpointSlice)
		return ok && readyCount([]discoveryv1.EndpointSlice{*s}) > 0
	}), nil
}

func waitFor(ctx context.Context, ch <-chan time.Time, d time.Duration) (time.Time, error) {
	select {
	case t := <-ch:
		return t, nil
	case <-time.After(d):
		return time.Time{}, errors.New("watch saw nothing")
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}

// sleepCold puts the cold app to zero and waits until the resolver holds its
// traffic: proxy mode, a proxy slice with a ready resolver, no pod left, and
// a moment for kube-proxy to program the slice.
func sleepCold(ctx context.Context, ns string, phase time.Duration) error {
	if err := scaleTo(ctx, ns, appName, 0); err != nil {
		return err
	}
	if err := waitMode(ctx, ns, appName, elastiv1alpha1.ModeProxy); err != nil {
		return err
	}
	if err := waitNoPods(ctx, ns, appName); err != nil {
		return err
	}
	settle(phase)
	return nil
}

// settle pauses before a cold start: at least 1.5 s for kube-proxy (it
// syncs at most once a second), then until the wall clock reaches phase
// within its second. The kubelet notices a started container and probes it
// on one-second ticks, so a cold start's Kubernetes part depends on where in
// the second it begins, by up to a second. Each (c)/(d) pair starts both of
// its runs at the same phase, a random one per pair, so that the pair's
// difference keeps what Elasti adds and drops most of that tick noise, while
// the pairs together still sample every phase.
func settle(phase time.Duration) {
	at := time.Now().Add(1500 * time.Millisecond)
	wait := 1500*time.Millisecond + (phase-time.Duration(at.UnixNano())%time.Second+time.Second)%time.Second
	time.Sleep(wait)
}

type coldRun struct {
	a, b, c, k8s float64 // ms
}

// coldOnce: one request at zero through the ClusterIP, timed against the
// watch events of the scale write and of the first ready endpoint.
func (b *bench) coldOnce(ctx context.Context, url string, phase time.Duration) (coldRun, error) {
	var r coldRun
	if err := sleepCold(ctx, nsCold, phase); err != nil {
		return r, err
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	scaled, err := watchScaled(wctx, nsCold, appName)
	if err != nil {
		return r, err
	}
	ready, err := watchReady(wctx, nsCold, appName)
	if err != nil {
		return r, err
	}
	var wrote, first time.Time
	trace := &httptrace.ClientTrace{
		WroteRequest:         func(httptrace.WroteRequestInfo) { wrote = time.Now() },
		GotFirstResponseByte: func() { first = time.Now() },
	}
	t0 := time.Now()
	if _, err := get(ctx, b.nodeClient(90*time.Second), url, trace); err != nil {
		return r, fmt.Errorf("request at zero: %w", err)
	}
	end := time.Now()
	tScaled, err := waitFor(ctx, scaled, 10*time.Second)
	if err != nil {
		return r, fmt.Errorf("scale write: %w", err)
	}
	tReady, err := waitFor(ctx, ready, 10*time.Second)
	if err != nil {
		return r, fmt.Errorf("ready endpoint: %w", err)
	}
	r = coldRun{a: ms(tScaled.Sub(wrote)), b: ms(first.Sub(tReady)), c: ms(end.Sub(t0)), k8s: ms(tReady.Sub(tScaled))}
	return r, waitMode(ctx, nsCold, appName, elastiv1alpha1.ModeServe)
}

type plainRun struct {
	d, watchDelay float64 // ms
}

// plainOnce: the same workload without Elasti, scaled 0→1 the way `kubectl
// scale` does it (the /scale subresource), until its endpoint is ready.
func plainOnce(ctx context.Context, phase time.Duration) (plainRun, error) {
	var r plainRun
	if err := scaleTo(ctx, nsPlain, appName, 0); err != nil {
		return r, err
	}
	if err := waitNoPods(ctx, nsPlain, appName); err != nil {
		return r, err
	}
	settle(phase)
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	scaled, err := watchScaled(wctx, nsPlain, appName)
	if err != nil {
		return r, err
	}
	ready, err := watchReady(wctx, nsPlain, appName)
	if err != nil {
		return r, err
	}
	s, err := benchKube.cs.AppsV1().Deployments(nsPlain).GetScale(ctx, appName, metav1.GetOptions{})
	if err != nil {
		return r, err
	}
	s.Spec.Replicas = 1
	t0 := time.Now()
	if _, err := benchKube.cs.AppsV1().Deployments(nsPlain).UpdateScale(ctx, appName, s, metav1.UpdateOptions{}); err != nil {
		return r, err
	}
	accepted := time.Now()
	tReady, err := waitFor(ctx, ready, time.Minute)
	if err != nil {
		return r, err
	}
	tScaled, err := waitFor(ctx, scaled, 10*time.Second)
	if err != nil {
		return r, err
	}
	return plainRun{d: ms(tReady.Sub(t0)), watchDelay: ms(tScaled.Sub(accepted))}, nil
}

func (b *bench) coldStarts(ctx context.Context) error {
	ip, err := clusterIP(ctx, nsCold, appName)
	if err != nil {
		return err
	}
	url := "http://" + net.JoinHostPort(ip, fmt.Sprint(servicePort)) + "/"
	var as, bs, cs, k8s, ds, wd, diff, share []float64
	// (c) and (d) alternate, so both see the same machine.
	for i := range b.runs {
		phase := rand.N(time.Second)
		c, err := b.coldOnce(ctx, url, phase)
		if err != nil {
			return fmt.Errorf("cold start run %d: %w", i+1, err)
		}
		d, err := plainOnce(ctx, phase)
		if err != nil {
			return fmt.Errorf("plain scale run %d: %w", i+1, err)
		}
		logf("cold start %d/%d: (a) %.1f ms, (b) %.1f ms, (c) %.0f ms, (d) %.0f ms", i+1, b.runs, c.a, c.b, c.c, d.d)
		as, bs, cs, k8s = append(as, c.a), append(bs, c.b), append(cs, c.c), append(k8s, c.k8s)
		ds, wd = append(ds, d.d), append(wd, d.watchDelay)
		diff = append(diff, c.c-d.d)
		share = append(share, c.c-c.k8s)
	}
	b.add(fig(secCold, nameA, "ms", as, goalRows[0].Goal,
		"end is the watch event of the Deployment's spec.replicas ≥ 1, so it includes one watch delivery (see the last row)"))
	if len(as) > 0 {
		b.add(fig(secCold, "(a), first wake after the install only", "ms", as[:1], nil,
			"included in (a) above; the later runs come 8 to 10 s apart, so they find the resolver's keep-alive connection to the operator open and its token review cached (1 min), while this one opens the connection and has its token reviewed"))
	}
	b.add(fig(secCold, nameB, "ms", bs, goalRows[1].Goal,
		"start is the watch event the resolver's informer also waits for; end includes the pod's answer and the way back"))
	b.add(fig(secCold, "(c) request at zero, total latency seen by the client", "ms", cs, nil, "GET through the ClusterIP, new connection, from the node's network namespace"))
	b.add(fig(secCold, "(d) same workload without Elasti: /scale 0→1 until its endpoint is ready", "ms", ds, nil, "the write `kubectl scale` makes, then the EndpointSlice watch"))
	b.add(fig(secCold, nameCD, "ms", diff, goalRows[2].Goal,
		"run i of (c) minus run i of (d); both runs of a pair start at the same phase of the wall-clock second (random per pair), because the kubelet's one-second ticks dominate both; what is left in a pair is Elasti plus the rest of Kubernetes' own variation"))
	b.add(fig(secCold, "Elasti's share of (c) in the same run: (c) − (scale write seen → endpoint ready)", "ms", share, nil,
		"removes the pod start and readiness probe, which Elasti does not control, from each run"))
	b.add(fig(secCold, "Kubernetes' part of (c): scale write seen → endpoint ready", "ms", k8s, nil, ""))
	b.add(fig(secCold, "watch delivery: /scale write answered → its watch event seen", "ms", wd, nil, "measured in the (d) runs; (a) contains one of these"))
	return nil
}

// ---- proxy-mode forwarding ----

func (b *bench) forwarding(ctx context.Context) error {
	es, err := getES(ctx, nsCold, appName)
	if err != nil {
		return err
	}
	var resolverPort int32
	for _, p := range es.Status.ProxyPorts {
		if p.Name == "http" {
			resolverPort = p.ResolverPort
		}
	}
	if resolverPort == 0 {
		return fmt.Errorf("no resolver port for %s/%s in %v", nsCold, appName, es.Status.ProxyPorts)
	}
	_, rpod, err := componentPID(ctx, resolverSel)
	if err != nil {
		return err
	}
	pods, err := podsOf(ctx, nsCold, "app="+appName)
	if err != nil {
		return err
	}
	if len(pods) != 1 {
		return fmt.Errorf("want 1 demo app pod in %s, found %d", nsCold, len(pods))
	}
	direct := "http://" + net.JoinHostPort(pods[0].Status.PodIP, fmt.Sprint(demoPort)) + "/"
	via := "http://" + net.JoinHostPort(rpod.Status.PodIP, fmt.Sprint(resolverPort)) + "/"
	if err := b.warmUp(ctx, via); err != nil {
		return err
	}
	note := "a new connection per request (the resolver answers Connection: close); same pod; latency from each request's scheduled send time"
	for _, rate := range []struct {
		rps int
		dur string
	}{{500, "10s"}, {2000, "5s"}} {
		logf("forwarding at %d rps for %s: direct %s, resolver %s", rate.rps, rate.dur, direct, via)
		d, err := b.runLoad(ctx, "-mode", "rate", "-url", direct, "-rate", fmt.Sprint(rate.rps), "-duration", rate.dur)
		if err != nil {
			return err
		}
		r, err := b.runLoad(ctx, "-mode", "rate", "-url", via, "-rate", fmt.Sprint(rate.rps), "-duration", rate.dur)
		if err != nil {
			return err
		}
		b.addPair(secProxy, fmt.Sprintf("%d rps", rate.rps), "direct to the pod", "through the resolver (pod IP:resolver port)", d, r, note)
	}
	// Max throughput: closed loop, 64 connections at a time, three 5 s runs.
	var tput []float64
	var last *loadResult
	for range 3 {
		r, err := b.runLoad(ctx, "-mode", "closed", "-url", via, "-workers", "64", "-duration", "5s")
		if err != nil {
			return err
		}
		tput, last = append(tput, r.rps()), r
	}
	d, err := b.runLoad(ctx, "-mode", "closed", "-url", direct, "-workers", "64", "-duration", "5s")
	if err != nil {
		return err
	}
	b.add(fig(secProxy, "max throughput of one resolver replica (1 CPU limit), small responses", "req/s", tput, nil,
		fmt.Sprintf("three 5 s closed-loop runs, 64 concurrent clients, new connection each; last run: %s; the same load direct to the pod: %.0f req/s. The load generator, the pod and the cluster share this machine's CPUs with the resolver",
			loadNote(last, ""), d.rps())))
	return nil
}

// ---- burst ----

func (b *bench) burst(ctx context.Context) error {
	// The app takes 5 s to start listening, so every request is still held
	// when the last of the 5,000 arrives.
	d := demoDeployment(nsBurst, appName, 0, corev1.EnvVar{Name: "STARTUP_DELAY", Value: "5s"})
	if err := benchKube.c.Create(ctx, d); err != nil {
		return err
	}
	if err := benchKube.c.Create(ctx, demoService(nsBurst, appName)); err != nil {
		return err
	}
	if err := benchKube.c.Create(ctx, elastiService(nsBurst, appName, burstCount)); err != nil {
		return err
	}
	if err := waitMode(ctx, nsBurst, appName, elastiv1alpha1.ModeProxy); err != nil {
		return err
	}
	time.Sleep(1500 * time.Millisecond) // kube-proxy
	ip, err := clusterIP(ctx, nsBurst, appName)
	if err != nil {
		return err
	}
	pid, rpod, err := componentPID(ctx, resolverSel)
	if err != nil {
		return err
	}
	before, _, _ := memMiB(pid)
	peakNote := "VmHWM, reset just before the burst"
	if err := resetPeak(pid); err != nil {
		peakNote = "VmHWM since the resolver started (could not reset it: " + err.Error() + ")"
	}
	metricsURL := "http://" + net.JoinHostPort(rpod.Status.PodIP, "8012") + "/metrics"
	var maxHeld atomic.Int64
	pctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for pctx.Err() == nil {
			if text, err := b.scrape(pctx, metricsURL); err == nil {
				v := int64(report.ParseGauge(text, "elasti_resolver_held_requests", `namespace="`+nsBurst+`"`))
				if v > maxHeld.Load() {
					maxHeld.Store(v)
				}
			}
			select {
			case <-pctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	url := "http://" + net.JoinHostPort(ip, fmt.Sprint(servicePort)) + "/"
	logf("burst: %d concurrent requests at zero through %s", burstCount, url)
	r, err := b.runLoad(ctx, "-mode", "burst", "-url", url, "-count", fmt.Sprint(burstCount), "-timeout", "120s")
	stop()
	wg.Wait()
	if err != nil {
		return err
	}
	_, peak, err := memMiB(pid)
	if err != nil {
		return err
	}
	b.add(fig(secBurst, "requests that succeeded (HTTP 200)", "of 5,000", []float64{float64(r.OK)}, nil, loadNote(r, "")))
	b.add(fig(secBurst, "most requests held at once (resolver's held gauge, scraped every 100 ms)", "requests", []float64{float64(maxHeld.Load())}, nil, ""))
	b.add(fig(secBurst, "client latency of the held requests", "ms", r.LatencyMs, nil, "the app starts listening 5 s after its pod starts"))
	b.add(fig(secBurst, "resolver peak RSS during the burst", "MiB", []float64{peak}, nil,
		fmt.Sprintf("%s; RSS before: %.1f MiB", peakNote, before)))
	return nil
}

// ---- scale ----

func (b *bench) scale(ctx context.Context) error {
	// Free the resolver ports of the earlier ElastiServices: the range has
	// exactly 1,000.
	for _, ns := range []string{nsCold, nsBurst} {
		if err := deleteAllES(ctx, ns); err != nil {
			return err
		}
	}
	if err := createNamespace(ctx, nsScale); err != nil {
		return err
	}
	// The burst left the resolver's heap grown (the Go runtime returns
	// memory to the OS slowly); a fresh resolver makes the RSS below about
	// the 1,000 mappings alone.
	if err := restartResolver(ctx); err != nil {
		return err
	}
	_, opod, err := componentPID(ctx, operatorSel)
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

	logf("scale: creating %d Deployments at 0, Services and ElastiServices", scaleCount)
	start := time.Now()
	jobs := make(chan int)
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range jobs {
				name := fmt.Sprintf("app-%04d", i)
				for _, o := range []client.Object{demoDeployment(nsScale, name, 0), demoService(nsScale, name), elastiService(nsScale, name, 0)} {
					if err := benchKube.c.Create(ctx, o); err != nil {
						select {
						case errc <- err:
						default:
						}
						return
					}
				}
			}
		})
	}
	for i := range scaleCount {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errc:
		return fmt.Errorf("create scale objects: %w", err)
	default:
	}
	created := time.Since(start)
	logf("scale: created in %s; waiting for proxy mode", created.Round(time.Millisecond))
	var proxied int
	err = e2e.Poll(ctx, 8*time.Minute, 500*time.Millisecond, func(ctx context.Context) error {
		var l elastiv1alpha1.ElastiServiceList
		if err := benchKube.c.List(ctx, &l, client.InNamespace(nsScale)); err != nil {
			return err
		}
		proxied = 0
		for _, es := range l.Items {
			if es.Status.Mode == elastiv1alpha1.ModeProxy && len(es.Status.ProxyPorts) == 1 {
				proxied++
			}
		}
		if proxied < scaleCount {
			return fmt.Errorf("%d/%d in proxy mode", proxied, scaleCount)
		}
		slices, err := benchKube.cs.DiscoveryV1().EndpointSlices(nsScale).List(ctx, metav1.ListOptions{LabelSelector: "endpointslice.kubernetes.io/managed-by=elasti.dev"})
		if err != nil {
			return err
		}
		if readyCount(slices.Items) < scaleCount {
			return fmt.Errorf("%d/%d proxy slices list a ready resolver", readyCount(slices.Items), scaleCount)
		}
		return nil
	})
	converged := time.Since(start)
	if err != nil {
		b.add(skipped(secScale, "time until all are in proxy mode", "s", nil, err.Error()))
		return err
	}
	b.add(fig(secScale, "time until all 1,000 are in proxy mode (from the first create)", "s", []float64{converged.Seconds()}, nil,
		fmt.Sprintf("mode proxy, one resolver port each, and a proxy slice with a ready resolver; creating the 3,000 objects took %.1f s of it", created.Seconds())))

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

	// The resolver's informer follows status.proxyPorts within moments.
	time.Sleep(5 * time.Second)
	if xs, err := sampleRSS(ctx, operatorSel, 5); err == nil {
		b.add(fig(secScale, "operator RSS with 1,000 ElastiServices", "MiB", xs, nil, "VmRSS, 5 samples 1 s apart"))
	} else {
		b.add(skipped(secScale, "operator RSS with 1,000 ElastiServices", "MiB", nil, err.Error()))
	}
	if xs, err := sampleRSS(ctx, resolverSel, 5); err == nil {
		b.add(fig(secScale, "resolver RSS with 1,000 port mappings", "MiB", xs, nil, "VmRSS, 5 samples 1 s apart"))
	} else {
		b.add(skipped(secScale, "resolver RSS with 1,000 port mappings", "MiB", nil, err.Error()))
	}
	return nil
}

// restartResolver replaces the resolver's pod and waits for the new one to
// be Ready.
func restartResolver(ctx context.Context) error {
	_, old, err := componentPID(ctx, resolverSel)
	if err != nil {
		return err
	}
	logf("restarting the resolver (pod %s)", old.Name)
	if err := benchKube.c.Delete(ctx, old); err != nil {
		return err
	}
	return e2e.Poll(ctx, 2*time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
		_, p, err := componentPID(ctx, resolverSel)
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

// deleteAllES deletes a namespace's Deployments first (so the deletion
// finalizer has no target to wake) and then its ElastiServices, and waits
// until they are gone.
func deleteAllES(ctx context.Context, ns string) error {
	if err := benchKube.c.DeleteAllOf(ctx, &appsv1.Deployment{}, client.InNamespace(ns)); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err := benchKube.c.DeleteAllOf(ctx, &elastiv1alpha1.ElastiService{}, client.InNamespace(ns)); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return e2e.Poll(ctx, 5*time.Minute, 500*time.Millisecond, func(ctx context.Context) error {
		var l elastiv1alpha1.ElastiServiceList
		if err := benchKube.c.List(ctx, &l, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(l.Items) != 0 {
			return fmt.Errorf("%s: %d ElastiServices left", ns, len(l.Items))
		}
		return nil
	})
}

// cleanup removes the bench's namespaces (so a reused cluster is left as it
// was, Elasti installed), bounded in time.
func (b *bench) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	for _, ns := range []string{nsScale, nsBurst, nsCold, nsPlain} {
		if err := deleteAllES(ctx, ns); err != nil {
			logf("cleanup %s: %v", ns, err)
		}
		err := benchKube.c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if err != nil && !apierrors.IsNotFound(err) {
			logf("delete namespace %s: %v", ns, err)
		}
	}
}
