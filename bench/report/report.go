// Package report holds the pure part of `make bench`: summary statistics,
// Go benchmark output parsing, histogram quantiles, the Markdown table that
// bench/results/latest.md is, the tables it keeps in docs/benchmarks.md and
// README.md (docs.go), and the comparison with the goals that `make
// bench-check` prints. Nothing here touches a cluster, so it is unit-tested
// in `make test-unit`.
package report

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Summary is min, median and p99 of N samples.
type Summary struct {
	N      int     `json:"n"`
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	P99    float64 `json:"p99"`
	Max    float64 `json:"max"`
}

// Summarize returns the Summary of xs (xs is not modified). Quantiles use the
// nearest-rank method: p99 of fewer than 100 samples is the largest one.
func Summarize(xs []float64) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return Summary{N: len(s), Min: s[0], Median: Quantile(s, 0.5), P99: Quantile(s, 0.99), Max: s[len(s)-1]}
}

// Quantile is the nearest-rank q-quantile of sorted (ascending) samples;
// for the median of an even count it is the mean of the two middle ones.
func Quantile(sorted []float64, q float64) float64 {
	n := len(sorted)
	switch {
	case n == 0:
		return math.NaN()
	case q <= 0:
		return sorted[0]
	case q >= 1:
		return sorted[n-1]
	}
	if q == 0.5 && n%2 == 0 {
		return (sorted[n/2-1] + sorted[n/2]) / 2
	}
	rank := int(math.Ceil(q * float64(n)))
	return sorted[max(rank, 1)-1]
}

// Bucket is one cumulative histogram bucket, as Prometheus exposes it.
type Bucket struct {
	UpperBound float64
	Count      float64
}

// HistogramQuantile estimates the q-quantile from cumulative buckets the way
// Prometheus' histogram_quantile does: linear interpolation inside the
// bucket the rank falls in (from 0 for the first bucket). A rank in the +Inf
// bucket returns the largest finite bound. NaN when there are no samples.
func HistogramQuantile(q float64, buckets []Bucket) float64 {
	b := append([]Bucket(nil), buckets...)
	sort.Slice(b, func(i, j int) bool { return b[i].UpperBound < b[j].UpperBound })
	if len(b) == 0 || b[len(b)-1].Count <= 0 {
		return math.NaN()
	}
	total := b[len(b)-1].Count
	rank := q * total
	prevBound, prevCount := 0.0, 0.0
	for _, bk := range b {
		if bk.Count >= rank {
			if math.IsInf(bk.UpperBound, 1) {
				return prevBound
			}
			if bk.Count == prevCount {
				return bk.UpperBound
			}
			return prevBound + (bk.UpperBound-prevBound)*(rank-prevCount)/(bk.Count-prevCount)
		}
		prevBound, prevCount = bk.UpperBound, bk.Count
	}
	return prevBound
}

// SubtractBuckets returns after-before per bound: the samples observed in
// between two scrapes of the same histogram.
func SubtractBuckets(after, before []Bucket) []Bucket {
	prev := map[float64]float64{}
	for _, b := range before {
		prev[b.UpperBound] = b.Count
	}
	out := make([]Bucket, 0, len(after))
	for _, b := range after {
		out = append(out, Bucket{UpperBound: b.UpperBound, Count: b.Count - prev[b.UpperBound]})
	}
	return out
}

// Goal is a target for one statistic of a figure: under Max, or, when Min
// is set, at least Min (a throughput ratio).
type Goal struct {
	// Stat is "min", "median" or "p99".
	Stat string  `json:"stat"`
	Max  float64 `json:"max,omitempty"`
	Min  float64 `json:"min,omitempty"`
}

func (g Goal) String(unit string) string {
	if g.Min != 0 {
		return fmt.Sprintf("%s ≥ %s %s", g.Stat, FormatValue(g.Min), unit)
	}
	return fmt.Sprintf("%s < %s %s", g.Stat, FormatValue(g.Max), unit)
}

// Met says whether v meets the goal.
func (g Goal) Met(v float64) bool {
	if g.Min != 0 {
		return v >= g.Min
	}
	return v < g.Max
}

// Figure is one row of the table.
type Figure struct {
	Section string  `json:"section"`
	Name    string  `json:"name"`
	Unit    string  `json:"unit"`
	Summary Summary `json:"summary"`
	Goal    *Goal   `json:"goal,omitempty"`
	Note    string  `json:"note,omitempty"`
	// Skipped, when set, says why the figure was not measured.
	Skipped string `json:"skipped,omitempty"`
}

