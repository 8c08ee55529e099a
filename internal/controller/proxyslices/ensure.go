package proxyslices

import (
	"context"
	"fmt"

	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
)

// Lister lists objects; the manager's cached client is one.
type Lister interface {
	List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error
}

// Writer is what Ensure needs: the slices an ElastiService owns listed,
// and written. The manager's client is one.
type Writer interface {
	Lister
	Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error
	Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error
	Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error
}

// Ensure makes the ElastiService's proxy slices exactly want: creates
// or updates those in want, deletes every other slice it owns (an old
// address family, or one left for a previous spec.service). It is the one
// place that writes proxy slices; the caller decides when, in the order of
// docs/architecture.md, "The order of the writes".
func Ensure(ctx context.Context, c Writer, es *elastiv1alpha1.ElastiService, want []*discoveryv1.EndpointSlice) error {
	existing, err := Owned(ctx, c, es)
	if err != nil {
		return err
	}
	for _, w := range want {
		h, ok := existing[w.Name]
		delete(existing, w.Name)
		switch {
		case !ok:
			// AlreadyExists means the cache lags; the retry compares
			// and updates.
			if err := c.Create(ctx, w); err != nil {
				return fmt.Errorf("create proxy EndpointSlice %s/%s: %w", w.Namespace, w.Name, err)
			}
		case sliceNeedsUpdate(h, w):
			w.ResourceVersion = h.ResourceVersion
			if err := c.Update(ctx, w); err != nil {
				return fmt.Errorf("update proxy EndpointSlice %s/%s: %w", w.Namespace, w.Name, err)
			}
		}
	}
	for _, s := range existing {
		if err := c.Delete(ctx, s, client.Preconditions{UID: &s.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete proxy EndpointSlice %s/%s: %w", s.Namespace, s.Name, err)
		}
	}
	return nil
}

// Remove deletes every proxy slice the ElastiService owns: Ensure with
// none wanted.
func Remove(ctx context.Context, c Writer, es *elastiv1alpha1.ElastiService) error {
	return Ensure(ctx, c, es, nil)
}

// Owned returns the proxy slices the ElastiService owns, by name.
func Owned(ctx context.Context, c Lister, es *elastiv1alpha1.ElastiService) (map[string]*discoveryv1.EndpointSlice, error) {
	have := &discoveryv1.EndpointSliceList{}
	if err := c.List(ctx, have, client.InNamespace(es.Namespace), client.MatchingLabels{
		contract.LabelManagedBy:     contract.ManagedBy,
		contract.LabelElastiService: elastiServiceLabelValue(es.Name),
	}); err != nil {
		return nil, fmt.Errorf("list proxy EndpointSlices of %s/%s: %w", es.Namespace, es.Name, err)
	}
	owned := map[string]*discoveryv1.EndpointSlice{}
	for i := range have.Items {
		if ownedBy(&have.Items[i], es.UID) {
			owned[have.Items[i].Name] = &have.Items[i]
		}
	}
	return owned, nil
}
