package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/controller/ledger"
	"elasti.dev/elasti/internal/controller/scaletarget"
	"elasti.dev/elasti/internal/controller/wakecalls"
	"elasti.dev/elasti/internal/scaling"
)

// The operator's metrics. Labels are bounded: namespace and elastiservice
// name the object, mode and result take a handful of fixed values.
var (
	reconcileDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "elasti_operator_reconcile_duration_seconds",
		Help:    "Time one ElastiService reconcile took, by result (success, error, or conflict: a write met a newer version of its object, and the reconcile runs again).",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	}, []string{"result"})
	modeGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "elasti_operator_mode",
		Help: "1 for the mode an ElastiService is in (serve or proxy), 0 for the other.",
	}, []string{"namespace", "elastiservice", "mode"})
	triggerEvaluations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "elasti_operator_trigger_evaluations_total",
		Help: "Trigger evaluations, by result (idle, active, unhealthy).",
	}, []string{"namespace", "elastiservice", "result"})
	writeConflicts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "elasti_operator_write_conflicts_total",
		Help: "Reconciles whose write met a newer version of its object (another writer, or the cache behind the API server) and that ran again at once, with no Warning Event.",
	}, []string{"namespace", "elastiservice"})
	resolverPortsAllocated = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "elasti_operator_resolver_ports_allocated",
		Help: "Resolver ports this operator has allocated.",
	})
	sliceRefreshWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "elasti_operator_proxy_slice_refresh_writes_total",
		Help: "Proxy EndpointSlice updates made when the ready resolvers changed, by result (updated, or failed: a conflict, a slice gone, or a pass cancelled by a newer change; the next pass writes it).",
	}, []string{"result"})
	sliceRefreshDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "elasti_operator_proxy_slice_refresh_duration_seconds",
		Help:    "Time one refresh took to point every proxy EndpointSlice at the ready resolvers.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
	})
)

func init() {
	metrics.Registry.MustRegister(reconcileDuration, modeGauge, triggerEvaluations, writeConflicts, resolverPortsAllocated,
		sliceRefreshWrites, sliceRefreshDuration)
}

func setModeMetric(namespace, name string, mode elastiv1alpha1.Mode) {
	serve, proxy := 1.0, 0.0
	if mode == elastiv1alpha1.ModeProxy {
		serve, proxy = 0, 1
	}
	modeGauge.WithLabelValues(namespace, name, string(elastiv1alpha1.ModeServe)).Set(serve)
	modeGauge.WithLabelValues(namespace, name, string(elastiv1alpha1.ModeProxy)).Set(proxy)
}

// countEvaluation counts and logs a completed trigger evaluation (the
// trigger poller's Done).
func countEvaluation(es *elastiv1alpha1.ElastiService, res scaling.Result) {
	triggerEvaluations.WithLabelValues(es.Namespace, es.Name, string(res.State)).Inc()
	ctrl.Log.WithName("triggers").V(1).Info("triggers evaluated", "elastiservice", client.ObjectKeyFromObject(es).String(),
		"state", res.State, "value", res.Value, "reason", res.Reason)
}

// forgetMetrics drops the series of a deleted ElastiService.
func forgetMetrics(namespace, name string) {
	labels := prometheus.Labels{"namespace": namespace, "elastiservice": name}
	modeGauge.DeletePartialMatch(labels)
	scaletarget.Forget(labels)
	triggerEvaluations.DeletePartialMatch(labels)
	writeConflicts.DeletePartialMatch(labels)
	ledger.Forget(labels)
	wakecalls.Forget(labels)
}

func resultLabel(err error) string {
	if err != nil {
		return "error"
	}
	return "success"
}
