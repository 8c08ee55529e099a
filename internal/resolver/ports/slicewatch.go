package ports

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/resolver/endpoints"
)

// sliceWatches hands the Endpoints tracker the EndpointSlices of exactly the
// Services the PortMap has a port of, claimed or lingering, from one watch
// of every Service's own slices in the namespaces the resolver follows (the
// sliceSource). A Service gets a Feed when its first port is mapped and
// loses it when it has no port left, lingering ones included, so the
// tracker holds the endpoints of the Services the resolver may forward to
// and of no other; the watch's store keeps, for every other Service, only
// the few fields summarizeSlice leaves. The cost of one more mapped Service
// is its entry in the tracker: no informer, goroutine or API call of its
// own (docs/architecture.md, "Cost per ElastiService").
//
// Until the watch has delivered its first full list no feed is synced, so
// forwarding never starts on a partial view, and held requests are released
// by the event that completes the list or by the first ready endpoint after
// it. A feed started later is filled from the watch's store and is synced
// at once.
type sliceWatches struct {
	ports     *PortMap
	endpoints *endpoints.Endpoints
	source    sliceSource

	mu      sync.Mutex
	running map[types.NamespacedName]endpoints.Feed
	synced  bool
}

// sliceSource is the one watch of Services' own slices: an informer in
// production (informSlices), a stand-in in tests.
type sliceSource interface {
	// Slices returns the slices of svc in the watch's store now. The
	// caller must not modify them.
	Slices(svc types.NamespacedName) []*discoveryv1.EndpointSlice
	// Synced is done once the watch's first full list has been delivered
	// to the handler that sliceWatches.handler returns.
	Synced() toolscache.DoneChecker
}

func newSliceWatches(ports *PortMap, eps *endpoints.Endpoints, source sliceSource) *sliceWatches {
	return &sliceWatches{ports: ports, endpoints: eps, source: source, running: map[types.NamespacedName]endpoints.Feed{}}
}

// handler is the watch's event handler: each event goes to the feed of the
// slice's Service, if it has one. A slice relabelled to another Service
// leaves its old one.
func (w *sliceWatches) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.update(nil, obj) },
		UpdateFunc: w.update,
		DeleteFunc: func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
				w.remove(s)
			}
		},
	}
}

func (w *sliceWatches) update(old, obj any) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	if o, ok := old.(*discoveryv1.EndpointSlice); ok && serviceKey(o) != serviceKey(s) {
		w.remove(o)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if f, ok := w.running[serviceKey(s)]; ok {
		f.Update(s)
	}
}

func (w *sliceWatches) remove(s *discoveryv1.EndpointSlice) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if f, ok := w.running[serviceKey(s)]; ok {
		f.Delete(s.Namespace, s.Name)
	}
}

// run keeps the feeds in step with the PortMap until ctx ends, then stops
// them all. It wakes on PortMap changes (ends of lingers included) and on
// the watch's first full list, never on a timer of its own.
func (w *sliceWatches) run(ctx context.Context) {
	synced := w.source.Synced().Done()
	for {
		want, changed := w.ports.Services()
		w.reconcile(ctx, want)
		select {
		case <-changed:
		case <-synced:
			synced = nil
			w.markSynced()
		case <-ctx.Done():
			w.reconcile(ctx, nil)
			return
		}
	}
}

// reconcile starts the feeds of the Services in want that have none, filled
// from the watch's store, and stops those of the Services no longer in it.
func (w *sliceWatches) reconcile(ctx context.Context, want map[types.NamespacedName]struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for svc, f := range w.running {
		if _, ok := want[svc]; !ok {
			f.Stop()
			delete(w.running, svc)
		}
	}
	if ctx.Err() != nil {
		return
	}
	for svc := range want {
		if _, ok := w.running[svc]; ok {
			continue
		}
		f := w.endpoints.StartFeed(svc)
		w.running[svc] = f
		if w.synced {
			w.fillLocked(svc, f)
		}
	}
}

// fillLocked gives a feed the slices in the watch's store and reports it
// synced. Events delivered meanwhile wait for w.mu and then find the feed;
// a slice already in the store is read here and again by its event, which
// says the same or newer.
func (w *sliceWatches) fillLocked(svc types.NamespacedName, f endpoints.Feed) {
	for _, s := range w.source.Slices(svc) {
		f.Update(s)
	}
	f.Synced()
}

// markSynced fills every feed once the watch has delivered its first full
// list: a feed started before then has seen only the events after its
// start, and the store is complete only now.
func (w *sliceWatches) markSynced() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.synced = true
	for svc, f := range w.running {
		w.fillLocked(svc, f)
	}
}

// watching returns the Services whose slices are followed now; for tests.
func (w *sliceWatches) watching() map[types.NamespacedName]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[types.NamespacedName]bool{}
	for svc := range w.running {
		out[svc] = true
	}
	return out
}

// serviceKey names the Service a slice belongs to by its
// kubernetes.io/service-name label; the empty name for none.
func serviceKey(s *discoveryv1.EndpointSlice) types.NamespacedName {
	return types.NamespacedName{Namespace: s.Namespace, Name: s.Labels[discoveryv1.LabelServiceName]}
}

// ownSlices selects, server-side, the slices that Kubernetes' own
// controllers wrote: the only ones the Endpoints tracker uses (it checks
// again), and never Elasti's proxy slices, which point at the resolvers
// themselves.
func ownSlices() labels.Selector {
	writers, err := labels.NewRequirement(contract.LabelManagedBy, selection.In, endpoints.TrustedWriters())
	if err != nil {
		panic(err) // constant, valid label values
	}
	return labels.NewSelector().Add(*writers)
}

// summarizeSlice is the watch's transform: it keeps of a slice only what
// the Endpoints tracker reads (its Service, its writer, address type,
// ports, and each endpoint's first address, conditions and Pod reference),
// so that the store's cost for a Service nobody maps is a few hundred bytes.
func summarizeSlice(obj any) (any, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return obj, nil
	}
	out := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       s.Namespace,
			Name:            s.Name,
			ResourceVersion: s.ResourceVersion,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: s.Labels[discoveryv1.LabelServiceName],
				contract.LabelManagedBy:      s.Labels[contract.LabelManagedBy],
			},
		},
		AddressType: s.AddressType,
		Ports:       s.Ports,
	}
	if len(s.Endpoints) > 0 {
		out.Endpoints = make([]discoveryv1.Endpoint, 0, len(s.Endpoints))
	}
	for _, ep := range s.Endpoints {
		e := discoveryv1.Endpoint{Conditions: ep.Conditions}
		if len(ep.Addresses) > 0 {
			e.Addresses = ep.Addresses[:1:1]
		}
		if r := ep.TargetRef; r != nil {
			e.TargetRef = &corev1.ObjectReference{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
		}
		out.Endpoints = append(out.Endpoints, e)
	}
	return out, nil
}
