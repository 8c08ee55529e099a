//go:build bench

// Command elasti-bench is `make bench`: it measures what Elasti adds on the
// local cluster (test/cluster) and writes bench/results/latest.md (and
// latest.json for `make bench-check`). Build it with -tags bench.
//
//	elasti-bench run [-out DIR] [-micro-only] [-runs N]
//	elasti-bench load -mode rate|closed|burst -url http://IP:PORT/ ...   (inside the node's namespace)
//	elasti-bench check [-in DIR]
//	elasti-bench readme [-in DIR] [-readme FILE] [-benchmarks-doc FILE]   (run does this too)
//
// Benchmarks are not tests: run never fails on numbers, only when it could
// not measure. check compares the latest results with the goals.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"elasti.dev/elasti/bench/report"
	"elasti.dev/elasti/test/cluster"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: elasti-bench run|load|check|readme [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = runMain(os.Args[2:])
	case "load":
		err = loadMain(os.Args[2:])
	case "check":
		err = checkMain(os.Args[2:])
	case "readme":
		err = readmeMain(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "elasti-bench:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func readmeMain(args []string) error {
	fs := flag.NewFlagSet("readme", flag.ContinueOnError)
	in := fs.String("in", "bench/results", "directory holding latest.json")
	readme := fs.String("readme", "README.md", "the README whose headline benchmark table to rewrite")
	doc := fs.String("benchmarks-doc", "", "the page whose full benchmark table to rewrite; default docs/benchmarks.md beside the README")
	if err := fs.Parse(args); err != nil {
		return err
	}
	r, err := report.Load(filepath.Join(*in, "latest.json"))
	if err != nil {
		return err
	}
	return writeDocs(*readme, *doc, r)
}

// writeDocs puts r's full table between the bench-table markers of doc
// (docs/benchmarks.md beside readme when empty) and its headline between
// the bench-headline markers of readme.
func writeDocs(readme, doc string, r report.Report) error {
	if doc == "" {
		doc = filepath.Join(filepath.Dir(readme), "docs", "benchmarks.md")
	}
	if err := splice(doc, report.TableBegin, report.TableEnd, r.FullTable()); err != nil {
		return err
	}
	return splice(readme, report.HeadlineBegin, report.HeadlineEnd, r.HeadlineTable())
}

// splice rewrites what stands between begin and end in the file at path.
func splice(path, begin, end, block string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	updated, err := report.Splice(string(old), begin, end, block)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, []byte(updated), 0o644)
}

func checkMain(args []string) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	in := fs.String("in", "bench/results", "directory holding latest.json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	r, err := report.Load(filepath.Join(*in, "latest.json"))
	if err != nil {
		return fmt.Errorf("no results to check (run `make bench` first): %w", err)
	}
	fmt.Printf("bench-check: %s\n", r.Environment)
	lines, ok := r.Check()
	for _, l := range lines {
		fmt.Println(l)
	}
	if !ok {
		return fmt.Errorf("some goals were missed")
	}
	return nil
}

// bench is one run.
type bench struct {
	cfg  cluster.Config
	runs int
	// tailRuns is the number of wakes of the cold-start tails (tails.go).
	tailRuns int
	// hpaRuns is the number of runs of each of (e) and (f) (hpa.go).
	hpaRuns int
	// dozeRuns is the number of runs of each of (a) and (b) of the warm
	// sleep (doze.go).
	dozeRuns int
	report   report.Report
	start    time.Time
	// cleanupAfter deletes the bench's namespaces at the end.
	cleanupAfter bool
	// out is where the results, and the resolver's profiles, are written.
	out string
	// only names the one scenario to run ("scale", "hpa" or "doze"), or is
	// empty.
	only string
	// coldShare is Elasti's share of each cold start of the cold start
	// section (or, with only, of a few cold starts before the scale), for
	// the cold start at scale.
	coldShare []float64
	// coldC is each (c) of the cold start section: what (g) compares with.
	coldC []float64
}

func (b *bench) add(f report.Figure) {
	b.report.Figures = append(b.report.Figures, f)
	if f.Skipped != "" {
		logf("%s / %s: not measured: %s", f.Section, f.Name, f.Skipped)
		return
	}
	logf("%s / %s: n=%d min %s median %s p99 %s %s", f.Section, f.Name, f.Summary.N,
		report.FormatValue(f.Summary.Min), report.FormatValue(f.Summary.Median), report.FormatValue(f.Summary.P99), f.Unit)
}

func (b *bench) note(format string, args ...any) {
	b.report.Notes = append(b.report.Notes, fmt.Sprintf(format, args...))
}

