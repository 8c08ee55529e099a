// Package apirequests counts the operator's requests to the API server by
// method and resource, as elasti_operator_api_requests_total: what the
// operator asks of the API server, which client-go's own request metric
// (by method and host only) does not say. A platform team sees which
// resources it writes and how often; the bench tells its writes apart from
// Kubernetes' own controllers' (docs/operator.md, "Metrics").
package apirequests

import (
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var requests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "elasti_operator_api_requests_total",
	Help: "Requests the operator sent the API server, by HTTP method and resource (as resource/subresource, such as deployments/scale; other for discovery and the like), each attempt counted.",
}, []string{"method", "resource"})

func init() {
	metrics.Registry.MustRegister(requests)
}

// Wrap counts every request that rt sends; it is a transport wrapper for
// rest.Config.Wrap.
func Wrap(rt http.RoundTripper) http.RoundTripper {
	return counting{next: rt}
}

type counting struct{ next http.RoundTripper }

func (c counting) RoundTrip(r *http.Request) (*http.Response, error) {
	requests.WithLabelValues(r.Method, Resource(r.URL.Path)).Inc()
	return c.next.RoundTrip(r)
}

// Resource names what an API path addresses: "pods" for a pod or a list
// of them, "deployments/scale" for a subresource, "namespaces" for a
// namespace itself; "other" for a path that names no resource (discovery,
// /version, /healthz). A namespace's own subresources read as resources of
// the namespace (namespaces/x/status is "status"): the operator writes none.
func Resource(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api": // api/v1/...
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis": // apis/group/version/...
		parts = parts[3:]
	default:
		return "other"
	}
	if parts[0] == "namespaces" {
		if len(parts) <= 2 {
			return "namespaces"
		}
		parts = parts[2:] // namespaces/ns/resource...
	}
	if len(parts) >= 3 {
		return parts[0] + "/" + parts[2]
	}
	return parts[0]
}
