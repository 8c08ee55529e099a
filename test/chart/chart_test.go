package chart

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"elasti.dev/elasti/internal/contract"
)

const (
	repoRoot = "../.."
	chartDir = repoRoot + "/charts/elasti"
)

// copies returns the files the chart carries verbatim, by their source,
// from hack/chart-copies.txt: the list `make manifests` copies from.
func copies(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, line := range strings.Split(string(read(t, filepath.Join(repoRoot, "hack", "chart-copies.txt"))), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(f) != 2 {
			t.Fatalf("hack/chart-copies.txt: want 'source destination', got %q", line)
		}
		out[f[0]] = f[1]
	}
	return out
}

// TestChartCopiesAreCurrent: every file the chart carries verbatim, CRDs
// included, equals its source, and every CRD is carried.
func TestChartCopiesAreCurrent(t *testing.T) {
	cp := copies(t)
	for name := range yamlFiles(t, filepath.Join(repoRoot, "config", "crd", "bases")) {
		if _, ok := cp["config/crd/bases/"+name]; !ok {
			t.Errorf("CRD %s is not in hack/chart-copies.txt, so the chart does not carry it", name)
		}
	}
	for src, dst := range cp {
		want := read(t, filepath.Join(repoRoot, src))
		got := read(t, filepath.Join(chartDir, dst))
		if !bytes.Equal(want, got) {
			t.Errorf("charts/elasti/%s differs from %s; run: make manifests", dst, src)
		}
	}
}

// yamlFiles maps each .yaml file name in dir to its content.
func yamlFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no YAML files in %s (%v)", dir, err)
	}
	out := map[string]string{}
	for _, p := range paths {
		out[filepath.Base(p)] = string(read(t, p))
	}
	return out
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	// flagDefRe finds flag definitions: fs.StringVar(&x, "name", ...).
	flagDefRe = regexp.MustCompile(`fs\.[A-Za-z0-9]+Var\([^,]+,\s*"([a-z0-9-]+)"`)
	// flagUseRe finds the flags a template passes: "- --name=...".
	flagUseRe = regexp.MustCompile(`(?m)^\s*- --([a-z0-9-]+)`)
)

// zapFlags are the logging flags controller-runtime's zap.Options.BindFlags
// adds to both binaries.
var zapFlags = []string{"zap-devel", "zap-encoder", "zap-log-level", "zap-stacktrace-level", "zap-time-encoding"}

// TestTemplatesPassOnlyDefinedFlags: every flag in a Deployment template is
// one the binary defines, and the flags both must agree on are passed.
func TestTemplatesPassOnlyDefinedFlags(t *testing.T) {
	for _, c := range []struct {
		template, flags string
		required        []string
	}{
		{"templates/operator-deployment.yaml", "cmd/elasti-operator/flags.go",
			[]string{"port-range", "resolver-service-account", "resolver-namespace", "leader-elect", "polling-interval", "grace-period"}},
		{"templates/resolver-deployment.yaml", "cmd/elasti-resolver/flags.go",
			[]string{"port-range", "operator-url", "admin-bind-address"}},
	} {
		defined := map[string]bool{}
		for _, f := range zapFlags {
			defined[f] = true
		}
		for _, m := range flagDefRe.FindAllStringSubmatch(string(read(t, filepath.Join(repoRoot, c.flags))), -1) {
			defined[m[1]] = true
		}
		if len(defined) <= len(zapFlags) {
			t.Fatalf("found no flag definitions in %s", c.flags)
		}
		used := map[string]bool{}
		for _, m := range flagUseRe.FindAllStringSubmatch(string(read(t, filepath.Join(chartDir, c.template))), -1) {
			used[m[1]] = true
			if !defined[m[1]] {
				t.Errorf("%s passes --%s, which %s does not define", c.template, m[1], c.flags)
			}
		}
		for _, f := range c.required {
			if !used[f] {
				t.Errorf("%s does not pass --%s", c.template, f)
			}
		}
	}
}

// TestValuesDefaults: the chart's defaults are the binaries' and the
// kustomize install's.
func TestValuesDefaults(t *testing.T) {
	var v struct {
		PortRange struct{ Start, End int } `json:"portRange"`
		Resolver  struct {
			AdminPort int `json:"adminPort"`
		} `json:"resolver"`
	}
	if err := yaml.Unmarshal(read(t, filepath.Join(chartDir, "values.yaml")), &v); err != nil {
		t.Fatal(err)
	}
	if v.PortRange.Start != contract.DefaultPortRangeStart || v.PortRange.End != contract.DefaultPortRangeEnd {
		t.Errorf("values portRange %d-%d, want the binaries' default %d-%d", v.PortRange.Start, v.PortRange.End, contract.DefaultPortRangeStart, contract.DefaultPortRangeEnd)
	}
	if v.Resolver.AdminPort != 8012 {
		t.Errorf("values resolver.adminPort %d, want the resolver's default 8012", v.Resolver.AdminPort)
	}
}

// TestChartPinned: Chart.yaml pins a version and an appVersion.
func TestChartPinned(t *testing.T) {
	var c struct {
		APIVersion  string `json:"apiVersion"`
		Name        string `json:"name"`
		Version     string `json:"version"`
		AppVersion  string `json:"appVersion"`
		KubeVersion string `json:"kubeVersion"`
	}
	if err := yaml.Unmarshal(read(t, filepath.Join(chartDir, "Chart.yaml")), &c); err != nil {
		t.Fatal(err)
	}
	semver := regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`)
	if c.APIVersion != "v2" || c.Name != "elasti" || !semver.MatchString(c.Version) || !semver.MatchString(c.AppVersion) {
		t.Errorf("Chart.yaml: apiVersion %q name %q version %q appVersion %q; want v2, elasti and pinned X.Y.Z versions", c.APIVersion, c.Name, c.Version, c.AppVersion)
	}
}

// TestTemplatesListed guards against a template that helm would ignore: every
// file under templates/ is .yaml, .tpl or NOTES.txt.
func TestTemplatesListed(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join(chartDir, "templates"))
	if err != nil {
		t.Fatal(err)
	}
	var odd []string
	for _, e := range entries {
		n := e.Name()
		if !strings.HasSuffix(n, ".yaml") && !strings.HasSuffix(n, ".tpl") && n != "NOTES.txt" {
			odd = append(odd, n)
		}
	}
	sort.Strings(odd)
	if len(odd) > 0 {
		t.Errorf("unexpected files in templates/: %v", odd)
	}
}
