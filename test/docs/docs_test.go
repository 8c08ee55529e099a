package docs

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

const repoRoot = "../.."

func read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// findAll returns the first submatch of re in every file matched by glob,
// skipping tests, and fails when there is none.
func findAll(t *testing.T, glob string, re *regexp.Regexp) []string {
	t.Helper()
	out := findAny(t, glob, re)
	if len(out) == 0 {
		t.Fatalf("found nothing matching %s in %s", re, glob)
	}
	return out
}

// findAny is findAll for files that may hold no match (yet).
func findAny(t *testing.T, glob string, re *regexp.Regexp) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(repoRoot, glob))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no files match %s (%v)", glob, err)
	}
	seen := map[string]bool{}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			seen[m[1]] = true
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// requireMentioned fails for every name that page does not mention in
// backquotes (`name` or `--name`).
func requireMentioned(t *testing.T, page, what string, names []string, format string) {
	t.Helper()
	text := read(t, page)
	for _, n := range names {
		if !strings.Contains(text, strings.ReplaceAll(format, "NAME", n)) {
			t.Errorf("%s does not document %s %s", page, what, n)
		}
	}
}

func TestConfigurationDocumentsEveryFlag(t *testing.T) {
	flagRe := regexp.MustCompile(`fs\.[A-Za-z0-9]+Var\([^,]+,\s*"([a-z0-9-]+)"`)
	for _, cmd := range []string{"elasti-operator", "elasti-resolver"} {
		flags := findAll(t, filepath.Join("cmd", cmd, "flags.go"), flagRe)
		requireMentioned(t, "docs/configuration.md", cmd+" flag", flags, "`--NAME`")
	}
}

func TestConfigurationDocumentsEveryMetric(t *testing.T) {
	metricRe := regexp.MustCompile(`Name:\s*"(elasti_[a-z0-9_]+)"`)
	requireMentioned(t, "docs/configuration.md", "metric", findAll(t, "internal/*/metrics.go", metricRe), "`NAME`")
	// Metrics of a concern's own package (internal/controller/ledger).
	requireMentioned(t, "docs/configuration.md", "metric", findAll(t, "internal/*/*/metrics.go", metricRe), "`NAME`")
}

func TestConfigurationDocumentsEveryValue(t *testing.T) {
	// Top-level keys and the keys one level below operator/resolver.
	values := read(t, "charts/elasti/values.yaml")
	keyRe := regexp.MustCompile(`(?m)^([a-zA-Z]+):`)
	subRe := regexp.MustCompile(`(?m)^  ([a-zA-Z]+):`)
	doc := read(t, "docs/configuration.md")
	for _, m := range keyRe.FindAllStringSubmatch(values, -1) {
		if !strings.Contains(doc, "`"+m[1]) {
			t.Errorf("docs/configuration.md does not document the Helm value %s", m[1])
		}
	}
	for _, m := range subRe.FindAllStringSubmatch(values, -1) {
		if !strings.Contains(doc, "."+m[1]) && !strings.Contains(doc, "`"+m[1]) {
			t.Errorf("docs/configuration.md does not document the Helm value ....%s", m[1])
		}
	}
}

