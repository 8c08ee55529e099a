package contract

import (
	discoveryv1 "k8s.io/api/discovery/v1"
)

// EndpointReady is Elasti's one answer to "may this endpoint take traffic
// now": its ready condition is explicitly true and it is not terminating.
// The resolver forwards to such endpoints and releases held requests on the
// first one; the operator removes a proxy slice only once the Service's own
// slices list one; tests wait for them by the same rule.
//
// The Kubernetes API asks consumers to read an absent ready condition as
// ready. Elasti does not: its promise is that the first request after a wake
// reaches a pod that is listening, and an endpoint nobody has vouched for may
// not be. The EndpointSlice controller always sets ready, so only a slice
// written by another manager can lack it, and its endpoints count once that
// manager says ready (Traefik and Envoy read the condition the same way,
// which is why Elasti's own proxy slices always set it). A terminating
// endpoint is never ready, even when it says so (publishNotReadyAddresses):
// it is about to go away. Serving is not consulted: it differs from ready
// only for terminating endpoints, excluded already, and for Services with
// publishNotReadyAddresses, whose owners asked for traffic to unready pods.
func EndpointReady(c discoveryv1.EndpointConditions) bool {
	return c.Ready != nil && *c.Ready && (c.Terminating == nil || !*c.Terminating)
}
