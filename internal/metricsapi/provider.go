package metricsapi

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/metrics/pkg/apis/external_metrics"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider"
)

// The metrics served, each for one ElastiService of the request's
// namespace, chosen by the label selector SelectorLabel=<name>.
const (
	// MetricHeld is the number of requests and connections the resolvers
	// hold for the ElastiService now.
	MetricHeld = "elasti_requests_held"
	// MetricRate is the ElastiService's requests per second.
	MetricRate = "elasti_requests_per_second"
	// MetricAwake is 1 while Elasti wants the target to have a replica,
	// and 0 once it may go to zero.
	MetricAwake = "elasti_awake"
)

// SelectorLabel is the label an HPA's metric selector names the
// ElastiService by.
const SelectorLabel = "elasti.dev/elastiservice"

// Metrics lists what the server offers, in the order of discovery.
var Metrics = []string{MetricHeld, MetricRate, MetricAwake}

// Reading is one metric's value for one ElastiService.
type Reading struct {
	Value resource.Quantity
	// At is when the value was measured.
	At time.Time
	// Window is the span a rate was measured over; zero for a value of a
	// moment.
	Window time.Duration
}

// Source reads the metrics. ok is false when no ElastiService named es
// is served (it does not exist, or is outside the operator's namespaces).
type Source interface {
	Read(ctx context.Context, metric string, es types.NamespacedName) (r Reading, ok bool, err error)
}

// Provider answers the external metrics API from a Source.
type Provider struct {
	Source Source
}

var _ provider.ExternalMetricsProvider = (*Provider)(nil)

// externalMetrics is the resource the not-found errors name.
var externalMetrics = schema.GroupResource{Group: external_metrics.GroupName, Resource: "externalmetrics"}

// GetExternalMetric answers one HPA read: the metric of the one
// ElastiService the selector names in namespace.
func (p *Provider) GetExternalMetric(ctx context.Context, namespace string, selector labels.Selector, info provider.ExternalMetricInfo) (*external_metrics.ExternalMetricValueList, error) {
	if !served(info.Metric) {
		return nil, provider.NewMetricNotFoundError(externalMetrics, info.Metric)
	}
	name, ok := selector.RequiresExactMatch(SelectorLabel)
	if !ok || name == "" {
		return nil, apierrors.NewBadRequest(fmt.Sprintf(
			"metric %s is per ElastiService: select one with the label selector %s=<name> (got %q)", info.Metric, SelectorLabel, selector.String()))
	}
	es := types.NamespacedName{Namespace: namespace, Name: name}
	r, ok, err := p.Source.Read(ctx, info.Metric, es)
	if err != nil {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("metric %s of ElastiService %s: %v", info.Metric, es, err))
	}
	if !ok {
		return nil, provider.NewMetricNotFoundForError(externalMetrics, info.Metric, "ElastiService "+es.String())
	}
	v := external_metrics.ExternalMetricValue{
		MetricName:   info.Metric,
		MetricLabels: map[string]string{SelectorLabel: name},
		Timestamp:    metav1.NewTime(r.At),
		Value:        r.Value,
	}
	if r.Window > 0 {
		v.WindowSeconds = ptr.To(int64(r.Window / time.Second))
	}
	return &external_metrics.ExternalMetricValueList{Items: []external_metrics.ExternalMetricValue{v}}, nil
}

// ListAllExternalMetrics is discovery's list.
func (p *Provider) ListAllExternalMetrics() []provider.ExternalMetricInfo {
	out := make([]provider.ExternalMetricInfo, 0, len(Metrics))
	for _, m := range Metrics {
		out = append(out, provider.ExternalMetricInfo{Metric: m})
	}
	return out
}

func served(metric string) bool { return slices.Contains(Metrics, metric) }
