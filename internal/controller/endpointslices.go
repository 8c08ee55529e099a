package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"sort"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
)

// resolverEndpoint is one ready resolver pod.
type resolverEndpoint struct {
	Name     string
	UID      types.UID
	NodeName string
	IPv4     string
	IPv6     string
}

// readyResolvers picks the resolver pods that may receive traffic: Ready,
// not terminating, with an IP. The result is sorted by name so that the
// slices built from it are stable.
func readyResolvers(pods []corev1.Pod) []resolverEndpoint {
	var out []resolverEndpoint
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil || !podReady(p) {
			continue
		}
		ep := resolverEndpoint{Name: p.Name, UID: p.UID, NodeName: p.Spec.NodeName}
		ips := p.Status.PodIPs
		if len(ips) == 0 && p.Status.PodIP != "" {
			ips = []corev1.PodIP{{IP: p.Status.PodIP}}
		}
		for _, ip := range ips {
			parsed := net.ParseIP(ip.IP)
			switch {
			case parsed == nil:
			case parsed.To4() != nil:
				if ep.IPv4 == "" {
					ep.IPv4 = parsed.String()
				}
			default:
				if ep.IPv6 == "" {
					ep.IPv6 = parsed.String()
				}
			}
		}
		if ep.IPv4 == "" && ep.IPv6 == "" {
			continue
		}
		out = append(out, ep)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

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

// proxySlices builds the proxy EndpointSlices of an ElastiService: one per
// address family the ready resolvers have, each listing every ready resolver
// with ready=true and one port per proxied Service port, numbered with the
// allocated resolver port. No resolvers or no ports means no slices: a slice
// must never point a Service at nothing.
func proxySlices(es *elastiv1alpha1.ElastiService, ports []elastiv1alpha1.ProxyPort, resolvers []resolverEndpoint) []*discoveryv1.EndpointSlice {
	if len(resolvers) == 0 || len(ports) == 0 {
		return nil
	}
	var out []*discoveryv1.EndpointSlice
	for _, family := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
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

// ensureSlices makes the ElastiService's proxy slices exactly want: creates
// or updates those in want, deletes every other slice it owns (an old
// address family, or one left for a previous spec.service).
func (r *Reconciler) ensureSlices(ctx context.Context, es *elastiv1alpha1.ElastiService, want []*discoveryv1.EndpointSlice) error {
	existing, err := r.ownedProxySlices(ctx, es)
	if err != nil {
		return err
	}
	for _, w := range want {
		h, ok := existing[w.Name]
		delete(existing, w.Name)
		switch {
		case !ok:
			// AlreadyExists means the cache lags; the retry compares
			// and updates.
			if err := r.client.Create(ctx, w); err != nil {
				return fmt.Errorf("create proxy EndpointSlice %s/%s: %w", w.Namespace, w.Name, err)
			}
		case sliceNeedsUpdate(h, w):
			w.ResourceVersion = h.ResourceVersion
			if err := r.client.Update(ctx, w); err != nil {
				return fmt.Errorf("update proxy EndpointSlice %s/%s: %w", w.Namespace, w.Name, err)
			}
		}
	}
	for _, s := range existing {
		if err := r.client.Delete(ctx, s, client.Preconditions{UID: &s.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete proxy EndpointSlice %s/%s: %w", s.Namespace, s.Name, err)
		}
	}
	return nil
}

// ownedProxySlices returns the proxy slices the ElastiService owns, by name.
func (r *Reconciler) ownedProxySlices(ctx context.Context, es *elastiv1alpha1.ElastiService) (map[string]*discoveryv1.EndpointSlice, error) {
	have := &discoveryv1.EndpointSliceList{}
	if err := r.client.List(ctx, have, client.InNamespace(es.Namespace), client.MatchingLabels{
		contract.LabelManagedBy:     contract.ManagedBy,
		contract.LabelElastiService: elastiServiceLabelValue(es.Name),
	}); err != nil {
		return nil, fmt.Errorf("list proxy EndpointSlices of %s/%s: %w", es.Namespace, es.Name, err)
	}
	owned := map[string]*discoveryv1.EndpointSlice{}
	for i := range have.Items {
		if ownedBy(&have.Items[i], es.UID) {
			owned[have.Items[i].Name] = &have.Items[i]
		}
	}
	return owned, nil
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

// ownSlicesReady reports whether the Service's own EndpointSlices (those
// not managed by Elasti) list an endpoint that is explicitly ready and not
// terminating, the same rule the resolver forwards by.
func ownSlicesReady(slices []discoveryv1.EndpointSlice) bool {
	for i := range slices {
		s := &slices[i]
		if s.Labels[contract.LabelManagedBy] == contract.ManagedBy {
			continue
		}
		for _, ep := range s.Endpoints {
			if endpointReady(ep) {
				return true
			}
		}
	}
	return false
}

// endpointReady: an endpoint with an address that contract.EndpointReady
// accepts.
func endpointReady(ep discoveryv1.Endpoint) bool {
	return len(ep.Addresses) > 0 && contract.EndpointReady(ep.Conditions)
}
