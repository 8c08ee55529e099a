package observability

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"
)

// rulesPath is the PrometheusRule under test.
var rulesPath = filepath.Join(repoRoot, "config", "prometheus", "elasti-rules.yaml")

type prometheusRule struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []rule `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

type rule struct {
	Alert       string            `json:"alert"`
	Record      string            `json:"record"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

func loadRules(t *testing.T) prometheusRule {
	t.Helper()
	raw, err := os.ReadFile(rulesPath)
	if err != nil {
		t.Fatal(err)
	}
	var pr prometheusRule
	if err := yaml.UnmarshalStrict(raw, &pr); err != nil {
		t.Fatalf("%s: %v", rulesPath, err)
	}
	return pr
}

// TestRulesWellFormed: a PrometheusRule whose alerts have a valid
// expression over real metrics, a valid "for", a severity, a summary and a
// description that only use labels the expression keeps.
func TestRulesWellFormed(t *testing.T) {
	pr := loadRules(t)
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" || pr.Metadata.Name == "" {
		t.Fatalf("%s: %s %s %q, want a named monitoring.coreos.com/v1 PrometheusRule", rulesPath, pr.APIVersion, pr.Kind, pr.Metadata.Name)
	}
	series := seriesNames(exportedMetrics(t))
	labelRe := regexp.MustCompile(`\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)`)
	seen := map[string]bool{}
	for _, g := range pr.Spec.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("group %q: needs a name and rules", g.Name)
		}
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: a rule without an alert name", g.Name)
				continue
			}
			if seen[r.Alert] {
				t.Errorf("alert %s: defined twice", r.Alert)
			}
			seen[r.Alert] = true
			if _, err := checkExpr(r.Expr, series); err != nil {
				t.Errorf("alert %s: %v\n  expr: %s", r.Alert, err, r.Expr)
			}
			if r.For != "" {
				if _, err := model.ParseDuration(r.For); err != nil {
					t.Errorf("alert %s: for %q: %v", r.Alert, r.For, err)
				}
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("alert %s: severity %q, want warning or critical", r.Alert, s)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s: needs a summary and a description", r.Alert)
			}
			for _, a := range r.Annotations {
				for _, m := range labelRe.FindAllStringSubmatch(a, -1) {
					if !keepsLabel(r.Expr, m[1]) {
						t.Errorf("alert %s: an annotation uses $labels.%s, which the expression does not keep", r.Alert, m[1])
					}
				}
			}
		}
	}
}

// keepsLabel reports whether an aggregation in expr keeps label: it is named
// in a by (...) clause. Expressions without aggregation keep every label,
// which this check does not try to prove.
func keepsLabel(expr, label string) bool {
	by := regexp.MustCompile(`\bby\s*\(([^)]*)\)`).FindAllStringSubmatch(expr, -1)
	if len(by) == 0 {
		return !strings.Contains(expr, "absent(")
	}
	for _, m := range by {
		for _, l := range strings.Split(m[1], ",") {
			if strings.TrimSpace(l) == label {
				return true
			}
		}
	}
	return false
}

// TestRulesCoverTheIssue: the alerts the design asks for exist and watch
// the metric that shows each failure.
func TestRulesCoverTheIssue(t *testing.T) {
	pr := loadRules(t)
	exprs := map[string]string{}
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			exprs[r.Alert] = r.Expr
		}
	}
	for alert, metric := range map[string]string{
		"ElastiHeldRequestsTimingOut":    "elasti_resolver_timed_out_total",
		"ElastiActivationErrors":         "elasti_resolver_activations_total",
		"ElastiOperatorActivationErrors": "elasti_operator_activations_total",
		"ElastiTriggersUnhealthy":        "elasti_operator_trigger_evaluations_total",
		"ElastiNoReadyResolver":          "elasti_resolver_open_listeners",
	} {
		if e, ok := exprs[alert]; !ok {
			t.Errorf("no alert %s", alert)
		} else if !strings.Contains(e, metric) {
			t.Errorf("alert %s does not watch %s: %s", alert, metric, e)
		}
	}
}
