package proxyslices

import (
	"context"
	"fmt"
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"elasti.dev/elasti/internal/contract"
)

// Updater writes one object; a client is one.
type Updater interface {
	Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error
}

// Refreshed is what one Refresh did.
type Refreshed struct {
	// Updated slices now list the resolvers; Current ones already did.
	Updated, Current int
	// Failed writes (a conflict: the cache was behind; a slice gone) are
	// left to the next Refresh.
	Failed int
	// Reconcile names the ElastiServices with a slice of an address family
	// no ready resolver has: only a reconcile may remove it.
	Reconcile []types.NamespacedName
}

// Refresh points every proxy slice that list finds at resolvers, the way
// Build lists them, and changes nothing else of a slice (its ports, its
// owner): a change of the resolver pods reaches every sleeping Service
// with one write per slice that lists the old set, and no reconcile
// (docs/architecture.md, "When the resolvers change"). Up to workers
// writes run at once. resolvers must not be empty: a Service left with no
// resolver is the reconcile's to fail open.
func Refresh(ctx context.Context, list Lister, w Updater, resolvers []Resolver, workers int) (Refreshed, error) {
	if len(resolvers) == 0 {
		return Refreshed{}, fmt.Errorf("refresh proxy EndpointSlices: no ready resolver")
	}
	slices := &discoveryv1.EndpointSliceList{}
	if err := list.List(ctx, slices, client.MatchingLabels{contract.LabelManagedBy: contract.ManagedBy}); err != nil {
		return Refreshed{}, fmt.Errorf("list proxy EndpointSlices: %w", err)
	}
	want := map[discoveryv1.AddressType][]discoveryv1.Endpoint{
		discoveryv1.AddressTypeIPv4: endpoints(resolvers, discoveryv1.AddressTypeIPv4),
		discoveryv1.AddressTypeIPv6: endpoints(resolvers, discoveryv1.AddressTypeIPv6),
	}
	var out Refreshed
	var stale []*discoveryv1.EndpointSlice
	for i := range slices.Items {
		s := &slices.Items[i]
		if _, ok := s.Labels[contract.LabelElastiService]; !ok || s.DeletionTimestamp != nil {
			continue
		}
		eps := want[s.AddressType]
		switch {
		case len(eps) == 0:
			if owner := owningElastiService(s); owner != "" {
				out.Reconcile = append(out.Reconcile, types.NamespacedName{Namespace: s.Namespace, Name: owner})
			}
		case equality.Semantic.DeepEqual(s.Endpoints, eps):
			out.Current++
		default:
			// The list's items are this call's own; each gets endpoints of
			// its own, as the writes decode their answers into them at once.
			s.Endpoints = endpoints(resolvers, s.AddressType)
			stale = append(stale, s)
		}
	}

	var mu sync.Mutex
	work := make(chan *discoveryv1.EndpointSlice)
	var wg sync.WaitGroup
	for range max(1, min(workers, len(stale))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range work {
				err := w.Update(ctx, s)
				mu.Lock()
				if err != nil {
					out.Failed++
				} else {
					out.Updated++
				}
				mu.Unlock()
			}
		}()
	}
	for _, s := range stale {
		work <- s
	}
	close(work)
	wg.Wait()
	return out, ctx.Err()
}

// owningElastiService is the name of the ElastiService that controls s.
func owningElastiService(s *discoveryv1.EndpointSlice) string {
	for _, o := range s.OwnerReferences {
		if o.Kind == "ElastiService" && o.Controller != nil && *o.Controller {
			return o.Name
		}
	}
	return ""
}
