//go:build bench

package main

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"elasti.dev/elasti/bench/report"
	"elasti.dev/elasti/internal/testenv/estest"
	"elasti.dev/elasti/test/e2e"
)

// Cold-start tails: (a) and (b) over enough wakes for a p99 to mean
// something. A pair of coldstart.go costs 8 to 10 s, mostly in putting the
// app back to sleep and waiting for its pod to go. Here tailApps copies of
// the demo app take turns: one is woken and timed while the others are
// being put back to sleep, so a wake costs little more than the wake itself
// and only one wake is ever in flight.
//
// Each wake also records the machine's CPU pressure (PSI "some": the share
// of wall time in which at least one runnable task waited for a CPU) over
// the spans of (a) and of (b), and the loop as a whole records how long the
// operator's and the resolver's goroutines waited for a CPU (Go's
// /sched/latencies:seconds). Together they say whether the slow wakes are
// Elasti's or the machine's.

const (
	secTails = "Cold-start tails: (a) and (b) over many wakes"
	nsTails  = "bench-tails"
	tailApps = 4
	// tailSlowest is how many of the slowest wakes the pressure rows single
	// out: the samples at and above p95 of 200.
	tailSlowest = 10
	// The Go collector's name for runtime/metrics' /sched/latencies:seconds.
	schedLatencies = "go_sched_latencies_seconds"
)

func tailApp(k int) string { return fmt.Sprintf("tail-%d", k) }

// tailWake is one timed wake.
type tailWake struct {
	a, b       float64 // ms, as in coldstart.go
	psiA, psiB float64 // CPU pressure over each span, % of it
	okA, okB   bool    // pressure was readable
}

func (b *bench) coldTails(ctx context.Context) error {
	n := b.tailRuns
	if n <= 0 {
		return nil
	}
	if err := createNamespace(ctx, nsTails); err != nil {
		return err
	}
	urls := make([]string, tailApps)
	for k := range tailApps {
		name := tailApp(k)
		if err := kube.Client.Create(ctx, demoDeployment(nsTails, name, 1)); err != nil {
			return err
		}
		if err := kube.Client.Create(ctx, e2e.DemoAppHTTPService(nsTails, name)); err != nil {
			return err
		}
		if err := kube.Client.Create(ctx, estest.New(nsTails, name)); err != nil {
			return err
		}
	}
	for k := range tailApps {
		ip, err := clusterIP(ctx, nsTails, tailApp(k))
		if err != nil {
			return err
		}
		urls[k] = "http://" + net.JoinHostPort(ip, fmt.Sprint(servicePort)) + "/"
	}

	// asleep[k] receives once app k is asleep, its pod gone and kube-proxy
	// given time to program the proxy slice.
	asleep := make([]chan error, tailApps)
	var pending sync.WaitGroup
	putToSleep := func(k int) {
		done := make(chan error, 1)
		asleep[k] = done
		pending.Go(func() {
			name := tailApp(k)
			err := waitAwake(ctx, nsTails, name)
			if err == nil {
				err = sleepCold(ctx, nsTails, name, -1)
			}
			done <- err
		})
	}
	// The ElastiServices' ports go back to the range for the scale figure,
	// and nothing of this loop runs on into the next figures.
	defer func() {
		pending.Wait()
		if err := deleteAllES(ctx, nsTails); err != nil {
			logf("tails: delete the ElastiServices: %v", err)
		}
	}()
	for k := range tailApps {
		putToSleep(k)
	}

	op, rs := b.schedScrape(ctx, operatorPods, "8080"), b.schedScrape(ctx, resolverPods, "8012")
	apiBefore := apiserverScrape(ctx)
	if rs != nil {
		why := ""
		if rs.gomaxprocs == 2 && runtime.NumCPU() >= 2 {
			// Go's default under a CPU limit is the limit rounded up, but
			// never below 2 (runtime/cgroup_linux.go).
			why = ": Go's default under a CPU limit rounds a limit below 2 up to 2"
		}
		b.note("The resolver ran with GOMAXPROCS %.0f (go_sched_gomaxprocs_threads) under its 1-CPU limit, on a node of %d CPUs%s.", rs.gomaxprocs, runtime.NumCPU(), why)
	}
	var wakes []tailWake
	start := time.Now()
	for i := range n {
		k := i % tailApps
		if err := <-asleep[k]; err != nil {
			return fmt.Errorf("tails: put %s to sleep: %w", tailApp(k), err)
		}
		w, err := tailOnce(ctx, b.nodeClient(90*time.Second), nsTails, tailApp(k), urls[k])
		if err != nil {
			return fmt.Errorf("tails: wake %d of %s: %w", i+1, tailApp(k), err)
		}
		wakes = append(wakes, w)
		if (i+1)%50 == 0 {
			logf("tails: %d/%d wakes, (a) %.1f ms, (b) %.1f ms", i+1, n, w.a, w.b)
		}
		putToSleep(k)
	}
	elapsed := time.Since(start)
	b.addTails(wakes, elapsed)
	b.addSched(secTails, "Go scheduler: operator's goroutines that waited for a CPU", "the loop", op.buckets(), b.schedScrape(ctx, operatorPods, "8080").buckets())
	b.addSched(secTails, "Go scheduler: resolver's goroutines that waited for a CPU", "the loop", rs.buckets(), b.schedScrape(ctx, resolverPods, "8012").buckets())
	b.addAPIServer(apiBefore, apiserverScrape(ctx))
	return nil
}

