package metricsapi

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"elasti.dev/elasti/internal/queuemetrics"
)

// fixedSource serves one reading per ElastiService, whatever the metric.
type fixedSource map[types.NamespacedName]Reading

func (s fixedSource) Read(_ context.Context, _ string, es types.NamespacedName) (Reading, bool, error) {
	r, ok := s[es]
	return r, ok, nil
}

func TestProviderAnswersPerElastiService(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	p := &Provider{Source: fixedSource{
		{Namespace: "team-a", Name: "api"}: {Value: resource.MustParse("2.5"), At: at, Window: 30 * time.Second},
	}}
	sel := func(s string) labels.Selector {
		t.Helper()
		l, err := labels.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	got, err := p.GetExternalMetric(context.Background(), "team-a", sel(SelectorLabel+"=api"), provider.ExternalMetricInfo{Metric: MetricRate})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Items) != 1 {
		t.Fatalf("%d values; the HPA sums what it gets, so there must be exactly one", len(got.Items))
	}
	v := got.Items[0]
	if v.MetricName != MetricRate || v.Value.Cmp(resource.MustParse("2.5")) != 0 || !v.Timestamp.Time.Equal(at) || v.WindowSeconds == nil || *v.WindowSeconds != 30 {
		t.Errorf("got %+v; want %s 2.5 at %v over 30 s", v, MetricRate, at)
	}
	for _, c := range []struct {
		name, ns, selector, metric string
		code                       int32
	}{
		{"another namespace's ElastiService of the same name", "team-b", SelectorLabel + "=api", MetricRate, http.StatusNotFound},
		{"no selector", "team-a", "", MetricRate, http.StatusBadRequest},
		{"a set, not one name", "team-a", SelectorLabel + " in (api,web)", MetricRate, http.StatusBadRequest},
		{"an unknown metric", "team-a", SelectorLabel + "=api", "cpu", http.StatusNotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := p.GetExternalMetric(context.Background(), c.ns, sel(c.selector), provider.ExternalMetricInfo{Metric: c.metric})
			status, ok := errors.AsType[*apierrors.StatusError](err)
			if !ok || status.Status().Code != c.code {
				t.Errorf("error %v; want HTTP %d", err, c.code)
			}
		})
	}
	if n := len(p.ListAllExternalMetrics()); n != len(Metrics) {
		t.Errorf("discovery lists %d metrics, want %d", n, len(Metrics))
	}
}

// TestWorkqueueMetricsStayOnTheOperatorsRegistry: this package links
// k8s.io/apiserver, which brings component-base's workqueue metrics
// provider, and client-go takes only the first provider set (here
// component-base's). A queue built with queuemetrics.Provider still
// reports on controller-runtime's registry, which the operator's /metrics
// serves (docs/operator.md).
func TestWorkqueueMetricsStayOnTheOperatorsRegistry(t *testing.T) {
	mp, err := queuemetrics.Provider()
	if err != nil {
		t.Fatal(err)
	}
	q := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[types.NamespacedName]{Name: "metricsapi_probe", MetricsProvider: mp})
	defer q.ShutDown()
	q.Add(types.NamespacedName{Name: "x"})
	if err := queuemetrics.Has(ctrlmetrics.Registry, "metricsapi_probe", 1); err != nil {
		t.Fatal(err)
	}
}
