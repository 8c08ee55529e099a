package watches

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/proxyslices"
)

// CacheOptions keeps the manager's caches to what the reconciler reads:
// resolver pods only in their namespace and by label; EndpointSlices that
// belong to a Service, trimmed to what readiness needs; Services trimmed to
// their ports. watchNamespaces, when not empty, are the only namespaces
// watched.
func CacheOptions(resolverNamespace string, watchNamespaces []string) cache.Options {
	hasServiceName, _ := labels.NewRequirement(discoveryv1.LabelServiceName, selection.Exists, nil)
	opts := cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {
				Namespaces: map[string]cache.Config{resolverNamespace: {}},
				Label:      labels.SelectorFromSet(labels.Set{contract.LabelComponent: contract.ComponentResolver}),
				Transform:  trimPod,
			},
			&discoveryv1.EndpointSlice{}: {
				Label:     labels.NewSelector().Add(*hasServiceName),
				Transform: trimEndpointSlice,
			},
			&corev1.Service{}: {Transform: trimService},
		},
	}
	if len(watchNamespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range watchNamespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}

// trimPod keeps what readiness and the proxy slice need.
func trimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	var ready []corev1.PodCondition
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			ready = append(ready, corev1.PodCondition{Type: c.Type, Status: c.Status})
		}
	}
	return &corev1.Pod{
		TypeMeta:   p.TypeMeta,
		ObjectMeta: trimMeta(p.ObjectMeta),
		Spec:       corev1.PodSpec{NodeName: p.Spec.NodeName},
		Status:     corev1.PodStatus{PodIP: p.Status.PodIP, PodIPs: p.Status.PodIPs, Conditions: ready},
	}, nil
}

// trimEndpointSlice keeps Elasti's own proxy slices whole, and reduces every
// other slice to its first ready endpoint: the reconciler only asks whether
// a Service has one.
func trimEndpointSlice(obj any) (any, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return obj, nil
	}
	if s.Labels[contract.LabelManagedBy] == contract.ManagedBy {
		s.ManagedFields = nil
		return s, nil
	}
	out := &discoveryv1.EndpointSlice{TypeMeta: s.TypeMeta, ObjectMeta: trimMeta(s.ObjectMeta), AddressType: s.AddressType}
	for _, ep := range s.Endpoints {
		if proxyslices.EndpointReady(ep) {
			out.Endpoints = []discoveryv1.Endpoint{{Addresses: ep.Addresses, Conditions: ep.Conditions}}
			break
		}
	}
	return out, nil
}

// trimService keeps the ports and what decides whether Elasti can hold the
// Service's traffic (package refusals).
func trimService(obj any) (any, error) {
	s, ok := obj.(*corev1.Service)
	if !ok {
		return obj, nil
	}
	return &corev1.Service{TypeMeta: s.TypeMeta, ObjectMeta: trimMeta(s.ObjectMeta), Spec: corev1.ServiceSpec{
		Ports: s.Spec.Ports, Selector: s.Spec.Selector, Type: s.Spec.Type, ClusterIP: s.Spec.ClusterIP,
		ExternalName: s.Spec.ExternalName, IPFamilies: s.Spec.IPFamilies,
		InternalTrafficPolicy: s.Spec.InternalTrafficPolicy, ExternalTrafficPolicy: s.Spec.ExternalTrafficPolicy,
	}}, nil
}

func trimMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, Labels: m.Labels, DeletionTimestamp: m.DeletionTimestamp,
		OwnerReferences: m.OwnerReferences, CreationTimestamp: m.CreationTimestamp,
	}
}
