package proxyslices

import (
	"context"
	"fmt"

	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"elasti.dev/elasti/internal/contract"
)

// ServiceReady reports whether the Service's own EndpointSlices (not
// Elasti's) list a ready endpoint: the sign that a woken target serves
// again, and that the proxy slices may go.
func ServiceReady(ctx context.Context, c Lister, namespace, service string) (bool, error) {
	slices := &discoveryv1.EndpointSliceList{}
	if err := c.List(ctx, slices, client.InNamespace(namespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: service}); err != nil {
		return false, fmt.Errorf("list EndpointSlices of Service %s/%s: %w", namespace, service, err)
	}
	return OwnReady(slices.Items), nil
}

// OwnReady reports whether the Service's own EndpointSlices (those
// not managed by Elasti) list an endpoint that is explicitly ready and not
// terminating, the same rule the resolver forwards by.
func OwnReady(slices []discoveryv1.EndpointSlice) bool {
	for i := range slices {
		s := &slices[i]
		if s.Labels[contract.LabelManagedBy] == contract.ManagedBy {
			continue
		}
		for _, ep := range s.Endpoints {
			if EndpointReady(ep) {
				return true
			}
		}
	}
	return false
}

// EndpointReady: an endpoint with an address that contract.EndpointReady
// accepts.
func EndpointReady(ep discoveryv1.Endpoint) bool {
	return len(ep.Addresses) > 0 && contract.EndpointReady(ep.Conditions)
}
