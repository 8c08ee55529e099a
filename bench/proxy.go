//go:build bench

package main

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"elasti.dev/elasti/bench/report"
	"elasti.dev/elasti/test/e2e"
)

// Proxy-mode forwarding: the target warm and the proxy slice in place, the
// same load direct to the pod and through the resolver.

const (
	secProxy     = "Proxy-mode forwarding (target warm, proxy slice in place)"
	nameTput     = "max throughput: through the resolver ÷ direct, paired runs"
	nameAddedP50 = "added latency at half the resolver's max throughput, median"
	nameAddedP99 = "added latency at half the resolver's max throughput, p99"
)

func (b *bench) forwarding(ctx context.Context) error {
	es, err := kube.GetElastiService(ctx, nsCold, appName)
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
	rpid, rpod, err := componentPID(ctx, resolverPods)
	if err != nil {
		return err
	}
	pods, err := kube.Pods(ctx, nsCold, map[string]string{"app": appName})
	if err != nil {
		return err
	}
	if len(pods) != 1 {
		return fmt.Errorf("want 1 demo app pod in %s, found %d", nsCold, len(pods))
	}
	apid, err := e2e.ContainerPID(&pods[0])
	if err != nil {
		return err
	}
	direct := "http://" + net.JoinHostPort(pods[0].Status.PodIP, fmt.Sprint(demoPort)) + "/"
	via := "http://" + net.JoinHostPort(rpod.Status.PodIP, fmt.Sprint(resolverPort)) + "/"
	// Called by the resolver pod's IP, a resolver port answers 421 (a scan
	// learns nothing): the requests name the Service, as its clients do.
	viaHost := es.Spec.Service + "." + nsCold + ".svc.cluster.local"
	if err := b.warmUpHost(ctx, via, viaHost); err != nil {
		return err
	}
	note := "a new connection per request (the resolver answers Connection: close); same pod; latency from each request's scheduled send time"
	// Max throughput: closed loop, 64 connections at a time, three 5 s
	// runs each way, interleaved so that both sides of a pair see the
	// machine in the same state.
	var direct5, via5, ratios []float64
	var lastVia, lastDirect *loadResult
	// Where the CPU went in each run: the server's process (the resolver,
	// or the app direct) and the whole machine.
	var viaUse, directUse []cpuUse
	var viaOK, directOK []int
	// measured runs the load generator with args and reads pid's CPU
	// and the machine's around the run.
	measured := func(pid int, args ...string) (*loadResult, cpuUse, error) {
		before, err := sampleCPU(pid)
		if err != nil {
			return nil, cpuUse{}, err
		}
		t0 := time.Now()
		r, err := b.runLoad(ctx, args...)
		if err != nil {
			return nil, cpuUse{}, err
		}
		after, err := sampleCPU(pid)
		if err != nil {
			return nil, cpuUse{}, err
		}
		return r, before.to(after, time.Since(t0)), nil
	}
	for range 3 {
		d, du, err := measured(apid, "-mode", "closed", "-url", direct, "-workers", "64", "-duration", "5s")
		if err != nil {
			return err
		}
		r, ru, err := measured(rpid, "-mode", "closed", "-url", via, "-host", viaHost, "-workers", "64", "-duration", "5s")
		if err != nil {
			return err
		}
		direct5, via5, lastDirect, lastVia = append(direct5, d.rps()), append(via5, r.rps()), d, r
		directUse, viaUse = append(directUse, du), append(viaUse, ru)
		directOK, viaOK = append(directOK, d.OK), append(viaOK, r.OK)
		if d.rps() > 0 {
			ratios = append(ratios, r.rps()/d.rps())
		}
	}
	// A fourth run through the resolver, for its CPU profile; profiling
	// costs a little, so this run is not among the figures.
	profiled := make(chan error, 1)
	go func() {
		top, err := b.profileResolver(ctx, rpod.Status.PodIP, "profile?seconds=4", "resolver-cpu.pprof", "")
		if err == nil {
			b.note("The resolver's CPU profile during a closed-loop run through it (64 clients, new connection each; bench/results/resolver-cpu.pprof), flat share of the heaviest functions: %s.", top)
		}
		profiled <- err
	}()
	if _, err := b.runLoad(ctx, "-mode", "closed", "-url", via, "-host", viaHost, "-workers", "64", "-duration", "5s"); err != nil {
		return err
	}
	if err := <-profiled; err != nil {
		b.note("The resolver's CPU profile could not be taken: %s.", oneLine(err.Error()))
	}
	tputNote := "three 5 s closed-loop runs each way, interleaved, 64 concurrent clients, new connection each; the load generator, the pod and the cluster share this machine's CPUs with the resolver"
	b.add(fig(secProxy, "max throughput direct to the pod (1 CPU limit), small responses", "req/s", direct5, nil, tputNote+"; last run: "+loadNote(lastDirect, "")))
	b.add(fig(secProxy, "max throughput through one resolver replica (1 CPU limit), small responses", "req/s", via5, nil, "last run: "+loadNote(lastVia, "")))
	b.add(fig(secProxy, nameTput, "× direct", ratios, goalFor(nameTput), "run i through the resolver ÷ run i direct"))
	b.addCPU(viaUse, viaOK, directUse, directOK)

	// Latency at fixed rates: 500 rps, and half of what the resolver
	// sustained above (the overhead goal's rate).
	half := int(report.Summarize(via5).Median/2/100) * 100
	for _, rate := range []struct {
		rps int
		dur string
	}{{500, "10s"}, {half, "5s"}} {
		if rate.rps < 100 {
			continue
		}
		logf("forwarding at %d rps for %s: direct %s, resolver %s", rate.rps, rate.dur, direct, via)
		dp, dq, dt := readPressure(), readRunQueue(apid), time.Now()
		d, err := b.runLoad(ctx, "-mode", "rate", "-url", direct, "-rate", fmt.Sprint(rate.rps), "-duration", rate.dur)
		if err != nil {
			return err
		}
		directPSI, directPSIOK := dp.share(readPressure())
		directApp := queueSpan{dq, readRunQueue(apid), time.Since(dt)}
		// What the run through the resolver met: the machine's CPU
		// pressure, the resolver's CPU and throttling, how long its
		// goroutines waited for a CPU, and how long its threads and the
		// app's waited for one on the kernel's run queues.
		sched := b.schedScrape(ctx, resolverPods, "8012")
		rp, aq, rq, rt := readPressure(), readRunQueue(apid), readRunQueue(rpid), time.Now()
		r, use, err := measured(rpid, "-mode", "rate", "-url", via, "-host", viaHost, "-rate", fmt.Sprint(rate.rps), "-duration", rate.dur)
		if err != nil {
			return err
		}
		viaPSI, viaPSIOK := rp.share(readPressure())
		viaApp, viaResolver := queueSpan{aq, readRunQueue(apid), time.Since(rt)}, queueSpan{rq, readRunQueue(rpid), time.Since(rt)}
		schedAfter := b.schedScrape(ctx, resolverPods, "8012")
		diff := b.addPair(secProxy, fmt.Sprintf("%d rps", rate.rps), "direct to the pod", "through the resolver (pod IP:resolver port)", d, r, note)
		if rate.rps != half {
			continue
		}
		if diff.N > 0 {
			why := fmt.Sprintf("at %d rps, half the resolver's median max throughput above: the difference row's statistic", half)
			b.add(report.Figure{Section: secProxy, Name: nameAddedP50, Unit: "ms", Summary: diff, Goal: goalFor(nameAddedP50), Note: why})
			b.add(report.Figure{Section: secProxy, Name: nameAddedP99, Unit: "ms", Summary: diff, Goal: goalFor(nameAddedP99), Note: why})
		}
		at := fmt.Sprintf("%d rps", half)
		psiNote := "share of the run in which some runnable task on the machine waited for a CPU (/proc/pressure/cpu, read at both ends)"
		if directPSIOK && viaPSIOK {
			b.add(fig(secProxy, at+": machine CPU pressure (PSI some), run direct to the pod", "%", []float64{directPSI}, nil, psiNote))
			b.add(fig(secProxy, at+": machine CPU pressure (PSI some), run through the resolver", "%", []float64{viaPSI}, nil, psiNote))
		} else {
			b.note("The machine's CPU pressure at %s could not be read from /proc/pressure/cpu.", at)
		}
		b.add(fig(secProxy, at+": resolver CPU use, run through it (limit 1 CPU)", "CPUs", []float64{use.procCPUs}, nil, ""))
		if use.throttledShare >= 0 {
			b.add(fig(secProxy, at+": CFS periods in which the resolver was throttled", "%", []float64{100 * use.throttledShare}, nil, "cgroup cpu.stat nr_throttled ÷ nr_periods"))
		}
		b.add(fig(secProxy, at+": machine CPU busy, run through the resolver", "% of all CPUs", []float64{100 * use.machineBusy}, nil, "/proc/stat, all CPUs"))
		b.addSched(secProxy, at+": the resolver's goroutines that waited for a CPU", "the run through the resolver", sched.buckets(), schedAfter.buckets())
		b.addTailSplit(at, d, r, sched, schedAfter)
		for _, q := range []struct {
			who  string
			span queueSpan
		}{{"the app's threads, run direct to the pod", directApp}, {"the app's threads, run through the resolver", viaApp}, {"the resolver's threads, run through it", viaResolver}} {
			b.addRunQueue(at+": "+q.who, q.span)
		}
	}
	return nil
}

