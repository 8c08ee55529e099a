package observability

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"elasti.dev/elasti/internal/resolver"
)

// repoRoot is the repository, relative to this package.
const repoRoot = "../.."

// metric is one exported metric: its name and its kind (the Opts type it
// was built from: CounterOpts, GaugeOpts, HistogramOpts, SummaryOpts).
type metric struct {
	name string
	kind string
}

// exportedMetrics finds every elasti_ metric the code defines: a Name field
// set to an "elasti_..." string literal in a prometheus *Opts composite
// literal, in any non-test file under internal/. Parsing the source finds
// the operator's metrics too, which internal/controller registers from an
// init function into controller-runtime's registry, where a metric vector
// without series cannot be listed.
func exportedMetrics(t *testing.T) map[string]metric {
	t.Helper()
	out := map[string]metric{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(filepath.Join(repoRoot, "internal"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			sel, ok := lit.Type.(*ast.SelectorExpr)
			if !ok || !strings.HasSuffix(sel.Sel.Name, "Opts") {
				return true
			}
			for _, el := range lit.Elts {
				kv, ok := el.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				key, ok := kv.Key.(*ast.Ident)
				val, isLit := kv.Value.(*ast.BasicLit)
				if !ok || key.Name != "Name" || !isLit || val.Kind != token.STRING {
					continue
				}
				name, err := strconv.Unquote(val.Value)
				if err == nil && strings.HasPrefix(name, "elasti_") {
					out[name] = metric{name: name, kind: sel.Sel.Name}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatalf("parse internal/: %v", err)
	}
	return out
}

// TestExportedMetricsFound guards the source scan: it must find the
// resolver's metrics exactly as its registry registers them, and at least
// the operator's documented ones.
func TestExportedMetricsFound(t *testing.T) {
	got := exportedMetrics(t)
	reg := &recorder{}
	resolver.NewMetrics(reg)
	if len(reg.names) == 0 {
		t.Fatal("resolver.NewMetrics registered nothing")
	}
	for _, name := range reg.names {
		if _, ok := got[name]; !ok {
			t.Errorf("the source scan missed resolver metric %s", name)
		}
	}
	for _, name := range []string{"elasti_operator_reconcile_duration_seconds", "elasti_operator_mode", "elasti_operator_activations_total"} {
		if _, ok := got[name]; !ok {
			t.Errorf("the source scan missed operator metric %s", name)
		}
	}
	if got["elasti_resolver_hold_duration_seconds"].kind != "HistogramOpts" {
		t.Errorf("elasti_resolver_hold_duration_seconds has kind %q, want HistogramOpts", got["elasti_resolver_hold_duration_seconds"].kind)
	}
}

// recorder is a prometheus.Registerer that only records metric names.
type recorder struct{ names []string }

func (r *recorder) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 16)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		// Desc has no name accessor; its String form quotes fqName.
		s := d.String()
		if i := strings.Index(s, `fqName: "`); i >= 0 {
			rest := s[i+len(`fqName: "`):]
			r.names = append(r.names, rest[:strings.IndexByte(rest, '"')])
		}
	}
	return nil
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = r.Register(c)
	}
}

func (r *recorder) Unregister(prometheus.Collector) bool { return false }

// seriesNames maps every series name a metric produces to the metric:
// a histogram's are _bucket, _sum and _count, a summary adds _sum and
// _count to its own.
func seriesNames(ms map[string]metric) map[string]string {
	out := map[string]string{}
	for name, m := range ms {
		switch m.kind {
		case "HistogramOpts":
			// A classic histogram has no series of its bare name.
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				out[name+s] = name
			}
		case "SummaryOpts":
			for _, s := range []string{"", "_sum", "_count"} {
				out[name+s] = name
			}
		default:
			out[name] = name
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
