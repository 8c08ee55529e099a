package scaling

import (
	"testing"
	"time"
)

// step is one observation: when, and the counter of each pod scraped.
type step struct {
	at     int // seconds from the start
	values map[string]float64
}

func TestCounterHistoryIncrease(t *testing.T) {
	const window = 60 * time.Second
	for _, tc := range []struct {
		name        string
		steps       []step
		want        float64
		wantCovered bool
	}{
		{
			name:  "not enough history",
			steps: []step{{0, map[string]float64{"a": 5}}, {30, map[string]float64{"a": 9}}},
			want:  4,
		},
		{
			name:        "exactly one window of history",
			steps:       []step{{0, map[string]float64{"a": 5}}, {30, map[string]float64{"a": 5}}, {60, map[string]float64{"a": 5}}},
			want:        0,
			wantCovered: true,
		},
		{
			name: "pods present at the start count from their first sample",
			steps: []step{
				{0, map[string]float64{"a": 1000, "b": 7}},
				{60, map[string]float64{"a": 1003, "b": 7}},
			},
			want: 3, wantCovered: true,
		},
		{
			name: "increase before the window's start does not count",
			steps: []step{
				{0, map[string]float64{"a": 0}}, {30, map[string]float64{"a": 5}},
				{60, map[string]float64{"a": 10}}, {90, map[string]float64{"a": 20}},
			},
			want: 15, wantCovered: true, // from the baseline at 30 s: 20 - 5
		},
		{
			name: "a counter reset counts the new value as increase",
			steps: []step{
				{0, map[string]float64{"a": 10}}, {30, map[string]float64{"a": 20}},
				{60, map[string]float64{"a": 3}}, {90, map[string]float64{"a": 5}},
			},
			want: 5, wantCovered: true, // 20 -> 3 is +3, then +2
		},
		{
			name: "two resets inside the window",
			steps: []step{
				{0, map[string]float64{"a": 50}}, {20, map[string]float64{"a": 4}},
				{40, map[string]float64{"a": 1}}, {60, map[string]float64{"a": 2}},
			},
			want: 4 + 1 + 1, wantCovered: true,
		},
		{
			name: "a new pod counts its first value",
			steps: []step{
				{0, map[string]float64{"a": 1}}, {30, map[string]float64{"a": 1}},
				{60, map[string]float64{"a": 1, "b": 4}},
			},
			want: 4, wantCovered: true,
		},
		{
			name: "a new pod's first value leaves with the window",
			steps: []step{
				{0, map[string]float64{"a": 1}}, {30, map[string]float64{"a": 1, "b": 4}},
				{60, map[string]float64{"a": 1, "b": 4}}, {90, map[string]float64{"a": 1, "b": 6}},
			},
			want: 2, wantCovered: true, // b's baseline is now its sample at 30 s
		},
		{
			name: "a gone pod's increase counts while inside the window",
			steps: []step{
				{0, map[string]float64{"a": 0, "b": 0}}, {30, map[string]float64{"a": 0, "b": 10}},
				{50, map[string]float64{"a": 0}}, {80, map[string]float64{"a": 0}},
			},
			want: 10, wantCovered: true, // window 20-80 s: b rose 0 -> 10 after its baseline at 0 s
		},
		{
			name: "a gone pod is forgotten once its last sample leaves the window",
			steps: []step{
				{0, map[string]float64{"a": 0, "b": 0}}, {30, map[string]float64{"a": 0, "b": 10}},
				{50, map[string]float64{"a": 0}}, {100, map[string]float64{"a": 0}},
			},
			want: 0, wantCovered: true,
		},
		{
			name: "a pod that comes back continues its series",
			steps: []step{
				{0, map[string]float64{"a": 3}}, {20, map[string]float64{}},
				{40, map[string]float64{"a": 3}}, {60, map[string]float64{"a": 3}},
			},
			want: 0, wantCovered: true,
		},
		{
			name:        "no ready pods is no traffic",
			steps:       []step{{0, map[string]float64{}}, {30, map[string]float64{}}, {60, map[string]float64{}}},
			want:        0,
			wantCovered: true,
		},
		{
			name: "a gap of more than a window starts again",
			steps: []step{
				{0, map[string]float64{"a": 0}}, {30, map[string]float64{"a": 0}},
				{100, map[string]float64{"a": 50}}, {130, map[string]float64{"a": 50}},
			},
			want: 0, // counts from 100 s, so only 30 s of history
		},
		{
			name: "an observation at the same instant adds nothing",
			steps: []step{
				{0, map[string]float64{"a": 0}}, {60, map[string]float64{"a": 2}}, {60, map[string]float64{"a": 9}},
			},
			want: 2, wantCovered: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c counterHistories
			start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			key := historyKey{namespace: "n", name: "es", uid: "u", spec: "s"}
			var got float64
			var covered bool
			for _, s := range tc.steps {
				got, _, covered = c.observe(key, start.Add(time.Duration(s.at)*time.Second), window, s.values)
			}
			if got != tc.want || covered != tc.wantCovered {
				t.Errorf("increase, covered = %v, %v; want %v, %v", got, covered, tc.want, tc.wantCovered)
			}
		})
	}
}

