package scaling

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Bounds of the history a podMetrics trigger keeps in memory.
const (
	// maxSamplesPerPod bounds one pod's samples. Past it samples closer
	// than a 64th of the window to the one kept before them are dropped
	// (see thin).
	maxSamplesPerPod = 128
	// maxPodsPerTrigger bounds the pods, ready or gone within the window,
	// one trigger remembers. Past it the history starts again.
	maxPodsPerTrigger = 1024
	// sweepEvery is how often stale histories are looked for.
	sweepEvery = time.Minute
)

// historyKey names the samples of one podMetrics trigger of one
// ElastiService. The UID keeps a deleted and re-created ElastiService from
// inheriting the old one's samples. spec is what the samples measure
// (metric, labels, port, path): a changed trigger starts a history of its
// own, and the old one goes stale. Two triggers alike share one.
type historyKey struct {
	namespace, name string
	uid             types.UID
	spec            string
}

// counterHistories is the Evaluator's memory of podMetrics triggers. Its
// zero value is ready to use. An entry that has not been fed for a whole
// window is stale: the next observation of it starts again, and a sweep
// drops it, which is how the histories of deleted ElastiServices go.
type counterHistories struct {
	mu        sync.Mutex
	byKey     map[historyKey]*counterHistory
	lastSweep time.Time
}

// observe records one scrape round of a trigger and returns the counter's
// increase over the window ending now, since when the history is complete,
// and whether that covers the whole window. values holds the summed counter
// of every pod scraped this round, by pod key.
func (c *counterHistories) observe(key historyKey, now time.Time, window time.Duration, values map[string]float64) (increase float64, since time.Time, covered bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byKey == nil {
		c.byKey = map[historyKey]*counterHistory{}
	}
	if now.Sub(c.lastSweep) >= sweepEvery {
		c.lastSweep = now
		for k, h := range c.byKey {
			if h.stale(now) {
				delete(c.byKey, k)
			}
		}
	}
	h := c.byKey[key]
	if h == nil || h.stale(now) {
		h = &counterHistory{}
		c.byKey[key] = h
	}
	h.record(now, window, values)
	increase, covered = h.increase(now, window)
	return increase, h.since, covered
}

// counterHistory is one trigger's samples, per pod.
//
// Each sample carries, beside the raw counter, the pod's running total:
// the counter's increase since the pod's first sample, with resets
// undone. A counter that drops restarted from zero (the container
// restarted), so its new value is all increase since the reset. The
// increase over a window is then the latest total minus the total of the
// last sample at or before the window's start, which holds however many
// resets fall in between, and which any subset of the samples still
// answers, only less tightly (see thin).
type counterHistory struct {
	// since is when the history starts to be complete: the first
	// observation, moved forward when samples before a window's start are
	// pruned.
	since time.Time
	// last is the latest observation, and window the window it used.
	last   time.Time
	window time.Duration
	pods   map[string]*podSeries
}

// podSeries is one pod's samples, oldest first.
type podSeries struct {
	samples []counterSample
}

type counterSample struct {
	at time.Time
	// raw is the counter as scraped.
	raw float64
	// total is the pod's increase since it was first counted.
	total float64
}

// stale reports whether the history missed a whole window: pods may have
// come, served and gone unseen, so it cannot be trusted.
func (h *counterHistory) stale(now time.Time) bool {
	return !h.last.IsZero() && now.Sub(h.last) > h.window
}

// record adds one observation. A pod seen for the first time after the
// first observation is new: it was not ready at the previous one, its
// counter started at zero when its process started, and its whole first
// value counts as increase at the time it is seen. That may count requests
// served before the pod was first ready (its readiness probes, say), never
// fewer than it served, which errs towards awake. Pods seen at the first
// observation have an unknown past and count from their first sample;
// that is why the history must first cover a whole window.
func (h *counterHistory) record(now time.Time, window time.Duration, values map[string]float64) {
	if !h.last.IsZero() && !now.After(h.last) {
		return // an observation out of order or at the same instant adds nothing
	}
	first := h.since.IsZero()
	if first {
		h.since = now
		h.pods = map[string]*podSeries{}
	}
	for pod, v := range values {
		s := h.pods[pod]
		if s == nil {
			s = &podSeries{}
			h.pods[pod] = s
			total := v
			if first {
				total = 0
			}
			s.samples = append(s.samples, counterSample{at: now, raw: v, total: total})
			continue
		}
		prev := s.samples[len(s.samples)-1]
		inc := v - prev.raw
		if v < prev.raw {
			inc = v // reset: the counter restarted from zero
		}
		s.samples = append(s.samples, counterSample{at: now, raw: v, total: prev.total + inc})
	}
	h.last, h.window = now, window
	h.prune(now.Add(-window), window)
	if len(h.pods) > maxPodsPerTrigger && len(h.pods) > len(values) {
		// Too many gone pods to remember: start again from the pods of
		// this observation. The trigger then reports active for a window,
		// never idle on a partial view. (The ready pods alone are never
		// forgotten: there are as many as the target has replicas.)
		*h = counterHistory{}
		h.record(now, window, values)
	}
}

