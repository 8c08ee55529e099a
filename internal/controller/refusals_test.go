package controller

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// TestFamilyRefusal: a Service in an IP family that no ready resolver has
// an address in is refused; kube-proxy would find no endpoint for it in
// that family's slices. The envtest API server serves IPv4 only, so this
// is checked here, on the function the reconciler calls.
func TestFamilyRefusal(t *testing.T) {
	svc := func(fams ...corev1.IPFamily) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}, Spec: corev1.ServiceSpec{IPFamilies: fams}}
	}
	v4 := []resolverEndpoint{{Name: "a", IPv4: "10.0.0.1"}}
	v6 := []resolverEndpoint{{Name: "b", IPv6: "fd00::1"}}
	dual := []resolverEndpoint{{Name: "c", IPv4: "10.0.0.2", IPv6: "fd00::2"}}
	for _, tc := range []struct {
		name      string
		svc       *corev1.Service
		resolvers []resolverEndpoint
		refused   bool
	}{
		{"IPv6 Service, IPv4 resolvers", svc(corev1.IPv6Protocol), v4, true},
		{"dual-stack Service, IPv4 resolvers", svc(corev1.IPv4Protocol, corev1.IPv6Protocol), v4, true},
		{"IPv4 Service, IPv6 resolvers", svc(corev1.IPv4Protocol), v6, true},
		{"IPv6 Service, one IPv4 and one IPv6 resolver", svc(corev1.IPv6Protocol), append(v4, v6...), false},
		{"dual-stack Service, dual-stack resolvers", svc(corev1.IPv4Protocol, corev1.IPv6Protocol), dual, false},
		{"IPv4 Service, IPv4 resolvers", svc(corev1.IPv4Protocol), v4, false},
		{"no resolvers: ProxyReady reports it instead", svc(corev1.IPv6Protocol), nil, false},
	} {
		got := familyRefusal(tc.svc, tc.resolvers)
		if got.refused() != tc.refused {
			t.Errorf("%s: refused = %v (%q), want %v", tc.name, got.refused(), got.message, tc.refused)
		}
		if got.refused() && (got.reason != ReasonResolverFamilyAbsent || !strings.Contains(got.message, "IPv")) {
			t.Errorf("%s: %+v", tc.name, got)
		}
	}
}

// TestSelectorRefusal: the Service's selector must match the target's
// pod-template labels; extra template labels are fine, and a target whose
// template cannot be read is not refused.
func TestSelectorRefusal(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}}}
	ref := elastiv1alpha1.ScaleTargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
	if f := selectorRefusal(svc, ref, map[string]string{"app": "web", "tier": "front"}); f.refused() {
		t.Errorf("a superset of the selector refused: %+v", f)
	}
	if f := selectorRefusal(svc, ref, nil); f.refused() {
		t.Errorf("an unreadable template refused: %+v", f)
	}
	f := selectorRefusal(svc, ref, map[string]string{"app": "api"})
	if f.reason != ReasonSelectorMissesTarget || !strings.Contains(f.message, "app=web") || !strings.Contains(f.message, "app=api") {
		t.Errorf("mismatch: %+v", f)
	}
	if f := selectorRefusal(svc, ref, map[string]string{}); !f.refused() || !strings.Contains(f.message, "(none)") {
		t.Errorf("a template without labels: %+v", f)
	}
}
