package observability

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// dashboardPath is the Grafana dashboard under test.
var dashboardPath = filepath.Join(repoRoot, "config", "grafana", "elasti-dashboard.json")

type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Schema     int     `json:"schemaVersion"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID      int     `json:"id"`
	Type    string  `json:"type"`
	Title   string  `json:"title"`
	Panels  []panel `json:"panels"` // a collapsed row's panels
	GridPos *struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	var d dashboard
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s is not valid JSON: %v", dashboardPath, err)
	}
	if dec.More() {
		t.Fatalf("%s has data after the dashboard object", dashboardPath)
	}
	return d
}

func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

// TestDashboardWellFormed: a title and uid, unique panel ids, a position for
// every panel, and every panel but rows queries something with a valid
// expression.
func TestDashboardWellFormed(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" || d.Schema == 0 {
		t.Errorf("uid %q, title %q, schemaVersion %d: all are required", d.UID, d.Title, d.Schema)
	}
	series := seriesNames(exportedMetrics(t))
	ids := map[int]string{}
	for _, p := range allPanels(d.Panels) {
		if prev, dup := ids[p.ID]; dup || p.ID == 0 {
			t.Errorf("panel %q: id %d is zero or also used by %q", p.Title, p.ID, prev)
		}
		ids[p.ID] = p.Title
		if p.GridPos == nil || p.GridPos.W == 0 || p.GridPos.H == 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: missing or invalid gridPos", p.Title)
		}
		if p.Type == "row" {
			continue
		}
		if p.Title == "" || len(p.Targets) == 0 {
			t.Errorf("panel %d: needs a title and at least one target", p.ID)
		}
		for _, tg := range p.Targets {
			if _, err := checkExpr(grafanaVars(tg.Expr), series); err != nil {
				t.Errorf("panel %q target %s: %v\n  expr: %s", p.Title, tg.RefID, err, tg.Expr)
			}
		}
	}
}

// TestDashboardCoversEveryMetric: every elasti_ metric the code exports
// appears on some panel.
func TestDashboardCoversEveryMetric(t *testing.T) {
	d := loadDashboard(t)
	ms := exportedMetrics(t)
	series := seriesNames(ms)
	shown := map[string]bool{}
	for _, p := range allPanels(d.Panels) {
		for _, tg := range p.Targets {
			names, _ := checkExpr(grafanaVars(tg.Expr), series)
			for _, n := range names {
				shown[series[n]] = true
			}
		}
	}
	for _, name := range sortedKeys(ms) {
		if !shown[name] {
			t.Errorf("metric %s is on no panel of %s", name, dashboardPath)
		}
	}
}

// TestDashboardVariables: the namespace and elastiservice variables exist,
// and every $variable a query uses is defined.
func TestDashboardVariables(t *testing.T) {
	d := loadDashboard(t)
	defined := map[string]bool{}
	for _, v := range d.Templating.List {
		defined[v.Name] = true
	}
	for _, want := range []string{"datasource", "namespace", "elastiservice"} {
		if !defined[want] {
			t.Errorf("no template variable %q", want)
		}
	}
	varRe := regexp.MustCompile(`\$\{?([a-zA-Z_][a-zA-Z0-9_]*)`)
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range varRe.FindAllStringSubmatch(string(raw), -1) {
		if name := m[1]; !strings.HasPrefix(name, "__") && !defined[name] {
			t.Errorf("$%s is used but not defined", name)
		}
	}
}
