package refusals

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/controller/proxyslices"
)

// Service decides from the Service alone whether its traffic can be
// held. Each refused shape would leave the Service pointing where nothing
// answers while the target sleeps.
func Service(svc *corev1.Service) Refusal {
	name := svc.Namespace + "/" + svc.Name
	switch {
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		return Refusal{ReasonExternalNameService, fmt.Sprintf(
			"Service %s is of type ExternalName: DNS sends its clients to %q, so no endpoint of it can lead to a resolver; point spec.service at a Service that selects the target's pods",
			name, svc.Spec.ExternalName)}
	case svc.Spec.ClusterIP == corev1.ClusterIPNone:
		return Refusal{ReasonHeadlessService, fmt.Sprintf(
			"Service %s is headless (clusterIP: None): its DNS name resolves to endpoint addresses, which would be resolvers that do not listen on the Service's ports while the target sleeps; create a Service with a cluster IP that selects the same pods and name it in spec.service",
			name)}
	case len(svc.Spec.Selector) == 0:
		return Refusal{ReasonServiceNoSelector, fmt.Sprintf(
			"Service %s has no selector: its endpoints are written by someone else, so woken pods would never become its endpoints; give it a selector that matches the target's pods",
			name)}
	}
	for _, p := range svc.Spec.Ports {
		if proto := p.Protocol; proto != "" && proto != corev1.ProtocolTCP {
			return Refusal{ReasonNonTCPServicePort, fmt.Sprintf(
				"Service %s port %s is %s: the resolvers hold TCP only, so that port would drop its traffic while the target sleeps; move the %s ports to a Service of their own that Elasti does not manage",
				name, portLabel(p), proto, proto)}
		}
	}
	if p := svc.Spec.InternalTrafficPolicy; p != nil && *p == corev1.ServiceInternalTrafficPolicyLocal {
		return Refusal{ReasonLocalTrafficPolicy, fmt.Sprintf(
			"Service %s has internalTrafficPolicy: Local: while the target sleeps its endpoints are the resolvers, and clients on a node without a resolver would have none; set internalTrafficPolicy: Cluster",
			name)}
	}
	if svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
		return Refusal{ReasonLocalTrafficPolicy, fmt.Sprintf(
			"Service %s has externalTrafficPolicy: Local: while the target sleeps its endpoints are the resolvers, and nodes without a resolver would drop external traffic; set externalTrafficPolicy: Cluster",
			name)}
	}
	return Refusal{}
}

func portLabel(p corev1.ServicePort) string {
	if p.Name != "" {
		return fmt.Sprintf("%s (%d)", p.Name, p.Port)
	}
	return fmt.Sprint(p.Port)
}

// Family refuses a Service with an IP family that no ready resolver
// has an address in: kube-proxy programs each family from that family's
// slices only, so its clients would find no endpoint. Without ready
// resolvers at all there is nothing to compare (ProxyReady says so).
func Family(svc *corev1.Service, resolvers []proxyslices.Resolver) Refusal {
	if len(resolvers) == 0 {
		return Refusal{}
	}
	var v4, v6 bool
	for _, r := range resolvers {
		v4 = v4 || r.IPv4 != ""
		v6 = v6 || r.IPv6 != ""
	}
	for _, fam := range svc.Spec.IPFamilies {
		if (fam == corev1.IPv4Protocol && !v4) || (fam == corev1.IPv6Protocol && !v6) {
			return Refusal{ReasonResolverFamilyAbsent, fmt.Sprintf(
				"Service %s/%s serves %s, and no ready resolver has an %s address: its %s clients would have no endpoint while the target sleeps; run the resolvers with an %s address (dual-stack pods) or make the Service single-stack in a family they have",
				svc.Namespace, svc.Name, fam, fam, fam, fam)}
		}
	}
	return Refusal{}
}

// Selector refuses a Service whose selector does not match the
// labels of the target's pod template: woken pods would never become its
// endpoints, and every held request would time out. tpl is nil when the
// target's kind has no spec.template the operator could read; then nothing
// is refused.
func Selector(svc *corev1.Service, ref elastiv1alpha1.ScaleTargetRef, tpl map[string]string) Refusal {
	if tpl == nil || len(svc.Spec.Selector) == 0 {
		return Refusal{}
	}
	if labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(tpl)) {
		return Refusal{}
	}
	return Refusal{ReasonSelectorMissesTarget, fmt.Sprintf(
		"Service %s/%s selects %s, but the pod template of %s %s has labels %s: woken pods would never become the Service's endpoints; fix the Service's selector or spec.scaleTargetRef",
		svc.Namespace, svc.Name, labels.Set(svc.Spec.Selector), ref.Kind, ref.Name, labelsOrNone(tpl))}
}

func labelsOrNone(m map[string]string) string {
	if len(m) == 0 {
		return "(none)"
	}
	return labels.Set(m).String()
}
