package resolver

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
)

// Watch starts the resolver's two informers and feeds them into ports and
// endpoints: ElastiServices (for status.proxyPorts and spec.proxy) and
// EndpointSlices that belong to a Service and are not Elasti's own proxy
// slices. Both watches are event-driven and scoped server-side by label; the
// resolver needs only get/list/watch on these two resources.
//
// The returned synced reports true once both informers have delivered their
// initial lists to the handlers. The informers run until ctx ends.
func Watch(ctx context.Context, cfg *rest.Config, ports *PortMap, endpoints *Endpoints, log logr.Logger) (synced func() bool, err error) {
	scheme := runtime.NewScheme()
	if err := discoveryv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("register discovery/v1: %w", err)
	}
	if err := elastiv1alpha1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("register elasti.dev/v1alpha1: %w", err)
	}
	hasService, err := labels.NewRequirement(discoveryv1.LabelServiceName, selection.Exists, nil)
	if err != nil {
		return nil, fmt.Errorf("build EndpointSlice selector: %w", err)
	}
	notElasti, err := labels.NewRequirement(contract.LabelManagedBy, selection.NotEquals, []string{contract.ManagedBy})
	if err != nil {
		return nil, fmt.Errorf("build EndpointSlice selector: %w", err)
	}
	// A static REST mapping for the two kinds: no discovery round-trips, and
	// start-up does not fail when the API server is briefly unreachable (the
	// informers retry on their own and readiness waits for them).
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice"), meta.RESTScopeNamespace)
	mapper.Add(elastiv1alpha1.GroupVersion.WithKind("ElastiService"), meta.RESTScopeNamespace)
	c, err := cache.New(cfg, cache.Options{
		Scheme:           scheme,
		Mapper:           mapper,
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&discoveryv1.EndpointSlice{}: {Label: labels.NewSelector().Add(*hasService, *notElasti)},
		},
	})
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

	sliceInformer, err := c.GetInformer(ctx, &discoveryv1.EndpointSlice{})
	if err != nil {
		return nil, fmt.Errorf("EndpointSlice informer: %w", err)
	}
	sliceReg, err := sliceInformer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { updateSlice(endpoints, obj) },
		UpdateFunc: func(_, obj any) { updateSlice(endpoints, obj) },
		DeleteFunc: func(obj any) {
			if key, ok := deletedKey(obj); ok {
				endpoints.Delete(key.Namespace, key.Name)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("EndpointSlice event handler: %w", err)
	}

	go func() {
		if err := c.Start(ctx); err != nil {
			log.Error(err, "informers stopped")
		}
	}()
	return func() bool { return esReg.HasSynced() && sliceReg.HasSynced() }, nil
}

func setElastiService(ports *PortMap, obj any) {
	if es, ok := obj.(*elastiv1alpha1.ElastiService); ok {
		ports.Set(es)
	}
}

func updateSlice(endpoints *Endpoints, obj any) {
	if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
		endpoints.Update(s)
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
