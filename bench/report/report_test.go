package report

import (
	"math"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestSummarize(t *testing.T) {
	s := Summarize([]float64{5, 1, 3, 2, 4})
	if s.N != 5 || s.Min != 1 || s.Median != 3 || s.P99 != 5 || s.Max != 5 {
		t.Fatalf("got %+v", s)
	}
	s = Summarize([]float64{4, 1, 3, 2})
	if s.Median != 2.5 {
		t.Fatalf("median of an even count: got %v, want 2.5", s.Median)
	}
	if s := Summarize(nil); s.N != 0 {
		t.Fatalf("empty: %+v", s)
	}
	xs := make([]float64, 1000)
	for i := range xs {
		xs[i] = float64(1000 - i) // 1..1000, reversed
	}
	s = Summarize(xs)
	if s.P99 != 990 || s.Min != 1 || s.Median != 500.5 {
		t.Fatalf("1..1000: got %+v", s)
	}
	if xs[0] != 1000 {
		t.Fatal("Summarize sorted its input in place")
	}
}

func TestHistogramQuantile(t *testing.T) {
	b := []Bucket{{0.001, 0}, {0.002, 50}, {0.004, 100}, {math.Inf(1), 100}}
	if got := HistogramQuantile(0.5, b); got != 0.002 {
		t.Errorf("p50 = %v, want 0.002", got)
	}
	if got := HistogramQuantile(0.75, b); math.Abs(got-0.003) > 1e-12 {
		t.Errorf("p75 = %v, want 0.003", got)
	}
	inf := []Bucket{{0.001, 1}, {math.Inf(1), 10}}
	if got := HistogramQuantile(0.99, inf); got != 0.001 {
		t.Errorf("rank in +Inf: %v, want the largest finite bound", got)
	}
	if got := HistogramQuantile(0.5, []Bucket{{1, 0}}); !math.IsNaN(got) {
		t.Errorf("no samples: %v, want NaN", got)
	}
	d := SubtractBuckets([]Bucket{{1, 10}, {2, 30}}, []Bucket{{1, 4}, {2, 5}})
	if d[0].Count != 6 || d[1].Count != 25 {
		t.Errorf("SubtractBuckets = %v", d)
	}
}

const benchOut = `goos: linux
goarch: amd64
pkg: elasti.dev/elasti/internal/resolver
cpu: Intel(R) Xeon(R) Processor
BenchmarkHoldQueue-2       	 3548578	       297.3 ns/op	      80 B/op	       2 allocs/op
BenchmarkHoldQueue-2       	 3548578	       301.0 ns/op	      80 B/op	       2 allocs/op
BenchmarkPortMapLookup-2   	13532528	        92.63 ns/op	       0 B/op	       0 allocs/op
BenchmarkHeldMemory/paced-2         	       3	 255550092 ns/op	     14460 B/held	       110.0 MiB-peakRSS	       114.0 ms-release	66200821 B/op	  477439 allocs/op
BenchmarkHeldMemory/paced-2         	       3	 222966510 ns/op	     14465 B/held	       112.0 MiB-peakRSS	       118.0 ms-release	65496621 B/op	  475858 allocs/op
PASS
ok  	elasti.dev/elasti/internal/resolver	5.296s
`

func TestParseGoBench(t *testing.T) {
	m := ParseGoBench(benchOut)
	if len(m) != 3 {
		t.Fatalf("got %d benchmarks: %+v", len(m), m)
	}
	held := m[2]
	want := []Metric{{"B/held", 14462.5}, {"MiB-peakRSS", 111}, {"ms-release", 116}}
	if held.Name != "BenchmarkHeldMemory/paced" || held.BytesPerOp != 65496621 || !slices.Equal(held.Other, want) {
		t.Errorf("HeldMemory: %+v, want its own metrics %v", held, want)
	}
	hq := m[0]
	if hq.Name != "BenchmarkHoldQueue" || hq.Package != "elasti.dev/elasti/internal/resolver" || hq.NsPerOp.N != 2 || hq.NsPerOp.Min != 297.3 || hq.BytesPerOp != 80 || hq.AllocsPerOp != 2 {
		t.Errorf("HoldQueue: %+v", hq)
	}
	if m[1].NsPerOp.Median != 92.63 {
		t.Errorf("PortMapLookup: %+v", m[1])
	}
}

func TestMarkdownAndCheck(t *testing.T) {
	r := Report{
		Environment: "2 CPUs",
		Command:     "make bench",
		Duration:    "1m",
		Figures: []Figure{
			{Section: "Cold start", Name: "(a) arrival to scale", Unit: "ms", Summary: Summarize([]float64{1, 2, 3}), Goal: &Goal{Stat: "p99", Max: 5}},
			{Section: "Cold start", Name: "(b) ready to forward", Unit: "ms", Summary: Summarize([]float64{4, 6, 8}), Goal: &Goal{Stat: "p99", Max: 5}},
			{Section: "Cold start", Name: "(c)-(d)", Unit: "ms", Goal: &Goal{Stat: "median", Max: 50}, Skipped: "no cluster"},
			{Section: "Idle", Name: "operator RSS", Unit: "MiB", Summary: Summarize([]float64{30.5}), Note: "a|b"},
		},
		Micro: ParseGoBench(benchOut),
	}
	md := r.Markdown()
	for _, want := range []string{
		"Environment: 2 CPUs",
		"## Cold start",
		"| (a) arrival to scale | 3 | 1 | 2 | 3 | ms | p99 < 5 ms (met) |",
		"p99 < 5 ms (missed)",
		"not measured: no cluster",
		"a\\|b",
		"| BenchmarkHoldQueue | elasti.dev/elasti/internal/resolver | 2 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	lines, ok := r.Check()
	if ok || len(lines) != 3 || !strings.HasPrefix(lines[0], "ok") || !strings.HasPrefix(lines[1], "MISSED") || !strings.HasPrefix(lines[2], "n/a") {
		t.Errorf("Check = %v, %v", lines, ok)
	}
}

func TestSaveLoad(t *testing.T) {
	dir := t.TempDir()
	r := Report{Environment: "x", Figures: []Figure{{Section: "s", Name: "nan", Unit: "ms", Summary: Summary{N: 1, Min: math.NaN()}}}}
	if err := r.Save(dir+"/r.json", dir+"/r.md"); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir + "/r.json")
	if err != nil {
		t.Fatal(err)
	}
	if got.Figures[0].Skipped == "" {
		t.Errorf("a NaN figure should be saved as not measured: %+v", got.Figures[0])
	}
}

func TestFormatValue(t *testing.T) {
	for v, want := range map[float64]string{3: "3", 1234.56: "1235", 12.345: "12.3", 1.2345: "1.23", math.NaN(): "n/a"} {
		if got := FormatValue(v); got != want {
			t.Errorf("FormatValue(%v) = %q, want %q", v, got, want)
		}
	}
}

const metricsText = `# HELP elasti_operator_reconcile_duration_seconds x
# TYPE elasti_operator_reconcile_duration_seconds histogram
elasti_operator_reconcile_duration_seconds_bucket{result="success",le="0.001"} 2
elasti_operator_reconcile_duration_seconds_bucket{result="success",le="0.002"} 8
elasti_operator_reconcile_duration_seconds_bucket{result="success",le="+Inf"} 10
elasti_operator_reconcile_duration_seconds_bucket{result="error",le="0.001"} 0
elasti_operator_reconcile_duration_seconds_bucket{result="error",le="0.002"} 1
elasti_operator_reconcile_duration_seconds_bucket{result="error",le="+Inf"} 1
elasti_resolver_held_requests{elastiservice="app",namespace="bench-burst"} 4999
elasti_resolver_held_requests{elastiservice="app",namespace="other"} 3
`

func TestParseMetrics(t *testing.T) {
	b := ParseHistogram(metricsText, "elasti_operator_reconcile_duration_seconds", "")
	got := map[float64]float64{}
	for _, x := range b {
		got[x.UpperBound] = x.Count
	}
	if got[0.001] != 2 || got[0.002] != 9 || got[math.Inf(1)] != 11 || len(got) != 3 {
		t.Errorf("summed buckets = %v", got)
	}
	if v := ParseGauge(metricsText, "elasti_resolver_held_requests", `namespace="bench-burst"`); v != 4999 {
		t.Errorf("gauge = %v", v)
	}
	if v := ParseGauge(metricsText, "missing", ""); v != 0 {
		t.Errorf("missing gauge = %v", v)
	}
}

func TestSplice(t *testing.T) {
	doc := "# x\n\n" + TableBegin + "\nold table\n" + TableEnd + "\n\nafter\n"
	got, err := Splice(doc, TableBegin, TableEnd, "new table\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "# x\n\n" + TableBegin + "\nnew table\n" + TableEnd + "\n\nafter\n"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if _, err := Splice("# no markers\n", TableBegin, TableEnd, "t"); err == nil {
		t.Fatal("a page without markers was accepted")
	}
	if _, err := Splice(doc, HeadlineBegin, HeadlineEnd, "t"); err == nil {
		t.Fatal("the headline was spliced into a page that has only the full table's markers")
	}
}

func TestFullTable(t *testing.T) {
	r := Report{Command: "make bench", Duration: "7m", Environment: "2 CPUs",
		Figures: []Figure{
			{Section: "Cold start", Name: "(a) x", Unit: "ms", Summary: Summarize([]float64{3, 4, 9}), Goal: &Goal{Stat: "p99", Max: 5}},
			{Section: "Idle", Name: "rss", Unit: "MiB", Skipped: "no cluster"},
		},
		Micro: []Micro{{Name: "BenchmarkHoldQueue", NsPerOp: Summarize([]float64{250, 260})}},
	}
	got := r.FullTable()
	for _, want := range []string{
		"`make bench` (took 7m) on 2 CPUs.",
		"| Cold start | (a) x | 3 | 3 | 4 | 9 | ms | p99 < 5 ms (missed) |",
		"| Idle | rss | 0 | | | | MiB |  |",
		"| Go microbenchmark | BenchmarkHoldQueue | 2 | 250 | 255 | 260 | ns/op | |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}

func TestHeadlineTable(t *testing.T) {
	h := Headlines[0]
	r := Report{Command: "make bench", Duration: "7m", Environment: "2 CPUs",
		Figures: []Figure{
			{Section: h.Section, Name: h.Name, Unit: "ms", Summary: Summarize([]float64{1, 2, 3}), Goal: &Goal{Stat: h.Stat, Max: 5}},
			{Section: "Idle", Name: "rss", Unit: "MiB", Summary: Summarize([]float64{30})},
		},
	}
	got := r.HeadlineTable()
	for _, want := range []string{
		"`make bench` (took 7m) on 2 CPUs.",
		"](docs/benchmarks.md#latest-results)",
		"| " + h.Label + " | " + h.Stat + " of 3 | 2 ms | " + h.Stat + " < 5 ms (met) |",
		"| " + Headlines[1].Label + " | " + Headlines[1].Stat + " | not measured | |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("headline lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "| rss |") {
		t.Errorf("headline shows a figure that is not a headline:\n%s", got)
	}
}

// TestHeadlinesAreMeasured: every headline names a figure the latest run
// measured, so a figure renamed in bench/ cannot leave the README's table
// with a row that never fills, and the README's table stays short.
func TestHeadlinesAreMeasured(t *testing.T) {
	r, err := Load("../results/latest.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(Headlines) > 10 {
		t.Errorf("%d headlines; the README's table has at most 10 rows", len(Headlines))
	}
	for _, h := range Headlines {
		f, ok := r.Figure(h.Section, h.Name)
		if !ok {
			t.Errorf("headline %q: latest.json has no figure %q in section %q", h.Label, h.Name, h.Section)
			continue
		}
		if _, ok := f.Stat(h.Stat); !ok {
			t.Errorf("headline %q: unknown statistic %q", h.Label, h.Stat)
		}
	}
}

// TestDocsShowLatestResults: docs/benchmarks.md's table and README.md's
// headline are the ones the committed bench/results/latest.json renders, so
// neither can drift from the results.
func TestDocsShowLatestResults(t *testing.T) {
	r, err := Load("../results/latest.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, begin, end, block string
	}{
		{"../../docs/benchmarks.md", TableBegin, TableEnd, r.FullTable()},
		{"../../README.md", HeadlineBegin, HeadlineEnd, r.HeadlineTable()},
	} {
		doc, err := os.ReadFile(c.path)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Splice(string(doc), c.begin, c.end, c.block)
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		if want != string(doc) {
			t.Errorf("%s: the benchmark table is not the one bench/results/latest.json renders; run `go run -tags bench ./bench readme` (make bench does it)", c.path)
		}
	}
}

func TestGoalAtLeast(t *testing.T) {
	g := Goal{Stat: "median", Min: 0.7}
	if g.Met(0.69) || !g.Met(0.7) || !g.Met(1.2) {
		t.Errorf("a Min goal of 0.7: Met(0.69)=%v Met(0.7)=%v Met(1.2)=%v", g.Met(0.69), g.Met(0.7), g.Met(1.2))
	}
	if got := g.String("× direct"); got != "median ≥ 0.70 × direct" {
		t.Errorf("String = %q", got)
	}
	f := Figure{Name: "ratio", Unit: "×", Summary: Summarize([]float64{0.5, 0.6, 0.65}), Goal: &g}
	if v := f.Verdict(); v != "missed" {
		t.Errorf("Verdict of a median 0.6 against ≥ 0.7 = %q, want missed", v)
	}
}