func TestTroubleshootingCoversEveryReason(t *testing.T) {
	reasonRe := regexp.MustCompile(`(?m)^\s*Reason[A-Za-z]+\s*=\s*"([A-Za-z]+)"`)
	// Reasons of the concerns' own packages (internal/controller/plan,
	// refusals, fallback, ...), and any the reconciler's own files declare.
	reasons := findAll(t, "internal/controller/*/*.go", reasonRe)
	reasons = append(reasons, findAny(t, "internal/controller/*.go", reasonRe)...)
	reasons = append(reasons, findAll(t, "internal/scaling/*.go", reasonRe)...)
	reasons = append(reasons, findAll(t, "internal/contract/*.go", reasonRe)...) // the Active reasons
	requireMentioned(t, "docs/troubleshooting.md", "condition reason", reasons, "`NAME`")

	// Event reasons that are actually recorded.
	eventConst := regexp.MustCompile(`(?m)^\s*(Event[A-Za-z]+)\s*=\s*"([A-Za-z]+)"`)
	events := read(t, "internal/controller/events.go")
	// Recorded by the reconciler's own files (reconciler.go, status.go,
	// prewarm.go, ...).
	top, err := filepath.Glob(filepath.Join(repoRoot, "internal/controller/*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var used string
	for _, p := range top {
		if strings.HasSuffix(p, "_test.go") || filepath.Base(p) == "events.go" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		used += "\n" + string(b)
	}
	// A concern's own package declares its Events beside the code that
	// records them (internal/controller/hpacustody, fallback, ...).
	sub, err := filepath.Glob(filepath.Join(repoRoot, "internal/controller/*/*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range sub {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		events += "\n" + string(b)
		used += "\n" + string(b)
	}
	var emitted []string
	for _, m := range eventConst.FindAllStringSubmatch(events, -1) {
		if strings.Contains(used, m[1]+",") {
			emitted = append(emitted, m[2])
		}
	}
	if len(emitted) < 5 {
		t.Fatalf("found only %d emitted Event reasons: %v", len(emitted), emitted)
	}
	requireMentioned(t, "docs/troubleshooting.md", "Event reason", emitted, "`NAME`")

	rejectRe := regexp.MustCompile(`(?m)^\s*Reason[A-Za-z]+\s*=\s*"([a-z_]+)"`)
	requireMentioned(t, "docs/troubleshooting.md", "resolver rejection reason", findAll(t, "internal/resolver/metrics.go", rejectRe), "`NAME`")
}

func TestIndexLinksEveryPage(t *testing.T) {
	index := read(t, "docs/README.md")
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		name := filepath.Base(p)
		if name != "README.md" && !strings.Contains(index, "("+name+")") {
			t.Errorf("docs/README.md does not link %s", name)
		}
	}
}

// TestRelativeLinksResolve: every relative link in the README and in docs/
// points at a file that exists, and an anchor in it (or in the page itself)
// at one of that page's headings.
func TestRelativeLinksResolve(t *testing.T) {
	linkRe := regexp.MustCompile(`\]\(([^)#\s]*)(?:#([^)\s]*))?\)`)
	anchors := map[string]map[string]bool{}
	for _, page := range pages(t) {
		for _, m := range linkRe.FindAllStringSubmatch(read(t, page), -1) {
			target, anchor := m[1], m[2]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			rel := page
			if target != "" {
				rel = filepath.Join(filepath.Dir(page), target)
			}
			if _, err := os.Stat(filepath.Join(repoRoot, rel)); err != nil {
				t.Errorf("%s links %s, which does not exist", page, target)
				continue
			}
			if anchor == "" || !strings.HasSuffix(rel, ".md") {
				continue
			}
			if anchors[rel] == nil {
				anchors[rel] = headingAnchors(read(t, rel))
			}
			if !anchors[rel][anchor] {
				t.Errorf("%s links %s#%s, which has no such heading", page, target, anchor)
			}
		}
	}
}

// headingAnchors are the anchors GitHub gives a page's headings: lower
// case, punctuation dropped, spaces as hyphens, "-1", "-2" for repeats.
// Lines inside fenced code blocks are not headings.
func headingAnchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// TestNamedTestsExist: every test, fuzz target or benchmark the README or a
// docs page names in backquotes is a function of some _test.go file, so a
// renamed or merged test cannot leave a claim behind.
func TestNamedTestsExist(t *testing.T) {
	funcs := map[string]bool{}
	funcRe := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]+)\(`)
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range funcRe.FindAllStringSubmatch(string(b), -1) {
			funcs[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A name followed by * is a pattern (TestMultiNode*), not a test.
	nameRe := regexp.MustCompile("`((?:Test|Fuzz|Benchmark)[A-Z][A-Za-z0-9_]*)(\\*?)")
	for _, page := range pages(t) {
		for _, m := range nameRe.FindAllStringSubmatch(read(t, page), -1) {
			if m[2] == "" && !funcs[m[1]] {
				t.Errorf("%s names %s, which no _test.go file defines", page, m[1])
			}
		}
	}
}

// pages are the README and every page under docs/, relative to the root.
func pages(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no docs pages (%v)", err)
	}
	out := []string{"README.md"}
	for _, p := range paths {
		out = append(out, filepath.Join("docs", filepath.Base(p)))
	}
	return out
}

// makeVersion reads name's v1.MINOR.PATCH from the Makefile.
func makeVersion(t *testing.T, makefile, name string) (minor int, full string) {
	t.Helper()
	re := regexp.MustCompile(`(?m)^\s*(?:export\s+)?` + name + `\s*(?:\?=|:=|=)\s*(v1\.(\d+)\.\d+)\s*$`)
	m := re.FindStringSubmatch(makefile)
	if m == nil {
		t.Fatalf("the Makefile sets no %s = v1.N.N", name)
	}
	minor, err := strconv.Atoi(m[2])
	if err != nil {
		t.Fatal(err)
	}
	return minor, m[1]
}

