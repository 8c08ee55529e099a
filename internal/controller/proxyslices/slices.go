package proxyslices

import (
	"crypto/sha256"
	"encoding/hex"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
)

// proxySliceName names the proxy slice of one address family.
func proxySliceName(esName string, family discoveryv1.AddressType) string {
	suffix := "-elasti-ipv4"
	if family == discoveryv1.AddressTypeIPv6 {
		suffix = "-elasti-ipv6"
	}
	return truncateName(esName, 253-len(suffix)) + suffix
}

// elastiServiceLabelValue is LabelElastiService's value: the name, shortened
// with a hash when it is longer than a label value may be.
func elastiServiceLabelValue(esName string) string {
	return truncateName(esName, 63)
}

func truncateName(s string, max int) string {
	if len(s) <= max {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	h := hex.EncodeToString(sum[:])[:8]
	return s[:max-9] + "-" + h
}

// Build builds the proxy EndpointSlices of an ElastiService: one per
// address family the ready resolvers have, each listing every ready resolver
// with ready=true and one port per proxied Service port, numbered with the
// allocated resolver port. No resolvers or no ports means no slices: a slice
// must never point a Service at nothing.
func Build(es *elastiv1alpha1.ElastiService, ports []elastiv1alpha1.ProxyPort, resolvers []Resolver) []*discoveryv1.EndpointSlice {
	if len(resolvers) == 0 || len(ports) == 0 {
		return nil
	}
	var out []*discoveryv1.EndpointSlice
	for _, family := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
		eps := endpoints(resolvers, family)
		if len(eps) == 0 {
			continue
		}
		slicePorts := make([]discoveryv1.EndpointPort, 0, len(ports))
		for _, p := range ports {
			ep := discoveryv1.EndpointPort{
				Name:     ptr.To(p.Name),
				Protocol: ptr.To(corev1.Protocol(p.Protocol)),
				Port:     ptr.To(p.ResolverPort),
			}
			if p.AppProtocol != "" {
				ep.AppProtocol = ptr.To(p.AppProtocol)
			}
			slicePorts = append(slicePorts, ep)
		}
		out = append(out, &discoveryv1.EndpointSlice{
			TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
			ObjectMeta: metav1.ObjectMeta{
				Name:      proxySliceName(es.Name, family),
				Namespace: es.Namespace,
				Labels: map[string]string{
					discoveryv1.LabelServiceName: es.Spec.Service,
					contract.LabelManagedBy:      contract.ManagedBy,
					contract.LabelElastiService:  elastiServiceLabelValue(es.Name),
				},
				OwnerReferences: []metav1.OwnerReference{ownerRef(es)},
			},
			AddressType: family,
			Endpoints:   eps,
			Ports:       slicePorts,
		})
	}
	return out
}

// endpoints lists the resolvers that have an address of family, each
// ready, as a proxy slice of that family lists them.
func endpoints(resolvers []Resolver, family discoveryv1.AddressType) []discoveryv1.Endpoint {
	var eps []discoveryv1.Endpoint
	for _, r := range resolvers {
		ip := r.IPv4
		if family == discoveryv1.AddressTypeIPv6 {
			ip = r.IPv6
		}
		if ip == "" {
			continue
		}
		ep := discoveryv1.Endpoint{
			Addresses: []string{ip},
			Conditions: discoveryv1.EndpointConditions{
				Ready:       ptr.To(true),
				Serving:     ptr.To(true),
				Terminating: ptr.To(false),
			},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: r.Name, UID: r.UID},
		}
		if r.NodeName != "" {
			ep.NodeName = ptr.To(r.NodeName)
		}
		eps = append(eps, ep)
	}
	return eps
}

func ownerRef(es *elastiv1alpha1.ElastiService) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         elastiv1alpha1.GroupVersion.String(),
		Kind:               "ElastiService",
		Name:               es.Name,
		UID:                es.UID,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}

// sliceNeedsUpdate reports whether an existing proxy slice differs from the
// desired one in anything the operator owns.
func sliceNeedsUpdate(have, want *discoveryv1.EndpointSlice) bool {
	for k, v := range want.Labels {
		if have.Labels[k] != v {
			return true
		}
	}
	if !ownedBy(have, want.OwnerReferences[0].UID) {
		return true
	}
	return !equality.Semantic.DeepEqual(have.Endpoints, want.Endpoints) || !equality.Semantic.DeepEqual(have.Ports, want.Ports)
}

func ownedBy(s *discoveryv1.EndpointSlice, uid types.UID) bool {
	for _, o := range s.OwnerReferences {
		if o.UID == uid && o.Controller != nil && *o.Controller {
			return true
		}
	}
	return false
}
