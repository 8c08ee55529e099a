package targets

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/scaling"
)

// Watches starts one metadata-only watch per target kind, the first
// time a target of that kind is scaled. Targets can be any scalable kind, so
// the set of watches grows with what the ElastiServices name; metadata-only
// informers keep the cost to names and resource versions. Nothing here ever
// waits for an informer to sync: one that cannot (the operator may not list
// or watch the kind) must not stall a reconcile.
type Watches struct {
	// Cache holds the metadata-only informers.
	Cache cache.Cache
	// Controller is the ElastiService controller the watches feed. Without
	// it nothing is watched (Ensure does nothing).
	Controller controller.Controller
	// Enqueue maps a target of a kind to the ElastiServices that name it.
	Enqueue func(gvk schema.GroupVersionKind) func(ctx context.Context, obj *metav1.PartialObjectMetadata) []reconcile.Request
	// Live lists a kind whose watch has not synced, to learn why.
	Live client.Reader
	// Clock times how long a watch has had to sync.
	Clock clock.Clock
	// Namespaced: the cache watches only some namespaces, so a list in the
	// target's namespace is what its informer does.
	Namespaced bool

	mu sync.Mutex
	// watched records when each kind's watch started.
	watched map[schema.GroupVersionKind]time.Time
}

// The Ready reasons Problem returns.
const (
	// ReasonWatchForbidden: the operator may not list or watch the
	// target's kind.
	ReasonWatchForbidden = "TargetWatchForbidden"
	// ReasonWatchNotSynced: the target kind's watch does not sync for
	// another reason.
	ReasonWatchNotSynced = "TargetWatchNotSynced"
)

// SyncTimeout is how long a target kind's watch may take to sync before
// the status reports it.
const SyncTimeout = 30 * time.Second

// Ensure starts the watch of gvk's targets, once per kind.
func (t *Watches) Ensure(gvk schema.GroupVersionKind) error {
	if t == nil || t.Controller == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.watched[gvk]; ok {
		return nil
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	src := source.Kind(t.Cache, obj, handler.TypedEnqueueRequestsFromMapFunc(t.Enqueue(gvk)))
	if err := t.Controller.Watch(src); err != nil {
		return fmt.Errorf("watch %s targets: %w", gvk, err)
	}
	if t.watched == nil {
		t.watched = map[schema.GroupVersionKind]time.Time{}
	}
	t.watched[gvk] = t.Clock.Now()
	return nil
}

// synced reports whether the kind is watched and its informer has synced,
// without waiting for it.
func (t *Watches) synced(ctx context.Context, gvk schema.GroupVersionKind) (watched, synced bool) {
	if t == nil || t.Cache == nil {
		return false, false
	}
	t.mu.Lock()
	_, watched = t.watched[gvk]
	t.mu.Unlock()
	if !watched {
		return false, false
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	inf, err := t.Cache.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
	return true, err == nil && inf.HasSynced()
}

// Cached reports whether the target is in the metadata cache. It answers
// only for kinds already watched and synced (false otherwise), so it never
// starts an informer as a side effect and never waits for one: the caller
// reads /scale instead.
func (t *Watches) Cached(ctx context.Context, namespace string, ref elastiv1alpha1.ScaleTargetRef) bool {
	gvk, err := scaling.TargetGVK(ref)
	if err != nil {
		return false
	}
	if _, synced := t.synced(ctx, gvk); !synced {
		return false
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	return t.Cache.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, obj) == nil
}

// Problem says why a watched kind's informer has not synced, as a Ready
// reason and message; empty while it syncs normally or once it has. The
// API server is asked only while the informer has not synced: a list the
// operator may not make is reported at once, any other failure once the
// watch has had SyncTimeout to sync.
func (t *Watches) Problem(ctx context.Context, namespace string, gvk schema.GroupVersionKind) (reason, message string) {
	watched, synced := t.synced(ctx, gvk)
	if !watched || synced || t.Live == nil {
		return "", ""
	}
	kind := gvk.Kind
	if gvk.Group != "" {
		kind += "." + gvk.Group
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	opts := []client.ListOption{client.Limit(1)}
	if t.Namespaced {
		opts = append(opts, client.InNamespace(namespace))
	}
	err := t.Live.List(ctx, list, opts...)
	switch {
	case apierrors.IsForbidden(err):
		return ReasonWatchForbidden, fmt.Sprintf("the operator may not list and watch %s, so it cannot watch its targets: %v; grant it get, list and watch on that kind", kind, err)
	case err != nil:
		return ReasonWatchNotSynced, fmt.Sprintf("the watch of %s has not synced: list %s: %v", kind, kind, err)
	}
	t.mu.Lock()
	since := t.watched[gvk]
	t.mu.Unlock()
	if t.Clock.Since(since) >= SyncTimeout {
		return ReasonWatchNotSynced, fmt.Sprintf("the watch of %s has not synced after %s; look for its errors in the operator's log", kind, SyncTimeout)
	}
	return "", ""
}

// ResourceVersion returns the target's resourceVersion from the metadata
// cache, or "" when its kind is not watched and synced or it is not there.
func (t *Watches) ResourceVersion(ctx context.Context, namespace string, ref elastiv1alpha1.ScaleTargetRef) string {
	gvk, err := scaling.TargetGVK(ref)
	if err != nil {
		return ""
	}
	if _, synced := t.synced(ctx, gvk); !synced {
		return ""
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	if err := t.Cache.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, obj); err != nil {
		return ""
	}
	return obj.GetResourceVersion()
}
