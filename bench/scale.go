//go:build bench

package main

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/bench/report"
	"elasti.dev/elasti/internal/testenv/estest"
	"elasti.dev/elasti/test/e2e"
)

// Scale: 1,000 ElastiServices with their Deployments at zero, all in proxy
// mode on one resolver.

const (
	secScale   = "Scale: 1,000 ElastiServices, Deployments at 0"
	scaleCount = 1000
)

func (b *bench) scale(ctx context.Context) error {
	// Free the resolver ports of the earlier ElastiServices: the range has
	// exactly 1,000.
	for _, ns := range []string{nsCold, nsHPA, nsBurst} {
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

	logf("scale: creating %d Deployments at 0, Services and ElastiServices", scaleCount)
	start := time.Now()
	jobs := make(chan int)
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range jobs {
				name := fmt.Sprintf("app-%04d", i)
				for _, o := range []client.Object{demoDeployment(nsScale, name, 0), e2e.DemoAppHTTPService(nsScale, name), estest.New(nsScale, name)} {
					if err := kube.Client.Create(ctx, o); err != nil {
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
		if err := kube.Client.List(ctx, &l, client.InNamespace(nsScale)); err != nil {
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
		slices, err := kube.Clientset.DiscoveryV1().EndpointSlices(nsScale).List(ctx, metav1.ListOptions{LabelSelector: "endpointslice.kubernetes.io/managed-by=elasti.dev"})
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
	if xs, err := sampleRSS(ctx, operatorPods, 5); err == nil {
		b.add(fig(secScale, "operator RSS with 1,000 ElastiServices", "MiB", xs, nil, "VmRSS, 5 samples 1 s apart"))
	} else {
		b.add(skipped(secScale, "operator RSS with 1,000 ElastiServices", "MiB", nil, err.Error()))
	}
	if xs, err := sampleRSS(ctx, resolverPods, 5); err == nil {
		b.add(fig(secScale, "resolver RSS with 1,000 port mappings", "MiB", xs, nil, "VmRSS, 5 samples 1 s apart"))
	} else {
		b.add(skipped(secScale, "resolver RSS with 1,000 port mappings", "MiB", nil, err.Error()))
	}
	return nil
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
