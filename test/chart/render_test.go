package chart

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// helmBinary returns an already built helm (hack/helm.sh, `make helm`), or
// skips: unit tests do not build helm themselves.
func helmBinary(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("ELASTI_HELM"); h != "" {
		return h
	}
	matches, _ := filepath.Glob(filepath.Join(repoRoot, "bin", "tools", "helm-v*"))
	if len(matches) == 0 {
		t.Skip("no helm in bin/tools; run `make helm` (or set ELASTI_HELM) to render the chart")
	}
	abs, err := filepath.Abs(matches[len(matches)-1])
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// TestRenderedObjectsDecodeStrictly renders the chart with every toggle on
// and decodes each built-in object strictly into its Go type, so that a
// misspelt or misplaced field fails here rather than at install time.
func TestRenderedObjectsDecodeStrictly(t *testing.T) {
	helm := helmBinary(t)
	cmd := exec.Command(helm, "template", "elasti", chartDir, "--namespace", "elasti-system", "--kube-version", "v1.37.2",
		"--set", "serviceMonitor.enabled=true,prometheusRule.enabled=true,resolver.autoscaling.enabled=true,grafanaDashboard.enabled=true,metricsAPI.enabled=true,"+
			"watchNamespaces={team-a},sentry.existingSecret=sentry,operator.activationAudiences={elasti},resolver.declarePortRange=true")
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	decoded := 0
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(out), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("rendered YAML does not parse: %v\n%s", err, doc)
		}
		gv, err := schema.ParseGroupVersion(meta.APIVersion)
		if err != nil {
			t.Fatalf("%s: %v", meta.APIVersion, err)
		}
		obj, err := clientgoscheme.Scheme.New(gv.WithKind(meta.Kind))
		if err != nil {
			continue // ServiceMonitor, PrometheusRule: no Go types here
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Errorf("%s %s: %v", meta.APIVersion, meta.Kind, err)
		}
		decoded++
	}
	if decoded < 15 {
		t.Errorf("decoded only %d built-in objects", decoded)
	}
}
