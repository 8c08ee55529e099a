//go:build bench

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"elasti.dev/elasti/bench/report"
	"elasti.dev/elasti/internal/testenv/estest"
	"elasti.dev/elasti/test/e2e"
)

// Cold start at scale: Elasti's share of a cold start of the cold app (the
// cold start section's figure) with the 10,000 of the scale figures asleep
// and 100 awake ElastiServices whose trigger backend answers after 9 s,
// against the same figure with the few ElastiServices of the cold start
// section, in the same run.

const (
	secColdScale   = "Cold start with 10,000 asleep and 100 slow triggers"
	nsSlow         = "bench-slow"
	slowApps       = 100
	slowQueryDelay = "9s"
	coldScaleRuns  = 5
)

var goalColdScale = &report.Goal{Stat: "median", Max: 2}

// coldShares wakes the cold app n times and returns Elasti's share of each
// cold start: (c) minus Kubernetes' part, scale write seen → endpoint
// ready. Before each, the app is put to sleep and given lag more than the
// cold start section gives kube-proxy to program the proxy slice (with
// 10,000 Services, one iptables sync takes seconds).
func (b *bench) coldShares(ctx context.Context, n int, lag time.Duration) ([]float64, error) {
	ip, err := clusterIP(ctx, nsCold, appName)
	if err != nil {
		return nil, err
	}
	url := "http://" + net.JoinHostPort(ip, fmt.Sprint(servicePort)) + "/"
	var shares []float64
	for i := range n {
		if lag > 0 {
			if err := sleepCold(ctx, nsCold, appName, -1); err != nil {
				return shares, err
			}
			time.Sleep(lag)
		}
		c, err := b.coldOnce(ctx, url, rand.N(time.Second))
		if err != nil {
			return shares, fmt.Errorf("cold start %d: %w", i+1, err)
		}
		logf("cold start %d/%d: (c) %.0f ms, Elasti's share %.1f ms", i+1, n, c.c, c.c-c.k8s)
		shares = append(shares, c.c-c.k8s)
	}
	return shares, nil
}

// createSlowApps creates the backend that answers queries after
// slowQueryDelay and the slowApps apps whose ElastiServices coldAtScale
// points at it, without those ElastiServices. scale calls it before the
// 9,000: kube-controller-manager, at its default 20 requests a second,
// took about 20 minutes to write the ReplicaSets and status of 9,000 new
// Deployments, and apps created after them got no ReplicaSet for over 10
// minutes (a run of 2026-12-04). The local cluster now runs it at 100
// (test/cluster/components.go); the order stays, so a backlog can only
// delay the 9,000.
func createSlowApps(ctx context.Context) error {
	if err := createNamespace(ctx, nsSlow); err != nil {
		return err
	}
	objs := []client.Object{
		demoDeployment(nsSlow, "slowprom", 1, corev1.EnvVar{Name: "QUERY_DELAY", Value: slowQueryDelay}),
		e2e.DemoAppHTTPService(nsSlow, "slowprom"),
	}
	for i := range slowApps {
		app := fmt.Sprintf("slow-%03d", i)
		objs = append(objs, demoDeployment(nsSlow, app, 1), e2e.DemoAppHTTPService(nsSlow, app))
	}
	for _, o := range objs {
		if err := kube.Client.Create(ctx, o); err != nil {
			return fmt.Errorf("create %s: %w", o.GetName(), err)
		}
	}
	return nil
}

// coldAtScale adds the cold start at scale, once the 10,000 are asleep.
func (b *bench) coldAtScale(ctx context.Context, metricsURL string) error {
	const name = "Elasti's share of (c) with 10,000 asleep and 100 awake ElastiServices polling a backend that answers after 9 s"
	if len(b.coldShare) == 0 {
		b.add(skipped(secColdScale, name+" ÷ the same with a few", "×", goalColdScale, "the cold start section did not measure the share with a few ElastiServices"))
		return nil
	}
	logf("cold start at scale: a backend that answers queries after %s, and %d awake ElastiServices whose triggers query it", slowQueryDelay, slowApps)
	server := fmt.Sprintf("http://slowprom.%s.svc:%d", nsSlow, servicePort)
	for i := range slowApps {
		app := fmt.Sprintf("slow-%03d", i)
		if err := kube.Client.Create(ctx, estest.New(nsSlow, app, estest.Prometheus(server, "sum(rate(http_requests_total[1m]))", "0.5"))); err != nil {
			return fmt.Errorf("create the ElastiService %s: %w", app, err)
		}
	}
	for i := range slowApps {
		if err := waitReadyWithin(ctx, nsSlow, fmt.Sprintf("slow-%03d", i), 1, 10*time.Minute); err != nil {
			return err
		}
	}
	before, err := b.scrape(ctx, metricsURL)
	if err != nil {
		return err
	}
	// Every ElastiService is evaluated once per polling interval (30 s in
	// the bench's install); after one interval all 100 are being polled.
	time.Sleep(40 * time.Second)
	shares, err := b.coldShares(ctx, coldScaleRuns, 5*time.Second)
	if err != nil {
		b.add(skipped(secColdScale, name, "ms", nil, err.Error()))
		return err
	}
	after, err := b.scrape(ctx, metricsURL)
	if err != nil {
		return err
	}
	evals := sumCounter(after, "elasti_operator_trigger_evaluations_total") - sumCounter(before, "elasti_operator_trigger_evaluations_total")
	note := fmt.Sprintf("the operator completed %.0f trigger evaluations while these ran, each waiting 9 s for the backend", evals)
	b.add(fig(secColdScale, name, "ms", shares, nil, note))
	few := report.Summarize(b.coldShare).Median
	b.add(fig(secColdScale, name+" ÷ the same with a few", "×", []float64{report.Summarize(shares).Median / few}, goalColdScale,
		fmt.Sprintf("median %.1f ms ÷ %.1f ms, the cold start section's median of the same share, in this run", report.Summarize(shares).Median, few)))
	return nil
}