// queueSpan is a process' run-queue readings at both ends of a run.
type queueSpan struct {
	before, after runQueue
	wall          time.Duration
}

// addRunQueue adds how long a process' threads waited on the kernel's run
// queues during a run: per second of the run, and each time they were given
// a CPU.
func (b *bench) addRunQueue(who string, q queueSpan) {
	perSecond, perSlice, ok := q.before.waitedPerSecond(q.after, q.wall)
	if !ok {
		b.note("How long %s waited on the kernel's run queues could not be read from /proc/PID/task/*/schedstat.", who)
		return
	}
	note := "/proc/PID/task/*/schedstat, read at both ends of the run: time runnable but not running, which Go's scheduler latencies do not see"
	b.add(fig(secProxy, who+": waited on the kernel's run queue, per second of the run", "ms/s", []float64{perSecond}, nil, note))
	b.add(fig(secProxy, who+": waited on the kernel's run queue, mean per time on a CPU", "ms", []float64{perSlice}, nil, note))
}

const (
	// The resolver's histogram of its forwards, from the start of
	// forwarding to the pod's response headers.
	forwardLatency = "elasti_resolver_forward_latency_seconds"
	// tailBoundMs splits the half-maximum runs' tails: a bound of that
	// histogram, above the direct run's usual p99.
	tailBoundMs = 10
)

