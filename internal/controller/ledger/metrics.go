package ledger

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// The ledger's metrics (docs/ledger.md). The counters grow by what each
// status write added to status.ledger, so they agree with it and a new
// leader neither repeats nor loses a period: it adds only what it writes.
var (
	ledgerSleeps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "elasti_operator_ledger_sleeps_total",
		Help: "Periods at zero that began (status.ledger.sleeps).",
	}, []string{"namespace", "elastiservice"})
	ledgerWakes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "elasti_operator_ledger_wakes_total",
		Help: "Periods at zero that ended with the target given replicas again (status.ledger.wakes).",
	}, []string{"namespace", "elastiservice"})
	ledgerSecondsAtZero = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "elasti_operator_ledger_at_zero_seconds_total",
		Help: "Seconds spent at zero, added when a period at zero ends (status.ledger.secondsAtZero).",
	}, []string{"namespace", "elastiservice"})
	ledgerAtZeroSince = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "elasti_operator_ledger_at_zero_since_timestamp_seconds",
		Help: "Unix time at which the current period at zero began; 0 while the target has replicas (status.ledger.atZeroSince).",
	}, []string{"namespace", "elastiservice"})
	ledgerSavedCPU = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "elasti_operator_ledger_saved_cpu_core_seconds_total",
		Help: "CPU requests not reserved while at zero, in core-seconds, added when a period at zero ends (status.ledger.saved.cpuCoreSeconds).",
	}, []string{"namespace", "elastiservice"})
	ledgerSavedMemory = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "elasti_operator_ledger_saved_memory_byte_seconds_total",
		Help: "Memory requests not reserved while at zero, in byte-seconds, added when a period at zero ends (status.ledger.saved.memoryByteSeconds).",
	}, []string{"namespace", "elastiservice"})
	coldStartPhaseHistogram = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "elasti_operator_cold_start_phase_seconds",
		Help:    "Phases of cold starts from zero, read from the first woken pod: scheduling (scale write to PodScheduled), starting (to the last container running), readiness (to Ready) and total (scale write to Ready).",
		Buckets: []float64{0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200},
	}, []string{"namespace", "elastiservice", "phase"})
)

func init() {
	metrics.Registry.MustRegister(ledgerSleeps, ledgerWakes, ledgerSecondsAtZero, ledgerAtZeroSince, ledgerSavedCPU, ledgerSavedMemory, coldStartPhaseHistogram)
}

// Record moves the metrics by what a status write changed in the
// ledger, from prev to cur.
func Record(namespace, name string, prev, cur *elastiv1alpha1.Ledger) {
	if cur == nil {
		return
	}
	if prev == nil {
		prev = &elastiv1alpha1.Ledger{}
	}
	add := func(c *prometheus.CounterVec, d float64) {
		if d > 0 {
			c.WithLabelValues(namespace, name).Add(d)
		}
	}
	add(ledgerSleeps, float64(cur.Sleeps-prev.Sleeps))
	add(ledgerWakes, float64(cur.Wakes-prev.Wakes))
	add(ledgerSecondsAtZero, float64(cur.SecondsAtZero-prev.SecondsAtZero))
	add(ledgerSavedCPU, quantityFloat(cur.Saved.CPUCoreSeconds)-quantityFloat(prev.Saved.CPUCoreSeconds))
	add(ledgerSavedMemory, quantityFloat(cur.Saved.MemoryByteSeconds)-quantityFloat(prev.Saved.MemoryByteSeconds))
	since := 0.0
	if cur.AtZeroSince != nil {
		since = float64(cur.AtZeroSince.Unix())
	}
	ledgerAtZeroSince.WithLabelValues(namespace, name).Set(since)
	if cs := cur.LastColdStart; cs != nil && cs.ReadyTime != nil && (prev.LastColdStart == nil || prev.LastColdStart.ReadyTime == nil) {
		for _, ph := range coldStartPhaseSeconds(*cs) {
			coldStartPhaseHistogram.WithLabelValues(namespace, name, ph.name).Observe(ph.seconds)
		}
	}
}

func quantityFloat(q *resource.Quantity) float64 {
	if q == nil {
		return 0
	}
	return q.AsApproximateFloat64()
}

// Forget drops the ledger series of a deleted ElastiService.
func Forget(labels prometheus.Labels) {
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{
		ledgerSleeps, ledgerWakes, ledgerSecondsAtZero, ledgerAtZeroSince, ledgerSavedCPU, ledgerSavedMemory, coldStartPhaseHistogram,
	} {
		v.DeletePartialMatch(labels)
	}
}