// prune drops what no window ending now or later can use: each pod's
// samples before its last one at or before start (that one is the
// baseline), and pods whose latest sample is at or before start (gone
// pods whose increase has left the window). It then thins pods with too
// many samples.
func (h *counterHistory) prune(start time.Time, window time.Duration) {
	for pod, s := range h.pods {
		b := baselineIndex(s.samples, start)
		if b == len(s.samples)-1 {
			delete(h.pods, pod)
			continue
		}
		if b > 0 {
			s.samples = append(s.samples[:0], s.samples[b:]...)
		}
		if len(s.samples) > maxSamplesPerPod {
			s.samples = thin(s.samples, window/(maxSamplesPerPod/2))
		}
	}
	if h.since.Before(start) {
		// Samples before start may be gone now: the history is complete
		// from start on, which matters if the window grows.
		h.since = start
	}
}

// baselineIndex is the index of the last sample at or before start, or -1.
func baselineIndex(samples []counterSample, start time.Time) int {
	b := -1
	for i, s := range samples {
		if s.at.After(start) {
			break
		}
		b = i
	}
	return b
}

// thin keeps the first and the last samples, and between them each sample
// at least spacing after the one kept before it: at most a window's worth
// of spacings, wherever the samples fall. A later baseline is then at most
// spacing earlier than the window's start, which counts a little more
// increase, never less: thinning errs towards awake.
func thin(samples []counterSample, spacing time.Duration) []counterSample {
	out := samples[:1]
	for _, s := range samples[1 : len(samples)-1] {
		if s.at.Sub(out[len(out)-1].at) >= spacing {
			out = append(out, s)
		}
	}
	return append(out, samples[len(samples)-1])
}

// increase sums every pod's increase over the window ending now, and says
// whether the history is complete for that whole window.
func (h *counterHistory) increase(now time.Time, window time.Duration) (float64, bool) {
	start := now.Add(-window)
	var sum float64
	for _, s := range h.pods {
		base := 0.0 // a pod first counted inside the window counts from zero
		if b := baselineIndex(s.samples, start); b >= 0 {
			base = s.samples[b].total
		}
		sum += s.samples[len(s.samples)-1].total - base
	}
	return sum, !h.since.IsZero() && !h.since.After(start)
}

// seen reports whether key's history, still current, holds samples of a
// pod: some pod's page had the counter's series within the window.
func (c *counterHistories) seen(key historyKey, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.byKey[key]
	return h != nil && !h.stale(now) && len(h.pods) > 0
}

// recentRate is the rate of key's counter over the last window, shorter
// than the trigger's own: the increase since each pod's last sample at or
// before the window's start, over the time since the earliest of those
// samples (or since the history began, when that is later). A baseline
// older than the window's start lengthens the span as much as it adds
// increase, so the rate is not inflated; a pod new within the window counts
// its whole counter. span is zero when there is no rate yet (one
// observation, or none).
func (c *counterHistories) recentRate(key historyKey, now time.Time, window time.Duration) (perSecond float64, span time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.byKey[key]
	if h == nil || h.since.IsZero() {
		return 0, 0
	}
	start := now.Add(-window)
	from := start
	var sum float64
	for _, s := range h.pods {
		base := 0.0
		if b := baselineIndex(s.samples, start); b >= 0 {
			base = s.samples[b].total
			if s.samples[b].at.Before(from) {
				from = s.samples[b].at
			}
		}
		sum += s.samples[len(s.samples)-1].total - base
	}
	if h.since.After(from) {
		from = h.since
	}
	span = now.Sub(from)
	if span <= 0 {
		return 0, 0
	}
	return sum / span.Seconds(), span
}
