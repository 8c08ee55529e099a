package watches

import (
	"context"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/targets"
)

// Field indexes on ElastiServices that the mappers list by; the operator's
// setup registers them.
const (
	IndexService = "elasti.spec.service"
	IndexMode    = "elasti.status.mode"
)

// Mappers turn the events of the controller's watches into
// reconcile requests: each maps an object to the ElastiServices that must
// look at it again, through the field indexes on ElastiServices. They read
// the cache only, and never the reconciler's state.
type Mappers struct {
	// Client lists ElastiServices from the cache, by index.
	Client client.Reader
}

// ForService maps a Service to the ElastiServices that name it.
func (m Mappers) ForService(ctx context.Context, obj client.Object) []reconcile.Request {
	return m.byIndex(ctx, obj.GetNamespace(), IndexService, obj.GetName())
}

// ForRivals maps an ElastiService to the others that name its Service or
// its target, old spec and new (the handler maps both objects of an update).
func (m Mappers) ForRivals(ctx context.Context, obj client.Object) []reconcile.Request {
	es, ok := obj.(*elastiv1alpha1.ElastiService)
	if !ok {
		return nil
	}
	out := m.byIndex(ctx, es.Namespace, IndexService, es.Spec.Service)
	if keys := targets.IndexValues(es); len(keys) == 1 {
		out = append(out, m.byIndex(ctx, es.Namespace, targets.Index, keys[0])...)
	}
	self := client.ObjectKeyFromObject(es)
	kept := out[:0]
	for _, req := range out {
		if req.NamespacedName != self {
			kept = append(kept, req)
		}
	}
	return kept
}

// ForSlice maps one of Elasti's proxy slices to the ElastiService that
// owns it, and any other slice to the ElastiServices that name its Service.
func (m Mappers) ForSlice(ctx context.Context, obj client.Object) []reconcile.Request {
	if obj.GetLabels()[contract.LabelManagedBy] == contract.ManagedBy {
		var out []reconcile.Request
		for _, o := range obj.GetOwnerReferences() {
			if o.Kind == "ElastiService" {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: o.Name}})
			}
		}
		return out
	}
	svc := obj.GetLabels()[discoveryv1.LabelServiceName]
	if svc == "" {
		return nil
	}
	return m.byIndex(ctx, obj.GetNamespace(), IndexService, svc)
}

// ForResolverPod wakes up the ElastiServices whose proxy slice lists
// resolvers; those in serve mode look at resolvers when they next need them.
func (m Mappers) ForResolverPod(ctx context.Context, _ client.Object) []reconcile.Request {
	return m.byIndex(ctx, "", IndexMode, string(elastiv1alpha1.ModeProxy))
}

// ForTarget maps a target of one kind to the ElastiServices naming it.
func (m Mappers) ForTarget(gvk schema.GroupVersionKind) func(context.Context, *metav1.PartialObjectMetadata) []reconcile.Request {
	return func(ctx context.Context, obj *metav1.PartialObjectMetadata) []reconcile.Request {
		return m.byIndex(ctx, obj.GetNamespace(), targets.Index, targets.Key(gvk.Group, gvk.Kind, obj.GetName()))
	}
}

// byIndex lists, from the cache, the ElastiServices whose index has value,
// in namespace or, when it is empty, in all. A failed list is logged and
// maps to nothing: a map function cannot return an error.
func (m Mappers) byIndex(ctx context.Context, namespace, index, value string) []reconcile.Request {
	list := &elastiv1alpha1.ElastiServiceList{}
	opts := []client.ListOption{client.MatchingFields{index: value}}
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	if err := m.Client.List(ctx, list, opts...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "map an event to ElastiServices", "index", index, "value", value)
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}
