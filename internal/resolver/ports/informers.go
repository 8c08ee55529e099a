package ports

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	discoveryv1client "k8s.io/client-go/kubernetes/typed/discovery/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/resolver/endpoints"
)

// WatchOptions configure Watch.
type WatchOptions struct {
	// Namespaces limits the ElastiServices the resolver follows, and so the
	// Services it serves, to these namespaces; empty means every
	// namespace. It must equal the operator's --watch-namespaces: the
	// operator allocates ports only among the ElastiServices it watches, so
	// a resolver that saw another install's claims on the same port range
	// would take them for conflicts.
	Namespaces []string
	Log        logr.Logger
}

// Watch starts the informers that feed ports and endpoints, until ctx ends:
//   - one on ElastiServices (status.mode, status.proxyPorts, spec.proxy,
//     the FallbackActive condition, status.wakeProgress), in
//     opts.Namespaces or all namespaces, into ports. Every add and update
//     is handed on whole, status-only ones included: a wake's progress
//     reaches the waking page without a change to the spec;
//   - one per Service ports has a port of, on that Service's own
//     EndpointSlices, into eps (sliceWatches, slicewatch.go).
//
// Every watch is event-driven and scoped server-side; the resolver needs
// only get/list/watch on these two resources, in the namespaces it watches.
//
// The returned synced reports true once the ElastiService informer has
// delivered its initial list to ports: the resolver's readiness. A
// Service's slices are waited for per Service, by the requests that need
// them (endpoints.Endpoints).
func Watch(ctx context.Context, cfg *rest.Config, ports *PortMap, eps *endpoints.Endpoints, opts WatchOptions) (synced func() bool, err error) {
	scheme := runtime.NewScheme()
	if err := elastiv1alpha1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("register elasti.dev/v1alpha1: %w", err)
	}
	// One HTTP client, so that every informer shares its connections to the
	// API server.
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("build API server HTTP client: %w", err)
	}
	// A static REST mapping: no discovery round-trips, and start-up does
	// not fail when the API server is briefly unreachable (the informers
	// retry on their own and readiness waits for them).
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(elastiv1alpha1.GroupVersion.WithKind("ElastiService"), meta.RESTScopeNamespace)
	cacheOpts := cache.Options{
		HTTPClient:       httpClient,
		Scheme:           scheme,
		Mapper:           mapper,
		DefaultTransform: cache.TransformStripManagedFields(),
	}
	if len(opts.Namespaces) > 0 {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range opts.Namespaces {
			cacheOpts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	c, err := cache.New(cfg, cacheOpts)
	if err != nil {
		return nil, fmt.Errorf("build informer cache: %w", err)
	}
	// Each Service's watch starts with a request or two, and after a restart
	// every Service in proxy mode starts at once. A client-side rate limit
	// (ctrl.GetConfig's is 20 per second) would leave the last of a thousand
	// Services unforwardable for more than a minute; the requests are small
	// and label-selected, and the API server's priority and fairness is the
	// limit that knows its load.
	slicesCfg := rest.CopyConfig(cfg)
	slicesCfg.QPS, slicesCfg.RateLimiter = -1, nil
	slicesClient, err := discoveryv1client.NewForConfigAndClient(slicesCfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("build EndpointSlice client: %w", err)
	}

	esInformer, err := c.GetInformer(ctx, &elastiv1alpha1.ElastiService{})
	if err != nil {
		return nil, fmt.Errorf("ElastiService informer: %w", err)
	}
	esReg, err := esInformer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { setElastiService(ports, obj) },
		UpdateFunc: func(_, obj any) { setElastiService(ports, obj) },
		DeleteFunc: func(obj any) {
			if key, ok := deletedKey(obj); ok {
				ports.Delete(key)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("ElastiService event handler: %w", err)
	}

	go newSliceWatches(ports, eps, informSlices(slicesClient, opts.Log)).run(ctx)
	go func() {
		if err := c.Start(ctx); err != nil {
			opts.Log.Error(err, "informers stopped")
		}
	}()
	return esReg.HasSynced, nil
}

func setElastiService(ports *PortMap, obj any) {
	if es, ok := obj.(*elastiv1alpha1.ElastiService); ok {
		ports.Set(es)
	}
}

// deletedKey names a deleted object, including one the informer only knows
// as a tombstone.
func deletedKey(obj any) (types.NamespacedName, bool) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	o, ok := obj.(client.Object)
	if !ok {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}, true
}
