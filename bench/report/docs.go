package report

import (
	"fmt"
	"strings"
)

// Markers around the two tables `make bench` keeps in the documentation:
// every figure in docs/benchmarks.md, a headline of a few in README.md.
// Both are rendered from bench/results/latest.json, and unit tests fail
// when either differs from what that file renders.
const (
	TableBegin    = "<!-- bench-table:begin (written by make bench from bench/results/latest.json) -->"
	TableEnd      = "<!-- bench-table:end -->"
	HeadlineBegin = "<!-- bench-headline:begin (written by make bench from bench/results/latest.json) -->"
	HeadlineEnd   = "<!-- bench-headline:end -->"
)

// Headline is one row of README.md's benchmark table: a figure of the full
// table (by section and name), the statistic shown, and a shorter label.
type Headline struct {
	Section string
	Name    string
	// Stat is "median" or "p99".
	Stat  string
	Label string
}

// Headlines are the figures a newcomer reads first: what Elasti costs a
// request at zero and against an HPA alone, what it costs while awake, and
// what one resolver holds. The names are bench/'s; TestHeadlinesAreMeasured
// fails when a renamed figure leaves one of these behind.
var Headlines = []Headline{
	{"Serve mode (Elasti out of the path)", "500 rps through the Service: difference", "median",
		"Awake (serve mode), 500 rps: latency with Elasti minus without"},
	{"Cold start", "(c)-(d), paired runs", "median",
		"Request at zero: latency beyond scaling the workload up by hand"},
	{"Cold start", "Elasti's share of (c) in the same run: (c) − (scale write seen → endpoint ready)", "median",
		"Request at zero: Elasti's own share of that latency"},
	{"Cold start with an HPA at minReplicas: 0", "(f)-(e), paired runs", "median",
		"Request at zero behind an HPA at minReplicas 0: later without Elasti than with it"},
	{"Cold start with an HPA at minReplicas: 0", "(f): requests failed before the first answer", "median",
		"The same, HPA alone: requests failed before the first answer"},
	{"Proxy-mode forwarding (target warm, proxy slice in place)", "max throughput: through the resolver ÷ direct, paired runs", "median",
		"Proxy mode: throughput through one resolver ÷ straight to the pod"},
	{"Proxy-mode forwarding (target warm, proxy slice in place)", "added latency at half the resolver's max throughput, median", "median",
		"Proxy mode: latency added at half the resolver's maximum throughput"},
	{"Proxy-mode forwarding (target warm, proxy slice in place)", "added latency at half the resolver's max throughput, p99", "p99",
		"Proxy mode: latency added at half the resolver's maximum throughput"},
	{"Burst: 5,000 concurrent requests held at zero on one resolver", "requests that succeeded (HTTP 200)", "median",
		"5,000 requests held at zero on one resolver: answered"},
	{"Burst: 5,000 concurrent requests held at zero on one resolver", "resolver peak RSS per held request: (peak − before) ÷ 5,000", "median",
		"Resolver memory per held request (peak RSS)"},
}

// Figure returns the figure with that section and name.
func (r Report) Figure(section, name string) (Figure, bool) {
	for _, f := range r.Figures {
		if f.Section == section && f.Name == name {
			return f, true
		}
	}
	return Figure{}, false
}

// FullTable is docs/benchmarks.md's form of the report: the command, the
// environment and one row per figure and microbenchmark, without the notes
// (those stay in latest.md).
func (r Report) FullTable() string {
	var b strings.Builder
	fmt.Fprintf(&b, "`%s` (took %s) on %s.\n\n", r.Command, r.Duration, r.Environment)
	b.WriteString("| Section | Figure | N | min | median | p99 | unit | goal |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | --- | --- |\n")
	for _, f := range r.Figures {
		if f.Skipped != "" {
			fmt.Fprintf(&b, "| %s | %s | 0 | | | | %s | %s |\n", cell(f.Section), cell(f.Name), f.Unit, goalCell(f))
			continue
		}
		s := f.Summary
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | %s |\n", cell(f.Section), cell(f.Name), s.N,
			FormatValue(s.Min), FormatValue(s.Median), FormatValue(s.P99), f.Unit, goalCell(f))
	}
	for _, m := range r.Micro {
		fmt.Fprintf(&b, "| Go microbenchmark | %s | %d | %s | %s | %s | ns/op | |\n", m.Name, m.NsPerOp.N,
			FormatValue(m.NsPerOp.Min), FormatValue(m.NsPerOp.Median), FormatValue(m.NsPerOp.P99))
	}
	return b.String()
}

// HeadlineTable is README.md's form of the report: the Headlines, each
// with the one statistic it names, and a link to the full table.
func (r Report) HeadlineTable() string {
	var b strings.Builder
	fmt.Fprintf(&b, "`%s` (took %s) on %s. %d of its %d figures; all of them, and how each is measured, are in\n",
		r.Command, r.Duration, r.Environment, len(Headlines), len(r.Figures))
	b.WriteString("[docs/benchmarks.md](docs/benchmarks.md#latest-results).\n\n")
	b.WriteString("| Figure | Statistic | Value | Goal |\n")
	b.WriteString("| --- | --- | ---: | --- |\n")
	for _, h := range Headlines {
		f, ok := r.Figure(h.Section, h.Name)
		v, statOK := f.Stat(h.Stat)
		if !ok || !statOK || f.Skipped != "" || f.Summary.N == 0 {
			fmt.Fprintf(&b, "| %s | %s | not measured | |\n", cell(h.Label), h.Stat)
			continue
		}
		goal := ""
		if f.Goal != nil && f.Goal.Stat == h.Stat {
			goal = goalCell(f)
		}
		stat := fmt.Sprintf("%s of %d", h.Stat, f.Summary.N)
		if f.Summary.N == 1 {
			stat = "one run"
		}
		fmt.Fprintf(&b, "| %s | %s | %s %s | %s |\n", cell(h.Label), stat, FormatValue(v), f.Unit, goal)
	}
	return b.String()
}

// goalCell is a figure's goal with its verdict, or "" when it has none.
func goalCell(f Figure) string {
	if f.Goal == nil {
		return ""
	}
	goal := f.Goal.String(f.Unit)
	if v := f.Verdict(); v != "" {
		goal += " (" + v + ")"
	}
	return goal
}

// Splice replaces what stands between the markers begin and end in doc
// with block.
func Splice(doc, begin, end, block string) (string, error) {
	i := strings.Index(doc, begin)
	j := strings.Index(doc, end)
	if i < 0 || j < i {
		return "", fmt.Errorf("no %q ... %q block", begin, end)
	}
	return doc[:i+len(begin)] + "\n" + block + doc[j:], nil
}
