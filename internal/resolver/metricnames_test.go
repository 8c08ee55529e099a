package resolver

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"elasti.dev/elasti/internal/contract"
)

// TestMetricNamesInContract: the two metrics the operator's metrics API
// reads from the resolvers (internal/controller/metricsource) carry the
// names and labels internal/contract gives both planes.
func TestMetricNamesInContract(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.Held.WithLabelValues("ns", "es").Set(1)
	m.Forwarded.WithLabelValues("ns", "es").Inc()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{contract.ResolverHeldMetric, contract.ResolverForwardedMetric} {
		i := slices.IndexFunc(families, func(f *dto.MetricFamily) bool { return f.GetName() == name })
		if i < 0 {
			t.Errorf("the resolver exports no %s", name)
			continue
		}
		var labels []string
		for _, l := range families[i].GetMetric()[0].GetLabel() {
			labels = append(labels, l.GetName())
		}
		if want := []string{contract.MetricLabelElastiService, contract.MetricLabelNamespace}; !slices.Equal(labels, want) {
			t.Errorf("%s labels %v, want %v", name, labels, want)
		}
	}
}