// Stat returns the statistic a goal names.
func (f Figure) Stat(stat string) (float64, bool) {
	switch stat {
	case "min":
		return f.Summary.Min, true
	case "median":
		return f.Summary.Median, true
	case "p99":
		return f.Summary.P99, true
	}
	return 0, false
}

// Verdict compares the figure with its goal: "met", "missed", or "" when
// there is no goal or nothing was measured.
func (f Figure) Verdict() string {
	if f.Goal == nil || f.Skipped != "" || f.Summary.N == 0 {
		return ""
	}
	v, ok := f.Stat(f.Goal.Stat)
	if !ok || math.IsNaN(v) {
		return ""
	}
	if f.Goal.Met(v) {
		return "met"
	}
	return "missed"
}

// Micro is one Go microbenchmark over its -count runs.
type Micro struct {
	Package     string  `json:"package"`
	Name        string  `json:"name"`
	NsPerOp     Summary `json:"nsPerOp"`
	BytesPerOp  float64 `json:"bytesPerOp"`
	AllocsPerOp float64 `json:"allocsPerOp"`
	// Other holds the benchmark's own metrics (b.ReportMetric), each the
	// median over the runs, in the order the output lists them.
	Other []Metric `json:"other,omitempty"`
}

// Metric is one b.ReportMetric figure of a microbenchmark.
type Metric struct {
	Unit  string  `json:"unit"`
	Value float64 `json:"value"`
}

// Report is everything one `make bench` run measured.
type Report struct {
	Environment string   `json:"environment"`
	Command     string   `json:"command"`
	Duration    string   `json:"duration"`
	Notes       []string `json:"notes,omitempty"`
	Figures     []Figure `json:"figures"`
	Micro       []Micro  `json:"micro"`
}

// ParseGoBench reads `go test -bench -benchmem` output and groups the
// result lines by package and benchmark, one ns/op sample per -count run.
func ParseGoBench(out string) []Micro {
	type key struct{ pkg, name string }
	var order []key
	samples := map[key][]float64{}
	mem := map[key][2]float64{}
	other := map[key]map[string][]float64{}
	otherUnits := map[key][]string{}
	pkg := ""
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			continue
		}
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 4 {
			continue
		}
		name := fields[0]
		if i := strings.LastIndex(name, "-"); i > 0 {
			name = name[:i] // GOMAXPROCS suffix
		}
		k := key{pkg, name}
		var ns, bytes, allocs float64
		found := false
		for i := 2; i+1 < len(fields); i++ {
			var v float64
			if _, err := fmt.Sscan(fields[i], &v); err != nil {
				continue
			}
			switch fields[i+1] {
			case "ns/op":
				ns, found = v, true
			case "B/op":
				bytes = v
			case "allocs/op":
				allocs = v
			}
		}
		if !found {
			continue
		}
		for i := 2; i+1 < len(fields); i++ {
			var v float64
			unit := fields[i+1]
			if _, err := fmt.Sscan(fields[i], &v); err != nil || unit == "ns/op" || unit == "B/op" || unit == "allocs/op" {
				continue
			}
			if other[k] == nil {
				other[k] = map[string][]float64{}
			}
			if _, seen := other[k][unit]; !seen {
				otherUnits[k] = append(otherUnits[k], unit)
			}
			other[k][unit] = append(other[k][unit], v)
			i++
		}
		if _, seen := samples[k]; !seen {
			order = append(order, k)
		}
		samples[k] = append(samples[k], ns)
		mem[k] = [2]float64{bytes, allocs}
	}
	out2 := make([]Micro, 0, len(order))
	for _, k := range order {
		m := Micro{Package: k.pkg, Name: k.name, NsPerOp: Summarize(samples[k]), BytesPerOp: mem[k][0], AllocsPerOp: mem[k][1]}
		for _, u := range otherUnits[k] {
			m.Other = append(m.Other, Metric{Unit: u, Value: Summarize(other[k][u]).Median})
		}
		out2 = append(out2, m)
	}
	return out2
}