// addTailSplit adds what tells where the half-maximum run's tail through the
// resolver came from: the share of answers over tailBoundMs as the client
// saw them in both runs, the share of forwards over it inside the resolver
// and their p99, and how long the load generator's own goroutines waited
// for a CPU in both runs.
func (b *bench) addTailSplit(at string, direct, via *loadResult, before, after *schedReading) {
	over := func(r *loadResult) []float64 {
		if len(r.LatencyMs) == 0 {
			return nil
		}
		n := 0
		for _, l := range r.LatencyMs {
			if l > tailBoundMs {
				n++
			}
		}
		return []float64{100 * float64(n) / float64(len(r.LatencyMs))}
	}
	clientNote := "share of the run's 2xx answers, timed from each request's scheduled send"
	b.add(fig(secProxy, fmt.Sprintf("%s: answers over %d ms at the client, run direct to the pod", at, tailBoundMs), "%", over(direct), nil, clientNote))
	b.add(fig(secProxy, fmt.Sprintf("%s: answers over %d ms at the client, run through the resolver", at, tailBoundMs), "%", over(via), nil, clientNote))

	name := fmt.Sprintf("%s: forwards over %d ms inside the resolver (start of forwarding → the pod's response headers)", at, tailBoundMs)
	fwd := report.SubtractBuckets(after.forwardBuckets(), before.forwardBuckets())
	slices.SortFunc(fwd, func(x, y report.Bucket) int { return cmp.Compare(x.UpperBound, y.UpperBound) })
	var total, within float64
	if len(fwd) > 0 {
		total = fwd[len(fwd)-1].Count
	}
	for _, bk := range fwd {
		if bk.UpperBound == tailBoundMs/1000.0 {
			within = bk.Count
		}
	}
	if total <= 0 || len(before.forwardBuckets()) == 0 {
		b.add(skipped(secProxy, name, "%", nil, "no "+forwardLatency+" histogram scraped before and after the run"))
	} else {
		fwdNote := fmt.Sprintf("of the %.0f forwards in the run (%s, scraped before and after)", total, forwardLatency)
		b.add(fig(secProxy, name, "%", []float64{(total - within) / total * 100}, nil, fwdNote))
		b.add(fig(secProxy, at+": forwards inside the resolver, p99", "ms", []float64{1000 * report.HistogramQuantile(0.99, fwd)}, nil,
			fwdNote+"; interpolated within the histogram's buckets (…, 2.5, 5, 10, 25 ms, …)"))
	}

	for _, run := range []struct {
		name string
		r    *loadResult
	}{{"direct to the pod", direct}, {"through the resolver", via}} {
		for _, w := range run.r.SchedWaits {
			if w.Total <= 0 {
				continue
			}
			b.add(fig(secProxy, fmt.Sprintf("%s: load generator's goroutine wake-ups that waited over %s ms for a CPU, run %s", at, strconv.FormatFloat(w.Seconds*1000, 'g', 3, 64), run.name), "%",
				[]float64{100 * w.Over / w.Total}, nil, fmt.Sprintf("of its %.0f wake-ups in the run (runtime/metrics /sched/latencies:seconds, read at both ends)", w.Total)))
		}
	}
}

