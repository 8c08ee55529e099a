package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
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
// skipping tests.
func findAll(t *testing.T, glob string, re *regexp.Regexp) []string {
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
	if len(out) == 0 {
		t.Fatalf("found nothing matching %s in %s", re, glob)
	}
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
	reasons := findAll(t, "internal/controller/*.go", reasonRe)
	reasons = append(reasons, findAll(t, "internal/scaling/*.go", reasonRe)...)
	reasons = append(reasons, findAll(t, "internal/contract/*.go", reasonRe)...) // the Active reasons
	requireMentioned(t, "docs/troubleshooting.md", "condition reason", reasons, "`NAME`")

	// Event reasons that are actually recorded.
	eventConst := regexp.MustCompile(`(?m)^\s*(Event[A-Za-z]+)\s*=\s*"([A-Za-z]+)"`)
	events := read(t, "internal/controller/events.go")
	used := strings.Join(func() []string {
		var s []string
		for _, f := range []string{"reconciler.go", "wake.go", "modes.go", "status.go"} {
			if b, err := os.ReadFile(filepath.Join(repoRoot, "internal/controller", f)); err == nil {
				s = append(s, string(b))
			}
		}
		return s
	}(), "\n")
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

// TestRelativeLinksResolve: every relative link in docs/ points at a file
// that exists (anchors are not checked).
func TestRelativeLinksResolve(t *testing.T) {
	linkRe := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range linkRe.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(p), target)); err != nil {
				t.Errorf("%s links %s, which does not exist", filepath.Base(p), target)
			}
		}
	}
}