// tailOnce wakes app name at zero and keeps (a), (b) and the CPU pressure
// over each.
func tailOnce(ctx context.Context, c *http.Client, ns, name, url string) (tailWake, error) {
	t, err := timedWake(ctx, c, ns, name, url)
	if err != nil {
		return tailWake{}, err
	}
	w := tailWake{a: ms(t.scaled.at.Sub(t.wrote.at)), b: ms(t.first.at.Sub(t.ready.at))}
	w.psiA, w.okA = t.wrote.share(t.scaled)
	w.psiB, w.okB = t.ready.share(t.first)
	return w, nil
}

func (b *bench) addTails(wakes []tailWake, elapsed time.Duration) {
	var as, bs []float64
	for _, w := range wakes {
		as, bs = append(as, w.a), append(bs, w.b)
	}
	per := ""
	if len(wakes) > 0 {
		per = fmt.Sprintf("; %d wakes in %s, %.1f s a wake", len(wakes), elapsed.Round(time.Second), elapsed.Seconds()/float64(len(wakes)))
	}
	b.add(fig(secTails, nameA, "ms", as, goalFor(nameA),
		fmt.Sprintf("%d copies of the demo app take turns, one wake in flight at a time; the end is the Deployment's watch event, so one watch delivery is included%s", tailApps, per)))
	b.add(fig(secTails, nameB, "ms", bs, goalFor(nameB),
		"the start is the watch event the resolver's informer also waits for; the end includes the pod's answer and the way back"))
	b.addPressure(wakes, "(a)", func(w tailWake) (float64, float64, bool) { return w.a, w.psiA, w.okA })
	b.addPressure(wakes, "(b)", func(w tailWake) (float64, float64, bool) { return w.b, w.psiB, w.okB })
}

// addPressure adds the CPU pressure over one span for every wake and for the
// slowest wakes of that span, so a reader can see whether the tail is the
// machine's.
func (b *bench) addPressure(wakes []tailWake, span string, pick func(tailWake) (lat, psi float64, ok bool)) {
	type sample struct{ lat, psi float64 }
	var xs []sample
	for _, w := range wakes {
		if lat, psi, ok := pick(w); ok {
			xs = append(xs, sample{lat, psi})
		}
	}
	name := "machine CPU pressure (PSI some) during " + span
	if len(xs) == 0 {
		b.add(skipped(secTails, name+", every wake", "%", nil, "/proc/pressure/cpu is not readable on this machine"))
		return
	}
	slices.SortFunc(xs, func(x, y sample) int { return cmp.Compare(y.lat, x.lat) })
	var all, slow []float64
	for i, x := range xs {
		all = append(all, x.psi)
		if i < tailSlowest {
			slow = append(slow, x.psi)
		}
	}
	b.add(fig(secTails, name+", every wake", "%", all, nil,
		"share of the span in which some runnable task on the machine waited for a CPU, from the kernel's /proc/pressure/cpu read at both ends of the span"))
	b.add(fig(secTails, fmt.Sprintf("machine CPU pressure during %s, its %d slowest wakes", span, len(slow)), "%", slow, nil,
		fmt.Sprintf("the same for the wakes with the largest %s only (%.1f to %.1f ms)", span, xs[len(slow)-1].lat, xs[0].lat)))
}

