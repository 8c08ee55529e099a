//go:build bench

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"elasti.dev/elasti/bench/report"
	"elasti.dev/elasti/internal/metricsapi"
	"elasti.dev/elasti/internal/testenv/estest"
	"elasti.dev/elasti/test/cluster"
	"elasti.dev/elasti/test/e2e"
)

// (g): an HPA at minReplicas 0 whose one metric is Elasti's own
// elasti_requests_per_second, served by the operator's metrics API
// (docs/hpa.md#elastis-own-metrics), with Prometheus and the adapter out of
// its path: external.metrics.k8s.io is Elasti's for these runs, and the
// adapter's again after. The workload's ElastiService names the HPA and
// has a podMetrics trigger (where the rate comes from while it serves). One
// request at zero, straight to the Service; the goal compares it with (c),
// Elasti's own cold start without an HPA, in the same run.
const hpaOwn = "own"

var goalOwnMetric = &report.Goal{Stat: "median", Max: 2}

// ownMetricSetup deploys (g)'s workload, its ElastiService and its HPA,
// and returns the workload's ClusterIP URL once Elasti holds the HPA's
// floor.
func ownMetricSetup(ctx context.Context, c *http.Client) (string, error) {
	if err := kube.Client.Create(ctx, demoDeployment(nsHPA, hpaOwn, 1)); err != nil {
		return "", err
	}
	if err := kube.Client.Create(ctx, e2e.DemoAppHTTPService(nsHPA, hpaOwn)); err != nil {
		return "", err
	}
	if err := waitReady(ctx, nsHPA, hpaOwn, 1); err != nil {
		return "", err
	}
	ip, err := clusterIP(ctx, nsHPA, hpaOwn)
	if err != nil {
		return "", err
	}
	target := "http://" + net.JoinHostPort(ip, fmt.Sprint(servicePort)) + "/"
	// The demo app creates its request counter on its first request.
	if err := e2e.Poll(ctx, time.Minute, 500*time.Millisecond, func(ctx context.Context) error {
		_, err := get(ctx, c, target, nil)
		return err
	}); err != nil {
		return "", err
	}
	es := estest.New(nsHPA, hpaOwn, estest.PodMetrics("http_requests_total", e2e.DemoHTTPTarget, "0.01"), estest.HPA(hpaOwn))
	if err := kube.Client.Create(ctx, es); err != nil {
		return "", err
	}
	// 4 requests a second per replica, up to 3; the default scale-down.
	if err := kube.Client.Create(ctx, e2e.ZeroHPA(nsHPA, hpaOwn, 0, 3, e2e.ElastiRate(hpaOwn), "4", 300)); err != nil {
		return "", err
	}
	return target, e2e.Poll(ctx, time.Minute, 200*time.Millisecond, func(ctx context.Context) error {
		h, err := kube.Clientset.AutoscalingV2().HorizontalPodAutoscalers(nsHPA).Get(ctx, hpaOwn, metav1.GetOptions{})
		if err == nil && ptr.Deref(h.Spec.MinReplicas, 0) != 1 {
			err = fmt.Errorf("HPA %s/%s has minReplicas %d: Elasti has not raised its floor", nsHPA, hpaOwn, ptr.Deref(h.Spec.MinReplicas, 0))
		}
		return err
	})
}

// hpaOwnMetric measures (g), runs times, with external.metrics.k8s.io
// Elasti's meanwhile.
func (b *bench) hpaOwnMetric(ctx context.Context, runs int, c *http.Client) error {
	target, err := ownMetricSetup(ctx, c)
	if err != nil {
		b.add(skipped(secHPA, nameOwnMetric, "ms", nil, oneLine(err.Error())))
		return nil
	}
	restore, err := b.cfg.TakeAPIService(ctx, cluster.ExternalMetricsAPIService,
		filepath.Join(b.cfg.RepoRoot, "config", "metrics-api", "apiservice.yaml"), "elasti-metrics-api")
	if restore != nil {
		defer func() {
			if err := restore(context.WithoutCancel(ctx)); err != nil {
				b.note("The adapter's external.metrics.k8s.io could not be registered again after (g): %s.", oneLine(err.Error()))
			}
		}()
	}
	if err != nil {
		b.add(skipped(secHPA, nameOwnMetric, "ms", nil, "Elasti's metrics API: "+oneLine(err.Error())))
		return nil
	}
	// The HPA reads Elasti's rate once the trigger has been evaluated
	// twice (the bench's polling interval is 30 s).
	if err := e2e.Poll(ctx, 3*time.Minute, time.Second, func(ctx context.Context) error {
		_, err := e2e.ElastiMetric(ctx, b.cfg, nsHPA, hpaOwn, metricsapi.MetricRate)
		return err
	}); err != nil {
		b.add(skipped(secHPA, nameOwnMetric, "ms", nil, "Elasti's rate was not served: "+oneLine(err.Error())))
		return nil
	}
	var gs []float64
	for i := range runs {
		took, err := ownMetricOnce(ctx, c, target, rand.N(time.Second))
		if err != nil {
			b.note("The cold starts with an HPA on Elasti's metric stopped early: run %d: %s.", i+1, oneLine(err.Error()))
			break
		}
		logf("HPA on Elasti's metric, cold start %d/%d: (g) %.0f ms", i+1, runs, took)
		gs = append(gs, took)
	}
	b.add(fig(secHPA, nameOwnMetric, "ms", gs, nil,
		"one GET through the ClusterIP at zero; the HPA's one metric is elasti_requests_per_second from the operator's metrics API (no Prometheus, no adapter), Elasti holds its floor at 1 and wakes the target on the request"))
	if len(gs) > 0 && len(b.coldC) > 0 {
		g, cold := report.Summarize(gs).Median, report.Summarize(b.coldC).Median
		b.add(fig(secHPA, "(g) ÷ (c), medians", "×", []float64{g / cold}, goalOwnMetric,
			fmt.Sprintf("%.0f ms ÷ %.0f ms: the request at zero with the HPA on Elasti's metric, against Elasti's own cold start without an HPA, in this run", g, cold)))
	}
	return nil
}

const nameOwnMetric = "(g) HPA on Elasti's own metric: the request at zero, answered"

// ownMetricOnce puts (g)'s workload to zero and times one request.
func ownMetricOnce(ctx context.Context, c *http.Client, target string, phase time.Duration) (float64, error) {
	if err := kube.ScaleTo(ctx, nsHPA, hpaOwn, 0); err != nil {
		return 0, err
	}
	if err := waitAsleep(ctx, nsHPA, hpaOwn); err != nil {
		return 0, err
	}
	if err := waitNoPods(ctx, nsHPA, hpaOwn); err != nil {
		return 0, err
	}
	settle(phase)
	t0 := time.Now()
	code, err := get(ctx, c, target, nil)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("answered %d", code)
	}
	if err != nil {
		return 0, fmt.Errorf("request at zero: %w", err)
	}
	took := ms(time.Since(t0))
	return took, waitAwake(ctx, nsHPA, hpaOwn)
}