func runMain(args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	out := fs.String("out", "bench/results", "directory for latest.md and latest.json")
	microOnly := fs.Bool("micro-only", false, "run only the Go microbenchmarks (no cluster)")
	runs := fs.Int("runs", 30, "cold-start runs (each of (c) and (d))")
	tailRuns := fs.Int("tail-runs", 200, "wakes for the cold-start tails ((a) and (b) over many wakes); 0 skips them")
	hpaRuns := fs.Int("hpa-runs", 3, "cold-start runs with an HPA at minReplicas 0 (each of (e) and (f)); each takes over a minute")
	dozeRuns := fs.Int("doze-runs", 5, "runs of the warm sleep (each of (a) scale from zero and (b) Doze); each takes about 70 s")
	microCount := fs.Int("micro-count", 5, "go test -count for the microbenchmarks")
	cleanup := fs.Bool("cleanup", os.Getenv(cluster.TeardownEnv) != "1", "delete the bench's namespaces at the end (default: unless `elasti-cluster run` takes the cluster down anyway)")
	readme := fs.String("readme", "", "README whose headline benchmark table to rewrite from the results, and beside which docs/benchmarks.md gets the full table (hack/bench.sh passes README.md)")
	doc := fs.String("benchmarks-doc", "", "the page whose full benchmark table to rewrite; default docs/benchmarks.md beside -readme")
	only := fs.String("only", "", "run only this cluster scenario, after the install and the idle figures: \"scale\", \"hpa\" (the cold starts, then those with an HPA), or \"doze\" (the warm sleep) (a partial run: use with an -out of its own and without -readme)")
	since := fs.Int64("since", 0, "Unix time `make bench` started (for the duration in the file); default now")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *only != "" && *only != "scale" && *only != "hpa" && *only != "doze" {
		return fmt.Errorf("-only %q: the scenarios that run alone are \"scale\", \"hpa\" and \"doze\"", *only)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The whole bench must stay under 80 minutes (the 10,000 ElastiServices
	// of the scale figures take half of it); this is its hard stop.
	ctx, cancel := context.WithTimeout(ctx, 79*time.Minute)
	defer cancel()

	cfg, err := cluster.LocalConfig(os.Getenv("ELASTI_K8S_BIN"))
	if err != nil {
		return err
	}
	b := &bench{cfg: cfg, runs: *runs, tailRuns: *tailRuns, hpaRuns: *hpaRuns, dozeRuns: *dozeRuns, start: time.Now(), cleanupAfter: *cleanup, out: *out, only: *only}
	if *since > 0 {
		b.start = time.Unix(*since, 0)
	}
	b.report.Command = "make bench"
	if *microOnly {
		b.report.Command = "BENCH_MICRO_ONLY=1 make bench"
	}
	k8sVersion := "not running (micro-only)"
	if !*microOnly {
		if err := b.connect(); err != nil {
			return err
		}
		k8sVersion = b.serverVersion()
	}
	b.report.Environment = environment(cfg.RepoRoot, k8sVersion)
	logf("%s", b.report.Environment)

	if *microOnly {
		b.note("Cluster figures were not measured: this run had BENCH_MICRO_ONLY=1 (no cluster).")
	} else if err := b.clusterFigures(ctx); err != nil {
		// Keep what was measured; the failure is stated in the file.
		logf("cluster figures stopped early: %v", err)
		b.note("The cluster part stopped early: %s. Figures after that point are missing.", oneLine(err.Error()))
	}
	if *only == "" {
		b.ensureGoalRows()
		micro, err := runMicro(ctx, cfg.RepoRoot, *microCount)
		if err != nil {
			b.note("Go microbenchmarks failed: %s", oneLine(err.Error()))
		}
		b.report.Micro = micro
	}
	b.report.Duration = time.Since(b.start).Round(time.Second).String()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	if err := b.report.Save(filepath.Join(*out, "latest.json"), filepath.Join(*out, "latest.md")); err != nil {
		return err
	}
	logf("wrote %s", filepath.Join(*out, "latest.md"))
	if *readme != "" {
		// Reload, so the tables show exactly what latest.json holds.
		saved, err := report.Load(filepath.Join(*out, "latest.json"))
		if err != nil {
			return err
		}
		if err := writeDocs(*readme, *doc, saved); err != nil {
			return err
		}
		logf("updated the benchmark tables of the docs from %s", filepath.Join(*out, "latest.json"))
	}
	return nil
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// environment is the file's first line: CPUs, kernel, Kubernetes, commit, date.
func environment(root, k8s string) string {
	kernel := "unknown"
	var u syscall.Utsname
	if syscall.Uname(&u) == nil {
		kernel = utsString(u.Release[:])
	}
	commit := gitOut(root, "rev-parse", "--short=12", "HEAD")
	if gitOut(root, "status", "--porcelain", "--untracked-files=no") != "" {
		commit += " (with uncommitted changes)"
	}
	date := gitOut(root, "log", "-1", "--format=%cs")
	return fmt.Sprintf("%d CPUs (%s/%s), kernel %s, Kubernetes %s, %s, commit %s of %s, run on %s",
		runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, kernel, k8s, runtime.Version(), commit, date,
		time.Now().UTC().Format("2006-01-02 15:04 UTC"))
}

func utsString(b []int8) string {
	var s strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		s.WriteByte(byte(c))
	}
	return s.String()
}

func gitOut(root string, args ...string) string {
	cmd := exec.Command("git", args...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// runMicro runs the resolver's Go microbenchmarks (hold queue, port map,
// HTTP forward path) in-process on loopback.
func runMicro(ctx context.Context, root string, count int) ([]report.Micro, error) {
	logf("Go microbenchmarks (-count %d)", count)
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", ".", "-benchmem",
		"-count", fmt.Sprint(count), "./internal/resolver/...")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS=-buildvcs=false")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return report.ParseGoBench(string(out)), fmt.Errorf("go test -bench: %w: %s", err, out)
	}
	return report.ParseGoBench(string(out)), nil
}

// ensureGoalRows lists every figure with a goal even when it could not be
// measured, so the table always states the goals.
func (b *bench) ensureGoalRows() {
	have := map[string]bool{}
	for _, f := range b.report.Figures {
		have[f.Name] = true
	}
	why := "the cluster part did not get this far"
	if len(b.report.Figures) == 0 {
		why = "no cluster in this run"
	}
	for _, g := range goalRows {
		if !have[g.Name] {
			g.Skipped = why
			b.report.Figures = append(b.report.Figures, g)
		}
	}
}
