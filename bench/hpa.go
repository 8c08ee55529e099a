//go:build bench

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/testenv/estest"
	"elasti.dev/elasti/test/cluster"
	"elasti.dev/elasti/test/e2e"
)

// A request at zero with an HPA at minReplicas 0 (Kubernetes 1.37), with and
// without Elasti. Two workloads in nsHPA, each with an HPA at minReplicas 0
// on the cluster's External metric (a request rate through Prometheus and
// the Prometheus adapter) and each behind a front of its own: a relay pod
// (the demo app's /relay) that stands for the load balancer in front of a
// real service. The metric is the front's request rate, since a request
// that finds no pod leaves no trace in a metric taken from the pods.
//
//   - (e) "elastic" has an ElastiService naming its HPA, so Elasti holds the
//     HPA's floor at 1 and takes the step to zero itself. One request
//     through the front, held by the resolver until the target is ready.
//   - (f) "plain" has the HPA alone. The client asks the front every 200 ms
//     until an answer comes from the workload; the HPA brings it up once the
//     front's rate reaches it (scrape, adapter, the HPA's 15 s sync).
//
// Between runs the bench puts each workload to zero itself, the plain one
// only once its HPA's metric reads zero again (the rate is over one minute),
// so that the HPA does not bring it back at once. The runs alternate, (f)
// then (e), both starting at the same phase of the wall-clock second.

const (
	secHPA  = "Cold start with an HPA at minReplicas: 0"
	nsHPA   = "bench-hpa"
	hpaWith = "elastic" // the workload with an ElastiService
	hpaBare = "plain"   // the workload with its HPA alone
	// hpaRetry is how often the client of (f) tries again.
	hpaRetry = 200 * time.Millisecond
)

// frontName is the relay pod in front of workload app.
func frontName(app string) string { return "front-" + app }

// frontRateHPA is an HPA at minReplicas 0 and maxReplicas 1 for Deployment
// app, on the request rate of app's front: any request makes it want one
// replica.
func frontRateHPA(app string) *autoscalingv2.HorizontalPodAutoscaler {
	// Down to zero at the first sync that reads zero: the bench waits for
	// it before each run of (f).
	return e2e.ZeroHPA(nsHPA, app, 0, 1, autoscalingv2.MetricIdentifier{
		Name:     cluster.ExternalRequestRate,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": frontName(app)}},
	}, "1", 0)
}

func frontDeployment(app string) *appsv1.Deployment {
	return demoDeployment(nsHPA, frontName(app), 1, corev1.EnvVar{Name: "RELAY", Value: "true"})
}

// hpaSetup deploys both workloads, their fronts and HPAs, and the
// ElastiService, and returns the fronts' pod IPs and the workloads'
// ClusterIP URLs.
func hpaSetup(ctx context.Context) (fronts, targets map[string]string, err error) {
	if err := createNamespace(ctx, nsHPA); err != nil {
		return nil, nil, err
	}
	for _, app := range []string{hpaWith, hpaBare} {
		if err := kube.Client.Create(ctx, demoDeployment(nsHPA, app, 1)); err != nil {
			return nil, nil, err
		}
		if err := kube.Client.Create(ctx, e2e.DemoAppHTTPService(nsHPA, app)); err != nil {
			return nil, nil, err
		}
		if err := kube.Client.Create(ctx, frontDeployment(app)); err != nil {
			return nil, nil, err
		}
	}
	fronts, targets = map[string]string{}, map[string]string{}
	for _, app := range []string{hpaWith, hpaBare} {
		if err := waitReady(ctx, nsHPA, app, 1); err != nil {
			return nil, nil, err
		}
		ip, err := clusterIP(ctx, nsHPA, app)
		if err != nil {
			return nil, nil, err
		}
		targets[app] = "http://" + net.JoinHostPort(ip, fmt.Sprint(servicePort)) + "/"
		if fronts[app], err = runningPodIP(ctx, nsHPA, frontName(app)); err != nil {
			return nil, nil, err
		}
	}
	// The adapter serves the metric only once Prometheus has a series of
	// it: one request to each front makes its counter's first series, and
	// the HPAs are created once the API server serves the metric.
	c := kube.HTTPClient()
	for _, app := range []string{hpaWith, hpaBare} {
		if _, err := get(ctx, c, "http://"+net.JoinHostPort(fronts[app], fmt.Sprint(e2e.DemoHTTPTarget))+"/", nil); err != nil {
			return nil, nil, fmt.Errorf("front of %s: %w", app, err)
		}
	}
	for _, app := range []string{hpaWith, hpaBare} {
		if err := e2e.Poll(ctx, 2*time.Minute, time.Second, func(ctx context.Context) error {
			_, err := frontRate(ctx, app)
			return err
		}); err != nil {
			return nil, nil, fmt.Errorf("the External metric of %s's front: %w", app, err)
		}
	}
	for _, app := range []string{hpaWith, hpaBare} {
		if err := kube.Client.Create(ctx, frontRateHPA(app)); err != nil {
			return nil, nil, fmt.Errorf("HPA at minReplicas 0 (Kubernetes 1.37 or later): %w", err)
		}
	}
	// No trigger: the HPA's metric alone says idle; the bench puts the
	// target to zero itself between runs.
	es := estest.New(nsHPA, hpaWith)
	es.Spec.Autoscaler = &elastiv1alpha1.AutoscalerRef{Type: elastiv1alpha1.AutoscalerHPA, Name: hpaWith}
	if err := kube.Client.Create(ctx, es); err != nil {
		return nil, nil, err
	}
	err = e2e.Poll(ctx, time.Minute, 200*time.Millisecond, func(ctx context.Context) error {
		h, err := kube.Clientset.AutoscalingV2().HorizontalPodAutoscalers(nsHPA).Get(ctx, hpaWith, metav1.GetOptions{})
		if err == nil && ptr.Deref(h.Spec.MinReplicas, 0) != 1 {
			err = fmt.Errorf("HPA %s/%s has minReplicas %d: Elasti has not raised its floor", nsHPA, hpaWith, ptr.Deref(h.Spec.MinReplicas, 0))
		}
		return err
	})
	return fronts, targets, err
}

