//go:build bench

package main

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"

	"elasti.dev/elasti/bench/report"
	"elasti.dev/elasti/internal/testenv/estest"
	"elasti.dev/elasti/test/e2e"
)

// Burst: 5,000 requests at once at zero, all held by one resolver while the
// target starts.

const (
	secBurst   = "Burst: 5,000 concurrent requests held at zero on one resolver"
	burstCount = 5000
)

func (b *bench) burst(ctx context.Context) error {
	// The app takes 5 s to start listening, so every request is still held
	// when the last of the 5,000 arrives.
	d := demoDeployment(nsBurst, appName, 0, corev1.EnvVar{Name: "STARTUP_DELAY", Value: "5s"})
	if err := kube.Client.Create(ctx, d); err != nil {
		return err
	}
	if err := kube.Client.Create(ctx, e2e.DemoAppHTTPService(nsBurst, appName)); err != nil {
		return err
	}
	if err := kube.Client.Create(ctx, estest.New(nsBurst, appName, estest.MaxHeld(burstCount))); err != nil {
		return err
	}
	if err := waitAsleep(ctx, nsBurst, appName); err != nil {
		return err
	}
	time.Sleep(1500 * time.Millisecond) // kube-proxy
	ip, err := clusterIP(ctx, nsBurst, appName)
	if err != nil {
		return err
	}
	pid, rpod, err := componentPID(ctx, resolverPods)
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
