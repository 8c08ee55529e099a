package wakecalls

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The activation calls' metrics. Labels are bounded: namespace and
// elastiservice name the object, result and wake take a handful of fixed
// values.
var (
	activations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "elasti_operator_activations_total",
		Help: "Wake requests received by the activation server, by result (woken, forwarded, not_found, error).",
	}, []string{"namespace", "elastiservice", "result"})
	wakeRequestCount = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "elasti_operator_wake_requests_total",
		Help: "Activation calls the leader handed to the reconciler, by whether the call started a wake or joined one already pending (wake: started, joined).",
	}, []string{"namespace", "elastiservice", "wake"})
)

func init() {
	metrics.Registry.MustRegister(activations, wakeRequestCount)
}

// Values of the wake label of elasti_operator_wake_requests_total.
const (
	wakeStarted = "started"
	wakeJoined  = "joined"
)

// Forget drops the series of a deleted ElastiService; labels name it by
// namespace and elastiservice.
func Forget(labels prometheus.Labels) {
	activations.DeletePartialMatch(labels)
	wakeRequestCount.DeletePartialMatch(labels)
}
