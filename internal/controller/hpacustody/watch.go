package hpacustody

import (
	"context"
	"reflect"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
)

// IndexHPA is the cache index of ElastiServices by the name of the HPA they
// name (Index computes it), so that Map finds them in one lookup.
const IndexHPA = "elasti.spec.autoscaler.hpa"

// Index returns the HPA obj names, for the index IndexHPA.
func Index(obj client.Object) []string {
	es, ok := obj.(*elastiv1alpha1.ElastiService)
	if !ok {
		return nil
	}
	if name := Named(es); name != "" {
		return []string{name}
	}
	return nil
}

// Map maps an HPA to the ElastiServices that name it, and to the one that
// holds it (which may name another since). It reads the ElastiServices
// from the cache, through IndexHPA.
func (c *Custody) Map(ctx context.Context, obj client.Object) []reconcile.Request {
	list := &elastiv1alpha1.ElastiServiceList{}
	if err := c.Cache.List(ctx, list, client.InNamespace(obj.GetNamespace()), client.MatchingFields{IndexHPA: obj.GetName()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "map an event to ElastiServices", "index", IndexHPA, "value", obj.GetName())
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	if _, held := obj.GetAnnotations()[contract.AnnotationHPAMinReplicas]; held {
		if name := obj.GetAnnotations()[contract.AnnotationHPACustodian]; name != "" {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}})
		}
	}
	return out
}

// Changed passes what custody and the idle decision read: the floor, the
// annotations, the metrics and the target in the spec, and a change of what
// the readings say (not every new reading).
func Changed() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*autoscalingv2.HorizontalPodAutoscaler)
		n, ok2 := e.ObjectNew.(*autoscalingv2.HorizontalPodAutoscaler)
		if !ok1 || !ok2 {
			return true
		}
		for _, k := range []string{contract.AnnotationHPAMinReplicas, contract.AnnotationHPACustodian} {
			if o.Annotations[k] != n.Annotations[k] {
				return true
			}
		}
		return ptr.Deref(o.Spec.MinReplicas, 1) != ptr.Deref(n.Spec.MinReplicas, 1) ||
			o.Spec.ScaleTargetRef != n.Spec.ScaleTargetRef ||
			!reflect.DeepEqual(o.Spec.Metrics, n.Spec.Metrics) ||
			MetricsVerdict(o, time.Now(), time.Time{}).State != MetricsVerdict(n, time.Now(), time.Time{}).State
	}}
}