// FormatValue prints a number with about three significant digits.
func FormatValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case v == math.Trunc(v) && math.Abs(v) < 1e6:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// Markdown renders the report as bench/results/latest.md.
func (r Report) Markdown() string {
	var b strings.Builder
	b.WriteString("# Elasti benchmarks\n\n")
	fmt.Fprintf(&b, "Environment: %s\n\n", r.Environment)
	fmt.Fprintf(&b, "Command: `%s` (took %s). Every figure gives min, median and p99 over N samples; N is in its own column.\n\n", r.Command, r.Duration)
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n")
	}
	section := ""
	for _, f := range r.Figures {
		if f.Section != section {
			section = f.Section
			fmt.Fprintf(&b, "\n## %s\n\n", section)
			b.WriteString("| Figure | N | min | median | p99 | unit | goal | notes |\n")
			b.WriteString("| --- | ---: | ---: | ---: | ---: | --- | --- | --- |\n")
		}
		goal := goalCell(f)
		note := f.Note
		if f.Skipped != "" {
			fmt.Fprintf(&b, "| %s | 0 | | | | %s | %s | not measured: %s |\n", f.Name, f.Unit, goal, cell(f.Skipped))
			continue
		}
		s := f.Summary
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %s | %s |\n", f.Name, s.N,
			FormatValue(s.Min), FormatValue(s.Median), FormatValue(s.P99), f.Unit, goal, cell(note))
	}
	b.WriteString("\n## Go microbenchmarks\n\n")
	if len(r.Micro) == 0 {
		b.WriteString("Not run.\n")
		return b.String()
	}
	b.WriteString("| Benchmark | package | N | min ns/op | median ns/op | p99 ns/op | B/op | allocs/op | its own metrics (median) |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
	for _, m := range r.Micro {
		var own []string
		for _, o := range m.Other {
			own = append(own, FormatValue(o.Value)+" "+o.Unit)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | %s | %s |\n", m.Name, m.Package, m.NsPerOp.N,
			FormatValue(m.NsPerOp.Min), FormatValue(m.NsPerOp.Median), FormatValue(m.NsPerOp.P99),
			FormatValue(m.BytesPerOp), FormatValue(m.AllocsPerOp), cell(strings.Join(own, ", ")))
	}
	return b.String()
}

func cell(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

// Check lists each figure with a goal and says whether it was met. ok is
// false when a measured figure missed its goal.
func (r Report) Check() (lines []string, ok bool) {
	ok = true
	for _, f := range r.Figures {
		if f.Goal == nil {
			continue
		}
		v, _ := f.Stat(f.Goal.Stat)
		switch f.Verdict() {
		case "met":
			lines = append(lines, fmt.Sprintf("ok      %s: %s %s %s (goal %s)", f.Name, f.Goal.Stat, FormatValue(v), f.Unit, f.Goal.String(f.Unit)))
		case "missed":
			ok = false
			lines = append(lines, fmt.Sprintf("MISSED  %s: %s %s %s (goal %s)", f.Name, f.Goal.Stat, FormatValue(v), f.Unit, f.Goal.String(f.Unit)))
		default:
			lines = append(lines, fmt.Sprintf("n/a     %s: not measured (goal %s)", f.Name, f.Goal.String(f.Unit)))
		}
	}
	return lines, ok
}

// Load reads a report written by Save.
func Load(path string) (Report, error) {
	var r Report
	b, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	return r, json.Unmarshal(b, &r)
}

// Save writes the report as JSON (for bench-check) and as Markdown.
func (r Report) Save(jsonPath, mdPath string) error {
	for i, f := range r.Figures {
		s := f.Summary
		if math.IsNaN(s.Min) || math.IsNaN(s.Median) || math.IsNaN(s.P99) || math.IsNaN(s.Max) {
			r.Figures[i].Summary = Summary{}
			if f.Skipped == "" {
				r.Figures[i].Skipped = "no samples"
			}
		}
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(jsonPath, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(mdPath, []byte(r.Markdown()), 0o644)
}

// ParseHistogram extracts the cumulative buckets of metric name from
// Prometheus text, summed over every series whose labels contain match.
func ParseHistogram(text, name, match string) []Bucket {
	sums := map[float64]float64{}
	prefix := name + "_bucket{"
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, prefix) || !strings.Contains(line, match) {
			continue
		}
		i := strings.Index(line, `le="`)
		j := strings.LastIndex(line, " ")
		if i < 0 || j < 0 {
			continue
		}
		leStr := line[i+4:]
		leStr = leStr[:strings.IndexByte(leStr, '"')]
		le := math.Inf(1)
		if leStr != "+Inf" {
			v, err := strconv.ParseFloat(leStr, 64)
			if err != nil {
				continue
			}
			le = v
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[j+1:]), 64)
		if err != nil {
			continue
		}
		sums[le] += v
	}
	out := make([]Bucket, 0, len(sums))
	for le, c := range sums {
		out = append(out, Bucket{UpperBound: le, Count: c})
	}
	return out
}

// ParseGauge is the value of the first series of metric name whose labels
// contain match (0 when absent).
func ParseGauge(text, name, match string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		if !strings.Contains(line, match) {
			continue
		}
		j := strings.LastIndex(line, " ")
		v, err := strconv.ParseFloat(strings.TrimSpace(line[j+1:]), 64)
		if err == nil {
			return v
		}
	}
	return 0
}
