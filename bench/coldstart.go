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
	"time"

	appsv1 "k8s.io/api/apps/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"elasti.dev/elasti/bench/report"
)

// Cold start: a request at zero through the ClusterIP, paired with the same
// workload scaled from zero without Elasti.

const secCold = "Cold start"

// The figures with goals (issue 7, and the warm sleep's of issue 45).
const (
	nameA  = "(a) request written to the resolver → scale write seen"
	nameB  = "(b) first ready endpoint seen in the EndpointSlice → first response byte at the client"
	nameCD = "(c)-(d), paired runs"
)

var goalRows = []report.Figure{
	{Section: secTails, Name: nameA, Unit: "ms", Goal: &report.Goal{Stat: "p99", Max: 5}},
	{Section: secTails, Name: nameB, Unit: "ms", Goal: &report.Goal{Stat: "p99", Max: 5}},
	{Section: secCold, Name: nameCD, Unit: "ms", Goal: &report.Goal{Stat: "median", Max: 50}},
	{Section: secProxy, Name: nameTput, Unit: "× direct", Goal: &report.Goal{Stat: "median", Min: 0.7}},
	{Section: secProxy, Name: nameAddedP50, Unit: "ms", Goal: &report.Goal{Stat: "median", Max: 0.5}},
	{Section: secProxy, Name: nameAddedP99, Unit: "ms", Goal: &report.Goal{Stat: "p99", Max: 2}},
	{Section: secBurst, Name: nameBurstRatio, Unit: "×", Goal: &report.Goal{Stat: "median", Max: 1}},
	{Section: secBurst, Name: namePeak, Unit: "MiB", Goal: &report.Goal{Stat: "median", Max: 150}},
	{Section: secBurst, Name: namePerHeld, Unit: "KiB", Goal: &report.Goal{Stat: "median", Max: 20}},
	{Section: secBurst, Name: nameAfter, Unit: "× before", Goal: &report.Goal{Stat: "median", Max: 1.1}},
	// Issue 45.
	{Section: secDoze, Name: nameDozeFirst, Unit: "ms", Goal: goalDoze},
}

// firstTime watches with w and returns a channel that receives the moment
// the first event matching pred arrived (with the machine's CPU pressure
// read then). The watch stops after that, or at ctx's end.
func firstTime(ctx context.Context, w watch.Interface, pred func(obj any) bool) <-chan pressure {
	ch := make(chan pressure, 1)
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
					ch <- readPressure()
					return
				}
			}
		}
	}()
	return ch
}

// watchScaled reports when Deployment ns/name is seen with spec.replicas ≥ 1.
func watchScaled(ctx context.Context, ns, name string) (<-chan pressure, error) {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	l, err := kube.Clientset.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, err
	}
	w, err := kube.Clientset.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: l.ResourceVersion})
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
func watchReady(ctx context.Context, ns, svc string) (<-chan pressure, error) {
	opts := metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc + "," + managedByNot}
	l, err := kube.Clientset.DiscoveryV1().EndpointSlices(ns).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	opts.ResourceVersion = l.ResourceVersion
	w, err := kube.Clientset.DiscoveryV1().EndpointSlices(ns).Watch(ctx, opts)
	if err != nil {
		return nil, err
	}
	return firstTime(ctx, w, func(o any) bool {
		s, ok := o.(*discoveryv1.EndpointSlice)
		return ok && readyCount([]discoveryv1.EndpointSlice{*s}) > 0
	}), nil
}

func waitFor(ctx context.Context, ch <-chan pressure, d time.Duration) (pressure, error) {
	select {
	case p := <-ch:
		return p, nil
	case <-time.After(d):
		return pressure{}, errors.New("watch saw nothing")
	case <-ctx.Done():
		return pressure{}, ctx.Err()
	}
}

