//go:build bench

package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"time"

	"elasti.dev/elasti/bench/report"
	"elasti.dev/elasti/internal/testenv/estest"
	"elasti.dev/elasti/test/e2e"
)

// The scenarios, one file each: serve.go (serve mode with and without
// Elasti), idle.go, coldstart.go, hpa.go (cold starts with an HPA),
// proxy.go (proxy-mode forwarding), doze.go (the warm sleep), tails.go
// (cold-start tails), burst.go and scale.go. This file runs them in order
// and holds what they share.

// Namespaces of the bench's workloads.
const (
	nsCold  = "bench-cold"  // demo app with an ElastiService
	nsPlain = "bench-plain" // the same demo app without Elasti
	nsBurst = "bench-burst" // the burst's slow-starting demo app
	nsScale = "bench-scale" // 1,000 ElastiServices
	// nsTails ("bench-tails", copies of the demo app woken in turn) is in tails.go,
	// nsDoze ("bench-doze", the warm sleep's two apps) in doze.go.
)

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
// install and idle RSS, then cold starts, forwarding, the warm sleep, the
// burst, and the 1,000-object scale test last.
func (b *bench) clusterFigures(ctx context.Context) error {
	if b.cleanupAfter {
		defer b.cleanup()
	}
	b.note("Setup: Elasti from config/metrics-api (config/default and the operator's external metrics API, whose APIService is registered only for (g)) with the overlay bench/testdata/elasti: one operator replica (so every activation lands on the leader), one resolver replica with a 1-CPU limit. The demo app (test/demoapp) has a 1 s readiness period. All load comes from `elasti-bench load` inside the node's network namespace, one new connection per request, on the same 2-CPU machine that runs the whole cluster, so every figure includes CPU contention with the load generator. The cluster's etcd runs with --unsafe-no-fsync (a throwaway cluster), so API writes cost no disk flush.")
	b.note("Scaled down to fit 80 minutes, half of which the 10,000 ElastiServices of the scale figures take: %d cold-start runs each of (c) and (d), %d wakes for the tails of (a) and (b), %d each of (e) and (f), %d warm sleep runs each of (a) and (b) (about 70 s a run: (a)'s 20 s start, and the wait for the operator to doze the app again); fixed-rate runs are 10 s at 500 rps and 5 s at half the resolver's median max throughput (rounded down to 100 rps); max throughput is three 5 s runs; scale and burst figures are single runs (N is the number of samples in each row).", b.runs, b.tailRuns, b.hpaRuns, b.dozeRuns)
	b.note("(a) and (b) are measured from outside the product: the bench watches the Deployment and the Service's own EndpointSlices and timestamps the events as they arrive, and times the client request with httptrace. The last cold-start row gives the watch delivery delay that (a) includes.")
	if err := b.uninstall(ctx); err != nil {
		return fmt.Errorf("remove an earlier Elasti: %w", err)
	}
	if b.only == "doze" {
		// The warm sleep deploys its own apps and needs no serve load.
		if err := b.installElasti(ctx); err != nil {
			return err
		}
		return b.dozeCompare(ctx, b.dozeRuns)
	}
	for _, ns := range []string{nsCold, nsPlain, nsBurst} {
		if err := createNamespace(ctx, ns); err != nil {
			return err
		}
	}
	logf("deploying the demo apps")
	for _, ns := range []string{nsCold, nsPlain} {
		if err := kube.Client.Create(ctx, demoDeployment(ns, appName, 1)); err != nil {
			return err
		}
		if err := kube.Client.Create(ctx, e2e.DemoAppHTTPService(ns, appName)); err != nil {
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
	without, err := b.serveLoad(ctx, serviceURL, "without Elasti")
	if err != nil {
		return err
	}

	if err := b.installElasti(ctx); err != nil {
		return err
	}

	// No trigger: the ElastiService never sleeps on its own. The bench puts
	// the target to zero itself, and the operator then moves the Service to
	// proxy mode ("someone else put the target at zero").
	if err := kube.Client.Create(ctx, estest.New(nsCold, appName)); err != nil {
		return err
	}
	if err := waitAwake(ctx, nsCold, appName); err != nil {
		return err
	}
	if b.only == "scale" {
		// The cold start at scale compares with a few cold starts now.
		if b.coldShare, err = b.coldShares(ctx, coldScaleRuns, 0); err != nil {
			return err
		}
		return b.scale(ctx)
	}
	with, err := b.serveLoad(ctx, serviceURL, "with Elasti")
	if err != nil {
		return err
	}
	b.addServe(without, with)

	if err := b.coldStarts(ctx); err != nil {
		return err
	}
	if err := b.hpaColdStarts(ctx, b.hpaRuns); err != nil {
		return err
	}
	if b.only == "hpa" {
		return nil
	}
	// Forwarding uses the cold app's resolver port, which stays mapped for
	// the overlay's --released-port-linger (10m) after its last wake: it
	// must come before the tails, which take about 10 minutes.
	if err := b.forwarding(ctx); err != nil {
		return err
	}
	// After forwarding, not before it: forwarding needs the cold app's
	// resolver port still mapped (the linger after its last wake, in the
	// cold starts), which this section's 10 or so minutes would outlast.
	if err := b.dozeCompare(ctx, b.dozeRuns); err != nil {
		return err
	}
	if err := b.burst(ctx); err != nil {
		return err
	}
	if err := b.coldTails(ctx); err != nil {
		return err
	}
	return b.scale(ctx)
}

// installElasti installs Elasti and samples its idle memory.
func (b *bench) installElasti(ctx context.Context) error {
	logf("installing Elasti (bench/testdata/elasti)")
	if err := b.install(ctx); err != nil {
		return fmt.Errorf("install Elasti: %w", err)
	}
	b.idle(ctx)
	return nil
}

// warmUp waits until a new ClusterIP answers (kube-proxy may lag).
func (b *bench) warmUp(ctx context.Context, url string) error {
	return b.warmUpHost(ctx, url, "")
}

// warmUpHost is warmUp with the Host header host (empty: the URL's).
func (b *bench) warmUpHost(ctx context.Context, url, host string) error {
	return e2e.Poll(ctx, time.Minute, 200*time.Millisecond, func(ctx context.Context) error {
		_, err := e2e.GetWith(ctx, kube.HTTPClient(), url, host)
		return err
	})
}

// nodeClient is the end-to-end tests' HTTP client (from the node's network
// namespace, a new connection per request) with another timeout.
func (b *bench) nodeClient(timeout time.Duration) *http.Client {
	c := kube.HTTPClient()
	c.Timeout = timeout
	return c
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
func (b *bench) addPair(section, what, baseName, otherName string, base, other *loadResult, note string) report.Summary {
	b.add(fig(section, what+": "+baseName, "ms", base.LatencyMs, nil, loadNote(base, note)))
	b.add(fig(section, what+": "+otherName, "ms", other.LatencyMs, nil, loadNote(other, "")))
	sb, so := report.Summarize(base.LatencyMs), report.Summarize(other.LatencyMs)
	if sb.N == 0 || so.N == 0 {
		return report.Summary{}
	}
	diff := report.Summary{N: min(sb.N, so.N), Min: so.Min - sb.Min, Median: so.Median - sb.Median, P99: so.P99 - sb.P99, Max: so.Max - sb.Max}
	b.add(report.Figure{Section: section, Name: what + ": difference", Unit: "ms", Summary: diff,
		Note: "each statistic of the second row minus the same statistic of the first"})
	return diff
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
