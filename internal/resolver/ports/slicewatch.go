package ports

import (
	"context"
	"sync"

	"github.com/go-logr/logr"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	discoveryv1client "k8s.io/client-go/kubernetes/typed/discovery/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/resolver/endpoints"
)

// sliceWatches follows the EndpointSlices of exactly the Services the
// PortMap has a port of, claimed or lingering: one informer per such
// Service, scoped server-side to the Service's namespace and to its own
// slices (kubernetes.io/service-name=<service>, not managed by elasti.dev).
// An informer starts when the Service's first port is mapped and stops when
// the Service has no port left, lingering ones included, so the resolver
// holds the slices of the Services it may forward to and of no other.
//
// Each informer feeds Endpoints through a Feed of its own:
// until the informer has delivered its first full list the Service has no
// ready endpoint, so forwarding never starts on a partial view, and held
// requests are released by the event that completes the list or by the
// first ready endpoint after it.
type sliceWatches struct {
	ports     *PortMap
	endpoints *endpoints.Endpoints
	// start runs one informer of svc's own slices into f until ctx ends:
	// informSlices in production, a stand-in in tests.
	start func(ctx context.Context, svc types.NamespacedName, f endpoints.Feed)

	mu      sync.Mutex
	running map[types.NamespacedName]runningWatch
}

type runningWatch struct {
	stop context.CancelFunc
	feed endpoints.Feed
}

func newSliceWatches(ports *PortMap, eps *endpoints.Endpoints, start func(context.Context, types.NamespacedName, endpoints.Feed)) *sliceWatches {
	return &sliceWatches{ports: ports, endpoints: eps, start: start, running: map[types.NamespacedName]runningWatch{}}
}

// run keeps the informers in step with the PortMap until ctx ends, then
// stops them all. It wakes on PortMap changes (ends of lingers included),
// never on a timer of its own.
func (w *sliceWatches) run(ctx context.Context) {
	for {
		want, changed := w.ports.Services()
		w.reconcile(ctx, want)
		select {
		case <-changed:
		case <-ctx.Done():
			w.reconcile(ctx, nil)
			return
		}
	}
}

// reconcile starts the informers of the Services in want that have none and
// stops those of the Services no longer in it.
func (w *sliceWatches) reconcile(ctx context.Context, want map[types.NamespacedName]struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for svc, rw := range w.running {
		if _, ok := want[svc]; !ok {
			rw.stop()
			rw.feed.Stop()
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
		watchCtx, stop := context.WithCancel(ctx)
		w.running[svc] = runningWatch{stop: stop, feed: f}
		w.start(watchCtx, svc, f)
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

// ownSlices selects a Service's own EndpointSlices: those of the
// EndpointSlice controller or any manager but Elasti, whose proxy slices
// point at the resolvers themselves.
func ownSlices(svc string) (labels.Selector, error) {
	name, err := labels.NewRequirement(discoveryv1.LabelServiceName, selection.Equals, []string{svc})
	if err != nil {
		return nil, err
	}
	notElasti, err := labels.NewRequirement(contract.LabelManagedBy, selection.NotEquals, []string{contract.ManagedBy})
	if err != nil {
		return nil, err
	}
	return labels.NewSelector().Add(*name, *notElasti), nil
}

// informSlices returns the production start function of sliceWatches: an
// informer on client of the Service's own slices in its namespace, whose
// events go to the feed, and which reports the feed synced once the first
// list has been delivered (an event, not a poll).
func informSlices(client discoveryv1client.EndpointSlicesGetter, log logr.Logger) func(context.Context, types.NamespacedName, endpoints.Feed) {
	return func(ctx context.Context, svc types.NamespacedName, f endpoints.Feed) {
		log := log.WithValues("service", svc.String())
		sel, err := ownSlices(svc.Name)
		if err != nil {
			// A Service name the API accepted is always a valid label
			// value; the Service stays without endpoints if not.
			log.Error(err, "cannot select the Service's EndpointSlices")
			return
		}
		slices := client.EndpointSlices(svc.Namespace)
		lw := &toolscache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				o.LabelSelector = sel.String()
				return slices.List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				o.LabelSelector = sel.String()
				return slices.Watch(ctx, o)
			},
		}
		inf := toolscache.NewSharedIndexInformer(lw, &discoveryv1.EndpointSlice{}, 0, toolscache.Indexers{})
		if err := inf.SetTransform(cache.TransformStripManagedFields()); err != nil {
			log.Error(err, "EndpointSlice informer transform")
		}
		reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { updateSlice(f, obj) },
			UpdateFunc: func(_, obj any) { updateSlice(f, obj) },
			DeleteFunc: func(obj any) {
				if key, ok := deletedKey(obj); ok {
					f.Delete(key.Namespace, key.Name)
				}
			},
		})
		if err != nil {
			log.Error(err, "EndpointSlice event handler")
			return
		}
		go inf.RunWithContext(ctx)
		go func() {
			select {
			case <-reg.HasSyncedChecker().Done():
				f.Synced()
			case <-ctx.Done():
			}
		}()
		log.V(1).Info("following the Service's EndpointSlices")
	}
}

func updateSlice(f endpoints.Feed, obj any) {
	if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
		f.Update(s)
	}
}
