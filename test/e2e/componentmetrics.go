package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"

	"elasti.dev/elasti/internal/contract"
)

// ResolverMetric scrapes every running resolver pod's /metrics (admin port
// 8012, plain HTTP) and returns, per pod name, the sum of the values of the
// metric called name (counters, gauges and untyped; 0 when the pod does not
// export it).
func (e *Env) ResolverMetric(ctx context.Context, name string) (map[string]float64, error) {
	pods, err := e.Pods(ctx, ElastiNamespace, map[string]string{contract.LabelComponent: contract.ComponentResolver})
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || p.Status.PodIP == "" {
			continue
		}
		families, err := e.PodMetrics(ctx, &p, "8012")
		if err != nil {
			return nil, fmt.Errorf("resolver %w", err)
		}
		out[p.Name] = sumFamily(families[name])
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no running resolver pod in %s", ElastiNamespace)
	}
	return out, nil
}

// PodMetrics scrapes one pod's /metrics on port (plain HTTP), parsed.
func (e *Env) PodMetrics(ctx context.Context, p *corev1.Pod, port string) (map[string]*dto.MetricFamily, error) {
	text, err := e.HTTPGet(ctx, "http://"+net.JoinHostPort(p.Status.PodIP, port)+"/metrics")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.Name, err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("%s's metrics: %w", p.Name, err)
	}
	return families, nil
}

func sumFamily(f *dto.MetricFamily) float64 {
	return SumFamilyWhere(f, "", "")
}

// SumFamilyWhere sums the series of f whose label has value ("" for
// every series).
func SumFamilyWhere(f *dto.MetricFamily, label, value string) float64 {
	if f == nil {
		return 0
	}
	var sum float64
	for _, m := range f.GetMetric() {
		if label != "" && !hasLabel(m, label, value) {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Untyped != nil:
			sum += m.GetUntyped().GetValue()
		}
	}
	return sum
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue() == value
		}
	}
	return false
}
