//go:build bench

package main

import (
	"context"
	"fmt"
	"net"
	"strings"
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
	secBurst       = "Burst: 5,000 concurrent requests held at zero on one resolver"
	burstCount     = 5000
	nameBurstRatio = "burst at zero: all answered ÷ (1.3 × the same burst at a warm pod + the cold start)"
	namePeak       = "resolver peak RSS during the burst"
	namePerHeld    = "resolver peak RSS per held request: (peak − before) ÷ 5,000"
	nameAfter      = "resolver RSS one minute after the burst ÷ before it"
)

func (b *bench) burst(ctx context.Context) error {
	// The forwarding section before leaves the resolver's heap grown (after
	// its overload at a fixed rate, about 200 MiB on 2026-11-26), and the
	// Go runtime returns memory to the OS slowly: a fresh resolver makes
	// "before" the RSS of a resolver that has held nothing yet, so that the
	// peak above it is what the 5,000 held requests cost.
	if err := restartResolver(ctx); err != nil {
		return err
	}
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
	anonBefore, fileBefore, _ := rssParts(pid)
	metricsURL := "http://" + net.JoinHostPort(rpod.Status.PodIP, "8012") + "/metrics"
	goBefore := b.goMemory(ctx, metricsURL)
	peakNote := "VmHWM, reset just before the burst"
	if err := resetPeak(pid); err != nil {
		peakNote = "VmHWM since the resolver started (could not reset it: " + err.Error() + ")"
	}
	var maxHeld, maxGoroutines atomic.Int64
	heapTaken := false
	pctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for pctx.Err() == nil {
			if text, err := b.scrape(pctx, metricsURL); err == nil {
				v := int64(report.ParseGauge(text, "elasti_resolver_held_requests", `namespace="`+nsBurst+`"`))
				if v > maxHeld.Load() {
					maxHeld.Store(v)
				}
				// The runtime keeps a record of each goroutine it ran
				// at once for reuse, and never frees it: the RSS after.
				if g := int64(report.ParseGauge(text, "go_goroutines", "")); g > maxGoroutines.Load() {
					maxGoroutines.Store(g)
				}
				if v == burstCount && !heapTaken {
					heapTaken = true
					top, err := b.profileResolver(pctx, rpod.Status.PodIP, "heap", "resolver-heap.pprof", "inuse_space")
					if err != nil {
						b.note("The resolver's heap profile could not be taken: %s.", oneLine(err.Error()))
					} else {
						b.note("The resolver's heap profile with all 5,000 requests held (bench/results/resolver-heap.pprof), in-use share of the heaviest functions: %s.", top)
					}
				}
			}
			select {
			case <-pctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	url := "http://" + net.JoinHostPort(ip, fmt.Sprint(servicePort)) + "/"
	readyC, err := watchReady(ctx, nsBurst, appName)
	if err != nil {
		stop()
		wg.Wait()
		return err
	}
	logf("burst: %d concurrent requests at zero through %s", burstCount, url)
	r, err := b.runLoad(ctx, "-mode", "burst", "-url", url, "-count", fmt.Sprint(burstCount), "-timeout", "120s")
	stop()
	wg.Wait()
	if err != nil {
		return err
	}
	burstEnd := time.Now()
	_, peak, err := memMiB(pid)
	if err != nil {
		return err
	}
	ready, err := waitFor(ctx, readyC, time.Second)
	if err != nil {
		return fmt.Errorf("the burst's first ready endpoint: %w", err)
	}
	coldStart := float64(ready.at.UnixNano()-r.Start) / 1e6
	b.add(fig(secBurst, "requests that succeeded (HTTP 200)", "of 5,000", []float64{float64(r.OK)}, nil, loadNote(r, "")))
	b.add(fig(secBurst, "most requests held at once (resolver's held gauge, scraped every 100 ms)", "requests", []float64{float64(maxHeld.Load())}, nil, ""))
	b.add(fig(secBurst, "client latency of the held requests", "ms", r.LatencyMs, nil, "the app starts listening 5 s after its pod starts"))
	b.add(fig(secBurst, namePeak, "MiB", []float64{peak}, goalFor(namePeak),
		fmt.Sprintf("%s; RSS before: %.1f MiB", peakNote, before)))
	b.add(fig(secBurst, namePerHeld, "KiB", []float64{(peak - before) * 1024 / burstCount}, goalFor(namePerHeld), ""))

	// The same burst at the pod, now warm, straight to its IP: what the
	// release is compared with.
	pods, err := kube.Pods(ctx, nsBurst, map[string]string{"app": appName})
	if err != nil {
		return err
	}
	if len(pods) != 1 {
		return fmt.Errorf("want 1 demo app pod in %s, found %d", nsBurst, len(pods))
	}
	direct := "http://" + net.JoinHostPort(pods[0].Status.PodIP, fmt.Sprint(demoPort)) + "/"
	logf("burst: %d concurrent requests at the warm pod %s", burstCount, direct)
	w, err := b.runLoad(ctx, "-mode", "burst", "-url", direct, "-count", fmt.Sprint(burstCount), "-timeout", "120s")
	if err != nil {
		return err
	}
	held, warm := r.Elapsed*1000, w.Elapsed*1000
	b.add(fig(secBurst, "burst at zero: first request → first ready endpoint (the cold start)", "ms", []float64{coldStart}, nil, "the Service's own EndpointSlice, watched by the bench"))
	b.add(fig(secBurst, "burst at zero: all answered", "ms", []float64{held}, nil, "from the moment all 5,000 were let go"))
	b.add(fig(secBurst, "the same burst at the warm pod, straight to its IP: all answered", "ms", []float64{warm}, nil, loadNote(w, "")))
	if warm > 0 {
		b.add(fig(secBurst, nameBurstRatio, "×", []float64{held / (1.3*warm + coldStart)}, goalFor(nameBurstRatio),
			fmt.Sprintf("%.0f ms ÷ (1.3 × %.0f ms + %.0f ms); the release alone (all answered − cold start) took %.0f ms", held, warm, coldStart, held-coldStart)))
	}

	// The resolver's memory one minute after the burst.
	select {
	case <-time.After(time.Until(burstEnd.Add(time.Minute))):
	case <-ctx.Done():
		return ctx.Err()
	}
	after, _, err := memMiB(pid)
	if err != nil {
		return err
	}
	anonAfter, fileAfter, _ := rssParts(pid)
	if before > 0 {
		b.add(fig(secBurst, nameAfter, "× before", []float64{after / before}, goalFor(nameAfter),
			fmt.Sprintf("VmRSS %.1f MiB one minute after the last answer, %.1f MiB before the burst; of which RssAnon (heap, stacks) %.1f after, %.1f before, and RssFile (the binary's pages touched) %.1f after, %.1f before%s",
				after, before, anonAfter, anonBefore, fileAfter, fileBefore, goBefore.to(b.goMemory(ctx, metricsURL), maxGoroutines.Load()))))
	}
	return nil
}

// goMemory is where the Go runtime's memory of a process is, from the
// memstats figures of its Go collector, in MiB; nil when they cannot be
// scraped.
type goMemory map[string]float64

// goMemoryParts names the parts goMemory reads, in the order they are
// reported.
var goMemoryParts = []struct{ name, what string }{
	{"go_memstats_heap_inuse_bytes", "heap in use"},
	{"go_memstats_heap_alloc_bytes", "of it live objects"},
	{"go_memstats_stack_inuse_bytes", "goroutine stacks"},
	{"go_memstats_heap_idle_bytes", "free heap"},
	{"go_memstats_heap_released_bytes", "of it returned to the OS"},
	{"go_memstats_other_sys_bytes", "other runtime memory"},
	{"go_memstats_gc_sys_bytes", "GC metadata"},
	{"go_memstats_mspan_inuse_bytes", "span records"},
}

func (b *bench) goMemory(ctx context.Context, metricsURL string) goMemory {
	text, err := b.scrape(ctx, metricsURL)
	if err != nil {
		logf("the resolver's Go memory figures: %v", err)
		return nil
	}
	m := goMemory{}
	for _, p := range goMemoryParts {
		m[p.name] = report.ParseGauge(text, p.name, "") / (1 << 20)
	}
	m["go_goroutines"] = report.ParseGauge(text, "go_goroutines", "")
	return m
}

// to describes the change from m to later, for a figure's note; peak is
// the most goroutines seen at once in between (0: not seen).
func (m goMemory) to(later goMemory, peak int64) string {
	if m == nil || later == nil {
		return ""
	}
	var parts []string
	for _, p := range goMemoryParts {
		parts = append(parts, fmt.Sprintf("%s %.1f → %.1f", p.what, m[p.name], later[p.name]))
	}
	most := ""
	if peak > 0 {
		most = fmt.Sprintf(" (%d at most during the burst, scraped every 100 ms)", peak)
	}
	return fmt.Sprintf(". The Go runtime's own figures (memstats, MiB), before → after: %s; goroutines %.0f → %.0f%s",
		strings.Join(parts, ", "), m["go_goroutines"], later["go_goroutines"], most)
}
