package ports

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
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

// Watch starts the two informers that feed ports and endpoints, until ctx
// ends, in opts.Namespaces or all namespaces:
//   - one on ElastiServices (status.mode, status.proxyPorts, spec.proxy,
//     the FallbackActive condition, status.wakeProgress), into ports. Every
//     add and update is handed on whole, status-only ones included: a
//     wake's progress reaches the waking page without a change to the spec;
//   - one on the EndpointSlices Kubernetes' own controllers write, selected
//     server-side by their managed-by label and cut down to what the
//     endpoints tracker reads, into eps for the Services ports has a port
//     of (sliceWatches, slicewatch.go).
//
// Two watches whatever the number of ElastiServices: a resolver's start
// costs the API server two LISTs per namespace followed, not one per
// Service. The resolver needs only get/list/watch on these two resources,
// in the namespaces it watches.
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
	if err := discoveryv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("register discovery.k8s.io/v1: %w", err)
	}
	// A static REST mapping: no discovery round-trips, and start-up does
	// not fail when the API server is briefly unreachable (the informers
	// retry on their own and readiness waits for them).
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(elastiv1alpha1.GroupVersion.WithKind("ElastiService"), meta.RESTScopeNamespace)
	mapper.Add(discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice"), meta.RESTScopeNamespace)
	// A cache of several namespaces asks the mapper about the list's own
	// kind when it is read (informedSlices.Slices).
	mapper.Add(discoveryv1.SchemeGroupVersion.WithKind("EndpointSliceList"), meta.RESTScopeNamespace)
	cacheOpts := cache.Options{
		Scheme:           scheme,
		Mapper:           mapper,
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&discoveryv1.EndpointSlice{}:    {Label: ownSlices(), Transform: summarizeSlice},
			&elastiv1alpha1.ElastiService{}: {Transform: trimElastiService},
		},
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

	src, err := informSlices(ctx, c, opts.Log)
	if err != nil {
		return nil, err
	}
	w := newSliceWatches(ports, eps, src)
	if src.reg, err = src.informer.AddEventHandler(w.handler()); err != nil {
		return nil, fmt.Errorf("EndpointSlice event handler: %w", err)
	}
	go w.run(ctx)
	go func() {
		if err := c.Start(ctx); err != nil {
			opts.Log.Error(err, "informers stopped")
		}
	}()
	return esReg.HasSynced, nil
}

// sliceIndex indexes the slice watch's store by "namespace/service".
const sliceIndex = "elasti.dev/service"

// informedSlices is the production sliceSource: the cache's EndpointSlice
// informer and its index by Service.
type informedSlices struct {
	log      logr.Logger
	cache    cache.Cache
	informer cache.Informer
	reg      toolscache.ResourceEventHandlerRegistration
}

func informSlices(ctx context.Context, c cache.Cache, log logr.Logger) (*informedSlices, error) {
	err := c.IndexField(ctx, &discoveryv1.EndpointSlice{}, sliceIndex, func(o client.Object) []string {
		s, ok := o.(*discoveryv1.EndpointSlice)
		if !ok || s.Labels[discoveryv1.LabelServiceName] == "" {
			return nil
		}
		return []string{serviceKey(s).String()}
	})
	if err != nil {
		return nil, fmt.Errorf("index EndpointSlices by Service: %w", err)
	}
	inf, err := c.GetInformer(ctx, &discoveryv1.EndpointSlice{})
	if err != nil {
		return nil, fmt.Errorf("EndpointSlice informer: %w", err)
	}
	return &informedSlices{log: log, cache: c, informer: inf}, nil
}

func (s *informedSlices) Slices(svc types.NamespacedName) []*discoveryv1.EndpointSlice {
	var list discoveryv1.EndpointSliceList
	// The cache answers from memory; UnsafeDisableDeepCopy because nothing
	// here modifies what it returns.
	err := s.cache.List(context.Background(), &list, client.InNamespace(svc.Namespace),
		client.MatchingFields{sliceIndex: svc.String()}, client.UnsafeDisableDeepCopy)
	if err != nil {
		// Only before the informer runs, or for a namespace not
		// followed (the ElastiService informer does not see those):
		// events fill the feed.
		s.log.Error(err, "read a Service's EndpointSlices from the cache", "service", svc.String())
		return nil
	}
	out := make([]*discoveryv1.EndpointSlice, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out
}

func (s *informedSlices) Synced() toolscache.DoneChecker { return s.reg.HasSyncedChecker() }

// trimElastiService is the ElastiService informer's transform: it keeps
// what the resolver reads (route.TargetsOf, route.OperatorSaysFallback and
// the waking page's progress) and drops the rest (annotations such as
// kubectl's last-applied configuration, triggers, the scale target, the
// other conditions), which would otherwise be most of the store's memory
// per ElastiService (docs/architecture.md, "Cost per ElastiService").
func trimElastiService(obj any) (any, error) {
	es, ok := obj.(*elastiv1alpha1.ElastiService)
	if !ok {
		return obj, nil // a tombstone: the informer's key is all it needs
	}
	out := &elastiv1alpha1.ElastiService{
		TypeMeta: es.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: es.Name, Namespace: es.Namespace, UID: es.UID,
			ResourceVersion: es.ResourceVersion, DeletionTimestamp: es.DeletionTimestamp,
		},
		Spec: elastiv1alpha1.ElastiServiceSpec{Service: es.Spec.Service, Proxy: es.Spec.Proxy},
		Status: elastiv1alpha1.ElastiServiceStatus{
			Mode: es.Status.Mode, ProxyPorts: es.Status.ProxyPorts, WakeProgress: es.Status.WakeProgress,
		},
	}
	if c := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionFallbackActive); c != nil {
		out.Status.Conditions = []metav1.Condition{{Type: c.Type, Status: c.Status}}
	}
	return out, nil
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
