//go:build bench

package main

import (
	"context"
	"fmt"
	"net"

	"elasti.dev/elasti/bench/report"
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
	_, rpod, err := componentPID(ctx, resolverPods)
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
	direct := "http://" + net.JoinHostPort(pods[0].Status.PodIP, fmt.Sprint(demoPort)) + "/"
	via := "http://" + net.JoinHostPort(rpod.Status.PodIP, fmt.Sprint(resolverPort)) + "/"
	if err := b.warmUp(ctx, via); err != nil {
		return err
	}
	note := "a new connection per request (the resolver answers Connection: close); same pod; latency from each request's scheduled send time"
	// Max throughput: closed loop, 64 connections at a time, three 5 s
	// runs each way, interleaved so that both sides of a pair see the
	// machine in the same state.
	var direct5, via5, ratios []float64
	var lastVia, lastDirect *loadResult
	for range 3 {
		d, err := b.runLoad(ctx, "-mode", "closed", "-url", direct, "-workers", "64", "-duration", "5s")
		if err != nil {
			return err
		}
		r, err := b.runLoad(ctx, "-mode", "closed", "-url", via, "-workers", "64", "-duration", "5s")
		if err != nil {
			return err
		}
		direct5, via5, lastDirect, lastVia = append(direct5, d.rps()), append(via5, r.rps()), d, r
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
	if _, err := b.runLoad(ctx, "-mode", "closed", "-url", via, "-workers", "64", "-duration", "5s"); err != nil {
		return err
	}
	if err := <-profiled; err != nil {
		b.note("The resolver's CPU profile could not be taken: %s.", oneLine(err.Error()))
	}
	tputNote := "three 5 s closed-loop runs each way, interleaved, 64 concurrent clients, new connection each; the load generator, the pod and the cluster share this machine's CPUs with the resolver"
	b.add(fig(secProxy, "max throughput direct to the pod (1 CPU limit), small responses", "req/s", direct5, nil, tputNote+"; last run: "+loadNote(lastDirect, "")))
	b.add(fig(secProxy, "max throughput through one resolver replica (1 CPU limit), small responses", "req/s", via5, nil, "last run: "+loadNote(lastVia, "")))
	b.add(fig(secProxy, nameTput, "× direct", ratios, goalFor(nameTput), "run i through the resolver ÷ run i direct"))

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
		d, err := b.runLoad(ctx, "-mode", "rate", "-url", direct, "-rate", fmt.Sprint(rate.rps), "-duration", rate.dur)
		if err != nil {
			return err
		}
		r, err := b.runLoad(ctx, "-mode", "rate", "-url", via, "-rate", fmt.Sprint(rate.rps), "-duration", rate.dur)
		if err != nil {
			return err
		}
		diff := b.addPair(secProxy, fmt.Sprintf("%d rps", rate.rps), "direct to the pod", "through the resolver (pod IP:resolver port)", d, r, note)
		if rate.rps == half && diff.N > 0 {
			why := fmt.Sprintf("at %d rps, half the resolver's median max throughput above: the difference row's statistic", half)
			b.add(report.Figure{Section: secProxy, Name: nameAddedP50, Unit: "ms", Summary: diff, Goal: goalFor(nameAddedP50), Note: why})
			b.add(report.Figure{Section: secProxy, Name: nameAddedP99, Unit: "ms", Summary: diff, Goal: goalFor(nameAddedP99), Note: why})
		}
	}
	return nil
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