func runningPodIP(ctx context.Context, ns, app string) (string, error) {
	var ip string
	err := e2e.Poll(ctx, 2*time.Minute, 200*time.Millisecond, func(ctx context.Context) error {
		pods, err := kube.Pods(ctx, ns, map[string]string{"app": app})
		if err != nil {
			return err
		}
		for _, p := range pods {
			if p.Status.PodIP != "" && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				ip = p.Status.PodIP
				return nil
			}
		}
		return fmt.Errorf("no running pod of %s/%s", ns, app)
	})
	return ip, err
}

// viaFront asks the relay at frontIP to GET target, and returns nil only
// when the workload itself answered 200.
func viaFront(ctx context.Context, c *http.Client, frontIP, target string) error {
	u := "http://" + net.JoinHostPort(frontIP, fmt.Sprint(e2e.DemoHTTPTarget)) + "/relay?url=" + url.QueryEscape(target)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), "200 ") {
		return fmt.Errorf("front answered %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// frontRate is the External metric the HPA of app reads, as the API server
// serves it to the HPA controller.
func frontRate(ctx context.Context, app string) (float64, error) {
	path := fmt.Sprintf("/apis/external.metrics.k8s.io/v1beta1/namespaces/%s/%s", nsHPA, cluster.ExternalRequestRate)
	raw, err := kube.Clientset.Discovery().RESTClient().Get().AbsPath(path).Param("labelSelector", "app="+frontName(app)).DoRaw(ctx)
	if err != nil {
		return 0, err
	}
	// The list's items carry a "value" quantity each; one item here.
	var list struct {
		Items []struct {
			Value resource.Quantity `json:"value"`
		} `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return 0, err
	}
	if len(list.Items) == 0 {
		return 0, errors.New("no value")
	}
	return list.Items[0].Value.AsApproximateFloat64(), nil
}

// plainToZero waits until the HPA has taken the plain workload to zero
// itself, once its front's rate reads zero. (A zero the HPA did not cause
// is one it leaves alone: it would not scale the workload up again.)
func plainToZero(ctx context.Context) error {
	if err := e2e.Poll(ctx, 4*time.Minute, time.Second, func(ctx context.Context) error {
		n, _, err := kube.Replicas(ctx, nsHPA, hpaBare)
		if err == nil && n != 0 {
			err = fmt.Errorf("the HPA has the plain workload at %d replicas", n)
		}
		return err
	}); err != nil {
		return err
	}
	return waitNoPods(ctx, nsHPA, hpaBare)
}

type hpaPlainRun struct {
	total, toScale float64 // ms
	attempts       int
}

// hpaPlainOnce: the HPA alone brings the plain workload up; the client
// retries through its front until the workload answers.
func hpaPlainOnce(ctx context.Context, c *http.Client, front, target string, phase time.Duration) (hpaPlainRun, error) {
	var r hpaPlainRun
	if err := plainToZero(ctx); err != nil {
		return r, err
	}
	settle(phase)
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	scaled, err := watchScaled(wctx, nsHPA, hpaBare)
	if err != nil {
		return r, err
	}
	// Requests keep coming, one every hpaRetry, each on its own: a
	// failed one takes as long as the front's dial to a Service without
	// endpoints (on this cluster, its 5 s timeout). The first answer ends
	// the run; the ones still in flight are waited for and counted, since
	// their clients see them fail or succeed too. All are bounded by wctx
	// (at most 3 minutes, 900 requests).
	t0 := time.Now()
	answered := make(chan struct{})
	var once sync.Once
	var failed atomic.Int64
	var wg sync.WaitGroup
	tick := time.NewTicker(hpaRetry)
	defer tick.Stop()
	for done := false; !done; {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := viaFront(wctx, c, front, target); err != nil {
				failed.Add(1)
				return
			}
			once.Do(func() { close(answered) })
		}()
		select {
		case <-answered:
			done = true
		case <-wctx.Done():
			wg.Wait()
			return r, fmt.Errorf("no answer after %d requests in %s", failed.Load(), time.Since(t0).Round(time.Second))
		case <-tick.C:
		}
	}
	r.total = ms(time.Since(t0))
	wg.Wait()
	r.attempts = int(failed.Load())
	tScaled, err := waitFor(ctx, scaled, 10*time.Second)
	if err != nil {
		return r, fmt.Errorf("scale write: %w", err)
	}
	r.toScale = ms(tScaled.at.Sub(t0))
	return r, nil
}

// hpaElastiOnce: the workload in Elasti's custody, at zero; one request
// through its front, held until the target is ready.
func hpaElastiOnce(ctx context.Context, c *http.Client, front, target string, phase time.Duration) (float64, error) {
	if err := kube.ScaleTo(ctx, nsHPA, hpaWith, 0); err != nil {
		return 0, err
	}
	if err := waitAsleep(ctx, nsHPA, hpaWith); err != nil {
		return 0, err
	}
	if err := waitNoPods(ctx, nsHPA, hpaWith); err != nil {
		return 0, err
	}
	settle(phase)
	t0 := time.Now()
	if err := viaFront(ctx, c, front, target); err != nil {
		return 0, fmt.Errorf("request at zero: %w", err)
	}
	took := ms(time.Since(t0))
	return took, waitAwake(ctx, nsHPA, hpaWith)
}

// hpaColdStarts measures (e) and (f), runs times each, alternating.
func (b *bench) hpaColdStarts(ctx context.Context, runs int) error {
	logf("deploying the HPA workloads (%s)", nsHPA)
	fronts, targets, err := hpaSetup(ctx)
	if err != nil {
		b.note("The HPA cold starts were not measured: %s.", oneLine(err.Error()))
		return nil
	}
	b.note("(e) and (f): two demo apps in %s, each with an autoscaling/v2 HPA at minReplicas 0 (maxReplicas 1) on the External metric %s, the request rate of a relay pod in front of the app (the demo app's /relay, standing for a load balancer) through Prometheus (2 s scrapes) and prometheus-adapter; the HPA controller syncs every 15 s (the default). (e)'s app also has an ElastiService naming its HPA, which Elasti holds at a floor of 1. Before each run of (f) the HPA takes its app to zero itself (its scale-down stabilization is 0 s), once the rate reads zero again; before each run of (e) the bench puts its app to zero (Elasti then holds it). The client is on the node and asks the relay pod.", nsHPA, cluster.ExternalRequestRate)
	c := b.nodeClient(90 * time.Second)
	var es, fs, fScale, attempts, diff []float64
	// A failed run ends this section only: the figures so far are kept,
	// and the scenarios after it do not depend on it.
	for i := range runs {
		phase := rand.N(time.Second)
		f, err := hpaPlainOnce(ctx, c, fronts[hpaBare], targets[hpaBare], phase)
		if err != nil {
			b.note("The HPA cold starts stopped early: HPA alone, run %d: %s.", i+1, oneLine(err.Error()))
			break
		}
		e, err := hpaElastiOnce(ctx, c, fronts[hpaWith], targets[hpaWith], phase)
		if err != nil {
			b.note("The HPA cold starts stopped early: HPA with Elasti, run %d: %s.", i+1, oneLine(err.Error()))
			break
		}
		logf("HPA cold start %d/%d: (e) %.0f ms, (f) %.0f ms after %d attempts", i+1, runs, e, f.total, f.attempts)
		es, fs, fScale = append(es, e), append(fs, f.total), append(fScale, f.toScale)
		attempts, diff = append(attempts, float64(f.attempts)), append(diff, f.total-e)
	}
	b.add(fig(secHPA, "(e) with Elasti: the request at zero, answered", "ms", es, nil,
		"one GET through the front; Elasti holds the HPA's floor at 1 and the resolver holds the request while the target starts"))
	b.add(fig(secHPA, "(f) HPA alone: first request → first answer", "ms", fs, nil,
		fmt.Sprintf("a new request through the front every %s, each on its own, until one is answered by the workload; the ones before fail (no endpoint)", hpaRetry)))
	b.add(fig(secHPA, "(f): first request → the HPA's scale write seen", "ms", fScale, nil,
		"the front's rate scraped by Prometheus (every 2 s), read through the adapter, acted on at the HPA controller's next sync (every 15 s, the default)"))
	b.add(fig(secHPA, "(f): requests failed before the first answer", "requests", attempts, nil, "each a failed request that clients without Elasti see"))
	b.add(fig(secHPA, "(f)-(e), paired runs", "ms", diff, nil, "run i of (f) minus run i of (e), both started at the same phase of the wall-clock second"))
	return b.hpaOwnMetric(ctx, runs, c)
}