// sleepCold puts the cold app to zero and waits until the resolver holds its
// traffic: asleep as the end-to-end tests mean it (waitAsleep), no pod left,
// and a moment for kube-proxy to program the slice.
func sleepCold(ctx context.Context, ns, name string, phase time.Duration) error {
	if err := kube.ScaleTo(ctx, ns, name, 0); err != nil {
		return err
	}
	if err := waitAsleep(ctx, ns, name); err != nil {
		return err
	}
	if err := waitNoPods(ctx, ns, name); err != nil {
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
// the pairs together still sample every phase. A negative phase waits
// for kube-proxy alone.
func settle(phase time.Duration) {
	if phase < 0 {
		time.Sleep(1500 * time.Millisecond)
		return
	}
	at := time.Now().Add(1500 * time.Millisecond)
	wait := 1500*time.Millisecond + (phase-time.Duration(at.UnixNano())%time.Second+time.Second)%time.Second
	time.Sleep(wait)
}

type coldRun struct {
	a, b, c, k8s float64 // ms
}

// wakeTimes are the four instants of a request at zero, each with the
// machine's CPU pressure read then: (a) runs from wrote to scaled, (b) from
// ready to first.
type wakeTimes struct {
	wrote, scaled, ready, first pressure
	sent, answered              time.Time
}

// timedWake sends one GET to url, whose app ns/name is at zero, and times
// it against the watch events of the scale write and of the first ready
// endpoint.
func timedWake(ctx context.Context, c *http.Client, ns, name, url string) (wakeTimes, error) {
	var w wakeTimes
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	scaled, err := watchScaled(wctx, ns, name)
	if err != nil {
		return w, err
	}
	ready, err := watchReady(wctx, ns, name)
	if err != nil {
		return w, err
	}
	trace := &httptrace.ClientTrace{
		WroteRequest:         func(httptrace.WroteRequestInfo) { w.wrote = readPressure() },
		GotFirstResponseByte: func() { w.first = readPressure() },
	}
	w.sent = time.Now()
	if _, err := get(ctx, c, url, trace); err != nil {
		return w, fmt.Errorf("request at zero: %w", err)
	}
	w.answered = time.Now()
	if w.scaled, err = waitFor(ctx, scaled, 10*time.Second); err != nil {
		return w, fmt.Errorf("scale write: %w", err)
	}
	if w.ready, err = waitFor(ctx, ready, 10*time.Second); err != nil {
		return w, fmt.Errorf("ready endpoint: %w", err)
	}
	return w, nil
}

// coldOnce: one request at zero through the ClusterIP, timed against the
// watch events of the scale write and of the first ready endpoint.
func (b *bench) coldOnce(ctx context.Context, url string, phase time.Duration) (coldRun, error) {
	if err := sleepCold(ctx, nsCold, appName, phase); err != nil {
		return coldRun{}, err
	}
	w, err := timedWake(ctx, b.nodeClient(90*time.Second), nsCold, appName, url)
	if err != nil {
		return coldRun{}, err
	}
	r := coldRun{a: ms(w.scaled.at.Sub(w.wrote.at)), b: ms(w.first.at.Sub(w.ready.at)), c: ms(w.answered.Sub(w.sent)), k8s: ms(w.ready.at.Sub(w.scaled.at))}
	return r, waitAwake(ctx, nsCold, appName)
}

type plainRun struct {
	d, watchDelay float64 // ms
}

// plainOnce: the same workload without Elasti, scaled 0→1 the way `kubectl
// scale` does it (the /scale subresource), until its endpoint is ready.
func plainOnce(ctx context.Context, phase time.Duration) (plainRun, error) {
	var r plainRun
	if err := kube.ScaleTo(ctx, nsPlain, appName, 0); err != nil {
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
	s, err := kube.Clientset.AppsV1().Deployments(nsPlain).GetScale(ctx, appName, metav1.GetOptions{})
	if err != nil {
		return r, err
	}
	s.Spec.Replicas = 1
	t0 := time.Now()
	if _, err := kube.Clientset.AppsV1().Deployments(nsPlain).UpdateScale(ctx, appName, s, metav1.UpdateOptions{}); err != nil {
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
	return plainRun{d: ms(tReady.at.Sub(t0)), watchDelay: ms(tScaled.at.Sub(accepted))}, nil
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
	b.add(fig(secCold, nameA+", in these paired runs", "ms", as, nil,
		"end is the watch event of the Deployment's spec.replicas ≥ 1, so it includes one watch delivery (see the last row); the goal row, over more wakes, is in the tails section"))
	if len(as) > 0 {
		b.add(fig(secCold, "(a), first wake after the install only", "ms", as[:1], nil,
			"included in (a) above; the later runs come 8 to 10 s apart, so they find the resolver's keep-alive connection to the operator open and its token review cached (1 min), while this one opens the connection and has its token reviewed"))
	}
	b.add(fig(secCold, nameB+", in these paired runs", "ms", bs, nil,
		"start is the watch event the resolver's informer also waits for; end includes the pod's answer and the way back; the goal row, over more wakes, is in the tails section"))
	b.add(fig(secCold, "(c) request at zero, total latency seen by the client", "ms", cs, nil, "GET through the ClusterIP, new connection, from the node's network namespace"))
	b.add(fig(secCold, "(d) same workload without Elasti: /scale 0→1 until its endpoint is ready", "ms", ds, nil, "the write `kubectl scale` makes, then the EndpointSlice watch"))
	b.add(fig(secCold, nameCD, "ms", diff, goalRows[2].Goal,
		"run i of (c) minus run i of (d); both runs of a pair start at the same phase of the wall-clock second (random per pair), because the kubelet's one-second ticks dominate both; what is left in a pair is Elasti plus the rest of Kubernetes' own variation"))
	b.coldShare, b.coldC = share, cs
	b.add(fig(secCold, "Elasti's share of (c) in the same run: (c) − (scale write seen → endpoint ready)", "ms", share, nil,
		"removes the pod start and readiness probe, which Elasti does not control, from each run"))
	b.add(fig(secCold, "Kubernetes' part of (c): scale write seen → endpoint ready", "ms", k8s, nil, ""))
	b.add(fig(secCold, "watch delivery: /scale write answered → its watch event seen", "ms", wd, nil, "measured in the (d) runs; (a) contains one of these"))
	return nil
}
