package scaletarget

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// operations counts the writes to /scale. Labels are bounded: namespace
// and elastiservice name the object, direction and result take two values
// each.
var operations = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "elasti_operator_scale_operations_total",
	Help: "Scale operations through /scale, by direction (up, down) and result (success, error).",
}, []string{"namespace", "elastiservice", "direction", "result"})

func init() {
	metrics.Registry.MustRegister(operations)
}

// Forget drops the series of a deleted ElastiService.
func Forget(labels prometheus.Labels) {
	operations.DeletePartialMatch(labels)
}

func resultLabel(err error) string {
	if err != nil {
		return "error"
	}
	return "success"
}