// addCPU adds where the CPU went in the max-throughput runs: what one request
// costs the resolver (and the app, direct), the sizing figure that follows,
// and whether the resolver's CPU limit or the machine bound the runs.
func (b *bench) addCPU(via []cpuUse, viaOK []int, direct []cpuUse, directOK []int) {
	perReq := func(us []cpuUse, ok []int) (micros, perCPU []float64) {
		for i, u := range us {
			if ok[i] > 0 && u.proc > 0 {
				c := float64(u.proc.Microseconds()) / float64(ok[i])
				micros, perCPU = append(micros, c), append(perCPU, 1e6/c)
			}
		}
		return micros, perCPU
	}
	kernel := "CPU time of the process (/proc/PID/stat, 10 ms ticks) over the requests it answered; packet processing the kernel does in interrupt context is charged to whatever runs then, so this is the process' share, not all the request costs the machine"
	viaMicros, viaPerCPU := perReq(via, viaOK)
	directMicros, _ := perReq(direct, directOK)
	b.add(fig(secProxy, "resolver CPU per request forwarded, in the max-throughput runs", "µs", viaMicros, nil, kernel))
	b.add(fig(secProxy, "requests one resolver CPU forwards per second: 1 s ÷ CPU per request", "req/s per CPU", viaPerCPU, nil,
		"the sizing figure of docs/resolver.md: small responses, a new client connection per request"))
	b.add(fig(secProxy, "demo app CPU per request, direct, in the max-throughput runs", "µs", directMicros, nil, kernel))
	var used, busy, thr []float64
	for _, u := range via {
		used, busy = append(used, u.procCPUs), append(busy, 100*u.machineBusy)
		if u.throttledShare >= 0 {
			thr = append(thr, 100*u.throttledShare)
		}
	}
	b.add(fig(secProxy, "resolver CPU use in the runs through it (limit 1 CPU)", "CPUs", used, nil, ""))
	if len(thr) == len(via) {
		b.add(fig(secProxy, "CFS periods in which the resolver was throttled, runs through it", "%", thr, nil, "cgroup cpu.stat nr_throttled ÷ nr_periods"))
	} else {
		b.note("The resolver's CFS throttling could not be read from its cgroup's cpu.stat.")
	}
	b.add(fig(secProxy, "machine CPU busy in the runs through the resolver", "% of all CPUs", busy, nil,
		"/proc/stat, all CPUs; 100% means the machine, not the resolver's limit, bounded the run"))
}

// goalFor is the goal goalRows gives the figure called name.
func goalFor(name string) *report.Goal {
	for _, g := range goalRows {
		if g.Name == name {
			return g.Goal
		}
	}
	return nil
}
