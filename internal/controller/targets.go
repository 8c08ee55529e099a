package controller

import (
	"context"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/scaling"
)

// indexTarget indexes ElastiServices by "group/Kind/name" of their target.
const indexTarget = "elasti.spec.scaleTargetRef"

func targetKey(group, kind, name string) string { return group + "/" + kind + "/" + name }

func targetIndex(obj client.Object) []string {
	es, ok := obj.(*elastiv1alpha1.ElastiService)
	if !ok {
		return nil
	}
	gvk, err := scaling.TargetGVK(es.Spec.ScaleTargetRef)
	if err != nil {
		return nil
	}
	return []string{targetKey(gvk.Group, gvk.Kind, es.Spec.ScaleTargetRef.Name)}
}

// targetWatches starts one metadata-only watch per target kind, the first
// time a target of that kind is scaled. Targets can be any scalable kind, so
// the set of watches grows with what the ElastiServices name; metadata-only
// informers keep the cost to names and resource versions.
type targetWatches struct {
	cache cache.Cache
	ctrl  controller.Controller
	// enqueue maps a target to the ElastiServices that name it.
	enqueue func(gvk schema.GroupVersionKind) func(ctx context.Context, obj *metav1.PartialObjectMetadata) []reconcile.Request

	mu      sync.Mutex
	watched map[schema.GroupVersionKind]bool
}

func (t *targetWatches) ensure(gvk schema.GroupVersionKind) error {
	if t == nil || t.ctrl == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.watched[gvk] {
		return nil
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	src := source.Kind(t.cache, obj, handler.TypedEnqueueRequestsFromMapFunc(t.enqueue(gvk)))
	if err := t.ctrl.Watch(src); err != nil {
		return fmt.Errorf("watch %s targets: %w", gvk, err)
	}
	t.watched[gvk] = true
	return nil
}

// cached reports whether the target is in the metadata cache. It answers
// only for kinds already watched (false otherwise), so it never starts an
// informer as a side effect.
func (t *targetWatches) cached(ctx context.Context, namespace string, ref elastiv1alpha1.ScaleTargetRef) bool {
	if t == nil || t.cache == nil {
		return false
	}
	gvk, err := scaling.TargetGVK(ref)
	if err != nil {
		return false
	}
	t.mu.Lock()
	watched := t.watched[gvk]
	t.mu.Unlock()
	if !watched {
		return false
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	return t.cache.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, obj) == nil
}