// TestSupportedKubernetesVersions: the README and getting started state the
// range the Makefile tests (OLDEST_K8S_VERSION to K8S_VERSION) and no other
// "1.NN or later" claim, name no other Kubernetes release, and the Helm
// chart refuses clusters older than the range.
func TestSupportedKubernetesVersions(t *testing.T) {
	makefile := read(t, "Makefile")
	newest, newestFull := makeVersion(t, makefile, "K8S_VERSION")
	oldest, oldestFull := makeVersion(t, makefile, "OLDEST_K8S_VERSION")
	want := fmt.Sprintf("Kubernetes 1.%d to 1.%d", oldest, newest)
	orLater := regexp.MustCompile(`Kubernetes v?1\.\d+(?:\.\d+)?(?:\+| or (?:later|newer|above))`)
	release := regexp.MustCompile(`(?:Kubernetes |k8s-)(v1\.\d+\.\d+)`)
	for _, page := range []string{"README.md", "docs/getting-started.md"} {
		text := read(t, page)
		if !strings.Contains(text, want) {
			t.Errorf("%s does not say %q (OLDEST_K8S_VERSION %s, K8S_VERSION %s in the Makefile)", page, want, oldestFull, newestFull)
		}
		for _, m := range orLater.FindAllString(text, -1) {
			t.Errorf("%s says %q; the supported range is %s", page, m, want)
		}
		for _, m := range release.FindAllStringSubmatch(text, -1) {
			if m[1] != newestFull && m[1] != oldestFull {
				t.Errorf("%s names Kubernetes %s; the Makefile tests %s and %s", page, m[1], newestFull, oldestFull)
			}
		}
	}
	kubeVersion := regexp.MustCompile(`(?m)^kubeVersion:\s*"?([^"\n]*)"?\s*$`).FindStringSubmatch(read(t, "charts/elasti/Chart.yaml"))
	if wantChart := fmt.Sprintf(">=1.%d.0-0", oldest); kubeVersion == nil || kubeVersion[1] != wantChart {
		t.Errorf("charts/elasti/Chart.yaml: kubeVersion %v, want %q (OLDEST_K8S_VERSION %s)", kubeVersion, wantChart, oldestFull)
	}
}

// TestReadmeStaysShort: the README is a page a newcomer reads in two
// minutes; detail belongs in docs/.
func TestReadmeStaysShort(t *testing.T) {
	if n := strings.Count(read(t, "README.md"), "\n"); n > 200 {
		t.Errorf("README.md has %d lines; keep it to 200 and move detail to docs/ (features.md, benchmarks.md, ...)", n)
	}
}

// TestNoMissingDesignDoc: the design lives in docs/architecture.md; no file
// in the repository cites a design document kept outside it.
func TestNoMissingDesignDoc(t *testing.T) {
	name := "DESIGN" + ".md" // spelled apart, so that this file does not cite it
	out, err := exec.Command("git", "-C", repoRoot, "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a git checkout?)", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		b, err := os.ReadFile(filepath.Join(repoRoot, f))
		if err != nil {
			continue // listed but deleted in the working tree
		}
		if bytes.Contains(b, []byte(name)) {
			t.Errorf("%s cites %s, which is not in the repository; cite docs/architecture.md", f, name)
		}
	}
}

// TestFlagDefaultsAgree: where a flags table gives a flag's default as one
// value in backquotes, it is the default cmd/*/flags.go passes, evaluated
// from the Go source; and every flag a table lists is one the binary
// defines.
func TestFlagDefaultsAgree(t *testing.T) {
	ev := newConstEval(t)
	checked := 0
	for _, c := range []struct {
		cmd   string
		pages [][2]string // page, heading of its flags table
	}{
		{"elasti-operator", [][2]string{{"docs/configuration.md", "## Operator flags"}, {"docs/operator.md", "## Flags and environment"}}},
		{"elasti-resolver", [][2]string{{"docs/configuration.md", "## Resolver flags"}, {"docs/resolver.md", "## Flags"}}},
	} {
		flags := ev.flags(filepath.Join("cmd", c.cmd, "flags.go"))
		for _, p := range c.pages {
			for name, doc := range flagTable(t, p[0], p[1]) {
				f, ok := flags[name]
				if !ok {
					t.Errorf("%s (%s) lists --%s, which %s does not define", p[0], p[1], name, c.cmd)
					continue
				}
				if doc == "" || !f.known {
					continue
				}
				checked++
				if !f.matches(doc) {
					t.Errorf("%s (%s): --%s defaults to `%s`, but %s's is %s", p[0], p[1], name, doc, c.cmd, f)
				}
			}
		}
	}
	t.Logf("checked %d documented defaults against the code", checked)
	if checked < 40 {
		t.Errorf("only %d documented defaults could be checked against the code; the evaluator has lost track of flags.go", checked)
	}
}

// flagTable reads the table under heading in page: flag name (without
// "--") to its default when the cell is one value in backquotes, "" when it
// is anything else. Rows naming several flags or a pattern are left out.
func flagTable(t *testing.T, page, heading string) map[string]string {
	t.Helper()
	text := read(t, page)
	i := strings.Index(text, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("%s has no %q section", page, heading)
	}
	text = text[i+len(heading)+2:]
	if j := strings.Index(text, "\n## "); j >= 0 {
		text = text[:j]
	}
	one := regexp.MustCompile("^`([^`]*)`$")
	out := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			continue
		}
		name := one.FindStringSubmatch(strings.TrimSpace(cells[1]))
		if name == nil || !strings.HasPrefix(name[1], "--") || strings.ContainsAny(name[1], "*, ") {
			continue
		}
		def := ""
		if m := one.FindStringSubmatch(strings.TrimSpace(cells[2])); m != nil {
			def = m[1]
		}
		out[strings.TrimPrefix(name[1], "--")] = def
	}
	if len(out) < 10 {
		t.Fatalf("%s (%s): found only %d flag rows", page, heading, len(out))
	}
	return out
}
