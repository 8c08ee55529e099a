package proxyslices

import (
	"context"
	"fmt"
	"net"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"elasti.dev/elasti/internal/contract"
)

// Resolver is one ready resolver pod, as a proxy slice lists it.
type Resolver struct {
	Name     string
	UID      types.UID
	NodeName string
	IPv4     string
	IPv6     string
}

// ListResolvers lists the resolver pods in namespace and keeps the ready
// ones (ReadyResolvers). The reconciler lists them once per reconcile:
// decide counts them and Build lists them, so a slice never disagrees with
// the plan that asked for it.
func ListResolvers(ctx context.Context, c Lister, namespace string) ([]Resolver, error) {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(namespace),
		client.MatchingLabels{contract.LabelComponent: contract.ComponentResolver}); err != nil {
		return nil, fmt.Errorf("list resolver pods in %s: %w", namespace, err)
	}
	return ReadyResolvers(pods.Items), nil
}

// ReadyResolvers picks the resolver pods that may receive traffic: Ready,
// not terminating, with an IP. The result is sorted by name so that the
// slices built from it are stable.
func ReadyResolvers(pods []corev1.Pod) []Resolver {
	var out []Resolver
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil || !PodReady(p) {
			continue
		}
		ep := Resolver{Name: p.Name, UID: p.UID, NodeName: p.Spec.NodeName}
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

// PodReady reports whether the pod's Ready condition is True. The resolver
// pod watch passes an update only when this, among others, changes.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
