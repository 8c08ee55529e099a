//go:build bench

package main

import (
	"context"
	"fmt"
	"net"
)

// Proxy-mode forwarding: the target warm and the proxy slice in place, the
// same load direct to the pod and through the resolver.

const secProxy = "Proxy-mode forwarding (target warm, proxy slice in place)"

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
