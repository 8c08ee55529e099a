package activation

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Values of the reason label of elasti_operator_activation_refusals_total.
const (
	refusedUnauthenticated = "unauthenticated"
	refusedForbidden       = "forbidden"
	refusedRateLimited     = "rate_limited"
)

// refusals counts the activation calls the server refused before looking at
// the request. The label has three values; the caller's address is logged,
// never a label.
var refusals = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "elasti_operator_activation_refusals_total",
	Help: "Activation calls refused before the wake, by reason (unauthenticated, forbidden, rate_limited).",
}, []string{"reason"})

func init() {
	// The operator's registry, served on its metrics endpoint. The resolver
	// links this package for the client and serves its own registry, so
	// the series never shows there.
	metrics.Registry.MustRegister(refusals)
	for _, r := range []string{refusedUnauthenticated, refusedForbidden, refusedRateLimited} {
		refusals.WithLabelValues(r)
	}
}
