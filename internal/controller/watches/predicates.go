package watches

import (
	"reflect"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/proxyslices"
)

// ElastiServiceChanged lets through what the reconciler must act on: spec
// changes, annotations (wake-now, keep-awake), deletion and finalizers, but
// not the operator's own status writes.
func ElastiServiceChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld, e.ObjectNew
		return o.GetGeneration() != n.GetGeneration() ||
			!reflect.DeepEqual(o.GetAnnotations(), n.GetAnnotations()) ||
			!reflect.DeepEqual(o.GetFinalizers(), n.GetFinalizers()) ||
			!o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp())
	}}
}

// ServiceSpecChanged passes changes of what the cache keeps of a Service
// (trimService): its ports and its shape.
func ServiceSpecChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Service)
		n, ok2 := e.ObjectNew.(*corev1.Service)
		return !ok1 || !ok2 || !reflect.DeepEqual(o.Spec, n.Spec)
	}}
}

// ClaimChanged passes what can change which ElastiService wins a Service
// or a target: creation, deletion and a changed spec.
func ClaimChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
			!e.ObjectOld.GetDeletionTimestamp().Equal(e.ObjectNew.GetDeletionTimestamp())
	}}
}

// SliceReadinessChanged passes changes to Elasti's proxy slices other than
// their endpoints, and changes of "has a ready endpoint" for the Services'
// own slices. A proxy slice's endpoints are the resolvers, which the slice
// refresher rewrites in one pass when they change (docs/architecture.md,
// "When the resolvers change"): a reconcile of every sleeping
// ElastiService for each of its writes is what that pass avoids.
func SliceReadinessChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*discoveryv1.EndpointSlice)
		n, ok2 := e.ObjectNew.(*discoveryv1.EndpointSlice)
		if !ok1 || !ok2 {
			return true
		}
		if n.Labels[contract.LabelManagedBy] == contract.ManagedBy {
			return o.AddressType != n.AddressType || !reflect.DeepEqual(o.Ports, n.Ports) ||
				!reflect.DeepEqual(o.Labels, n.Labels) || !reflect.DeepEqual(o.OwnerReferences, n.OwnerReferences) ||
				(o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil)
		}
		return (len(o.Endpoints) > 0) != (len(n.Endpoints) > 0)
	}}
}

// ResolverPodChanged passes changes of readiness, addresses or deletion.
func ResolverPodChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Pod)
		n, ok2 := e.ObjectNew.(*corev1.Pod)
		if !ok1 || !ok2 {
			return true
		}
		return proxyslices.PodReady(o) != proxyslices.PodReady(n) || !reflect.DeepEqual(o.Status.PodIPs, n.Status.PodIPs) ||
			o.Status.PodIP != n.Status.PodIP || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil)
	}}
}