// The recent rate (the metrics API's elasti_requests_per_second) is measured
// over the time its baselines actually span, so samples spaced wider than
// its window neither inflate nor lose it.
func TestCounterHistoryRecentRate(t *testing.T) {
	const window, recent = 300 * time.Second, 30 * time.Second
	for _, tc := range []struct {
		name     string
		steps    []step
		want     float64
		wantSpan time.Duration
	}{
		{
			name:  "one observation is no rate yet",
			steps: []step{{0, map[string]float64{"a": 5}}},
		},
		{
			name:     "young history: since its start",
			steps:    []step{{0, map[string]float64{"a": 5}}, {20, map[string]float64{"a": 45}}},
			want:     2, // 40 over 20 s
			wantSpan: 20 * time.Second,
		},
		{
			name: "samples 30 s apart",
			steps: []step{
				{0, map[string]float64{"a": 0}}, {30, map[string]float64{"a": 30}}, {60, map[string]float64{"a": 330}},
			},
			want: 10, wantSpan: 30 * time.Second, // only the last 30 s
		},
		{
			name: "a baseline older than the window widens the span",
			steps: []step{
				{0, map[string]float64{"a": 0}}, {31, map[string]float64{"a": 62}}, {60, map[string]float64{"a": 120}},
			},
			// The last sample at or before 30 s is at 0 s: 120 over 60 s,
			// not 120 over 30 s.
			want: 2, wantSpan: 60 * time.Second,
		},
		{
			name: "a pod new within the window counts its whole counter",
			steps: []step{
				{0, map[string]float64{"a": 0}}, {30, map[string]float64{"a": 30}},
				{60, map[string]float64{"a": 60, "b": 90}},
			},
			want: 4, wantSpan: 30 * time.Second, // (30 + 90) over 30 s
		},
		{
			name: "a reset counts the new value",
			steps: []step{
				{0, map[string]float64{"a": 0}}, {30, map[string]float64{"a": 100}}, {60, map[string]float64{"a": 15}},
			},
			want: 0.5, wantSpan: 30 * time.Second,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c counterHistories
			start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			key := historyKey{namespace: "n", name: "es", uid: "u", spec: "s"}
			var now time.Time
			for _, s := range tc.steps {
				now = start.Add(time.Duration(s.at) * time.Second)
				c.observe(key, now, window, s.values)
			}
			got, span := c.recentRate(key, now, recent)
			if got != tc.want || span != tc.wantSpan {
				t.Errorf("rate, span = %v, %v; want %v, %v", got, span, tc.want, tc.wantSpan)
			}
		})
	}
}

// A long window fed often keeps a bounded number of samples, and thinning
// only ever counts more increase, never less.
func TestCounterHistoryIsBounded(t *testing.T) {
	var c counterHistories
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	key := historyKey{namespace: "n", name: "es"}
	const window = time.Hour
	var got float64
	var covered bool
	for i := 0; i <= 7200; i++ { // one sample a second for two hours, +1 each
		got, _, covered = c.observe(key, start.Add(time.Duration(i)*time.Second), window, map[string]float64{"a": float64(i)})
	}
	if n := len(c.byKey[key].pods["a"].samples); n > maxSamplesPerPod {
		t.Errorf("%d samples kept, want at most %d", n, maxSamplesPerPod)
	}
	if !covered || got < 3600 || got > 3600*1.1 {
		t.Errorf("increase %v (covered %v), want 3600 or a little more", got, covered)
	}

	// Gone pods past the bound start the history again.
	var many counterHistories
	for i := 0; i <= maxPodsPerTrigger; i++ {
		many.observe(key, start.Add(time.Duration(i)*time.Millisecond), window, map[string]float64{string(rune('a'+i%26)) + time.Duration(i).String(): 1})
	}
	h := many.byKey[key]
	if len(h.pods) != 1 || !h.since.Equal(start.Add(maxPodsPerTrigger*time.Millisecond)) {
		t.Errorf("after %d pods: %d pods kept, history since %s", maxPodsPerTrigger+1, len(h.pods), h.since)
	}
}

// Histories that are not fed for a window are swept: that is how a deleted
// ElastiService's history goes.
func TestCounterHistoriesSweep(t *testing.T) {
	var c counterHistories
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	old := historyKey{namespace: "n", name: "deleted"}
	live := historyKey{namespace: "n", name: "live"}
	c.observe(old, start, time.Minute, map[string]float64{"a": 1})
	for i := 1; i <= 4; i++ {
		c.observe(live, start.Add(time.Duration(i)*30*time.Second), time.Minute, map[string]float64{"a": 1})
	}
	if _, ok := c.byKey[old]; ok {
		t.Error("the stale history was not swept")
	}
	if _, ok := c.byKey[live]; !ok {
		t.Error("the live history was swept")
	}
}
