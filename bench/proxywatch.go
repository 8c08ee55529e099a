//go:build bench

package main

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/go-logr/logr"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
)

// proxyWatch counts, in one namespace, the ElastiServices in proxy mode
// with their one resolver port, and the proxy slices that list a ready
// resolver, from one watch of each. A LIST of 10,000 objects every second
// would itself load the API server whose answers the scale figures time.
type proxyWatch struct {
	mu      sync.Mutex
	proxied map[string]bool // ElastiService name
	ready   map[string]bool // proxy slice name
	// pods is the resolver pods each proxy slice lists, by slice name.
	pods map[string][]string
}

// watchProxy starts the watches, until ctx ends, and waits for their first
// list.
func watchProxy(ctx context.Context, ns string) (*proxyWatch, error) {
	// The cache logs through controller-runtime's logger, which warns with
	// a stack trace unless one is set; its errors reach the bench as its
	// sync's outcome.
	ctrllog.SetLogger(logr.Discard())
	c, err := cache.New(kube.REST, cache.Options{
		Scheme:            kube.Client.Scheme(),
		DefaultNamespaces: map[string]cache.Config{ns: {}},
		DefaultTransform:  cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&discoveryv1.EndpointSlice{}: {Label: labels.SelectorFromSet(labels.Set{contract.LabelManagedBy: contract.ManagedBy})},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", ns, err)
	}
	w := &proxyWatch{proxied: map[string]bool{}, ready: map[string]bool{}, pods: map[string][]string{}}
	for _, f := range []struct {
		obj client.Object
		set map[string]bool
		is  func(any) bool
	}{
		{&elastiv1alpha1.ElastiService{}, w.proxied, func(o any) bool {
			es, ok := o.(*elastiv1alpha1.ElastiService)
			return ok && es.Status.Mode == elastiv1alpha1.ModeProxy && len(es.Status.ProxyPorts) == 1
		}},
		{&discoveryv1.EndpointSlice{}, w.ready, func(o any) bool {
			s, ok := o.(*discoveryv1.EndpointSlice)
			return ok && readyCount([]discoveryv1.EndpointSlice{*s}) > 0
		}},
	} {
		inf, err := c.GetInformer(ctx, f.obj)
		if err != nil {
			return nil, err
		}
		set := func(o any) {
			m, ok := o.(client.Object)
			if !ok {
				return
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			if f.is(o) {
				f.set[m.GetName()] = true
			} else {
				delete(f.set, m.GetName())
			}
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    set,
			UpdateFunc: func(_, o any) { set(o) },
			DeleteFunc: forget(&w.mu, f.set),
		}); err != nil {
			return nil, err
		}
	}
	sliceInformer, err := c.GetInformer(ctx, &discoveryv1.EndpointSlice{})
	if err != nil {
		return nil, err
	}
	if _, err := sliceInformer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    w.setPods,
		UpdateFunc: func(_, o any) { w.setPods(o) },
		DeleteFunc: forget(&w.mu, w.pods),
	}); err != nil {
		return nil, err
	}
	go func() {
		if err := c.Start(ctx); err != nil {
			logf("watch %s: %v", ns, err)
		}
	}()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("watch %s: not synced", ns)
	}
	return w, nil
}

// counts returns how many ElastiServices are in proxy mode and how many
// proxy slices list a ready resolver.
func (w *proxyWatch) counts() (proxied, ready int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.proxied), len(w.ready)
}

// setPods records the resolver pods a proxy slice lists.
func (w *proxyWatch) setPods(o any) {
	s, ok := o.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	var pods []string
	for _, ep := range s.Endpoints {
		if ep.TargetRef != nil {
			pods = append(pods, ep.TargetRef.Name)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pods[s.Name] = pods
}

// listing returns how many proxy slices list the resolver pod.
func (w *proxyWatch) listing(pod string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, pods := range w.pods {
		if slices.Contains(pods, pod) {
			n++
		}
	}
	return n
}

// forget is an informer's delete handler that removes the object's name
// from m, under mu.
func forget[V any](mu *sync.Mutex, m map[string]V) func(any) {
	return func(o any) {
		if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = t.Obj
		}
		if obj, ok := o.(client.Object); ok {
			mu.Lock()
			delete(m, obj.GetName())
			mu.Unlock()
		}
	}
}