// schedReading is a component's Go scheduler figures at one moment, and,
// for the resolver, its forward latencies.
type schedReading struct {
	latencies  []report.Bucket
	gomaxprocs float64
	forward    []report.Bucket
}

func (r *schedReading) buckets() []report.Bucket {
	if r == nil {
		return nil
	}
	return r.latencies
}

func (r *schedReading) forwardBuckets() []report.Bucket {
	if r == nil {
		return nil
	}
	return r.forward
}

// schedScrape reads the Go scheduler figures of a component whose metrics
// are served on port, nil when it cannot.
func (b *bench) schedScrape(ctx context.Context, component labels.Set, port string) *schedReading {
	_, pod, err := componentPID(ctx, component)
	if err != nil {
		logf("scheduler latencies: %v", err)
		return nil
	}
	text, err := b.scrape(ctx, "http://"+net.JoinHostPort(pod.Status.PodIP, port)+"/metrics")
	if err != nil {
		logf("scheduler latencies: %v", err)
		return nil
	}
	return &schedReading{
		latencies:  report.ParseHistogram(text, schedLatencies, ""),
		gomaxprocs: report.ParseGauge(text, "go_sched_gomaxprocs_threads", ""),
		forward:    report.ParseHistogram(text, forwardLatency, ""),
	}
}

// addSched adds the share of a component's goroutine wake-ups that waited
// longer than each bucket bound from 0.1 ms to 100 ms for a CPU during what
// ran between the two scrapes.
func (b *bench) addSched(section, name, during string, before, after []report.Bucket) {
	if len(after) == 0 {
		b.add(skipped(section, name, "%", nil, "no "+schedLatencies+" histogram scraped"))
		return
	}
	delta := report.SubtractBuckets(after, before)
	slices.SortFunc(delta, func(x, y report.Bucket) int { return cmp.Compare(x.UpperBound, y.UpperBound) })
	total := delta[len(delta)-1].Count
	if total <= 0 {
		b.add(skipped(section, name, "%", nil, "no goroutine was scheduled"))
		return
	}
	// The Go collector re-buckets /sched/latencies in powers of ten from
	// the runtime's own bounds (…, about 0.1 ms, 1 ms, 10 ms, …): one row
	// for each bound from 0.1 ms to 100 ms.
	for _, bk := range delta {
		if bk.UpperBound < 1e-4 || bk.UpperBound > 0.1 {
			continue
		}
		over := (total - bk.Count) / total * 100
		b.add(fig(section, fmt.Sprintf("%s longer than %s ms", name, strconv.FormatFloat(bk.UpperBound*1000, 'g', 3, 64)), "%", []float64{over}, nil,
			fmt.Sprintf("share of the %.0f goroutine wake-ups during %s (runtime/metrics /sched/latencies:seconds, scraped before and after)", total, during)))
	}
}

// pressure is one reading of /proc/pressure/cpu's "some" total.
type pressure struct {
	at    time.Time
	total time.Duration
	ok    bool
}

func readPressure() pressure {
	p := pressure{at: time.Now()}
	raw, err := os.ReadFile("/proc/pressure/cpu")
	if err != nil {
		return p
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if !strings.HasPrefix(line, "some ") {
			continue
		}
		i := strings.Index(line, "total=")
		if i < 0 {
			return p
		}
		us, err := strconv.ParseInt(strings.TrimSpace(line[i+len("total="):]), 10, 64)
		if err != nil {
			return p
		}
		p.total, p.ok = time.Duration(us)*time.Microsecond, true
	}
	return p
}

// share is the pressure between p and later as a percentage of that span.
func (p pressure) share(later pressure) (float64, bool) {
	span := later.at.Sub(p.at)
	if !p.ok || !later.ok || span <= 0 {
		return 0, false
	}
	return min(100, float64(later.total-p.total)/float64(span)*100), true
}
