package refusals

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/controller/proxyslices"
)

// TestFamily: a Service in an IP family that no ready resolver has
// an address in is refused; kube-proxy would find no endpoint for it in
// that family's slices. The envtest API server serves IPv4 only, so this
// is checked here, on the function the reconciler calls.
func TestFamily(t *testing.T) {
	svc := func(fams ...corev1.IPFamily) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}, Spec: corev1.ServiceSpec{IPFamilies: fams}}
	}
	v4 := []proxyslices.Resolver{{Name: "a", IPv4: "10.0.0.1"}}
	v6 := []proxyslices.Resolver{{Name: "b", IPv6: "fd00::1"}}
	dual := []proxyslices.Resolver{{Name: "c", IPv4: "10.0.0.2", IPv6: "fd00::2"}}
	for _, tc := range []struct {
		name      string
		svc       *corev1.Service
		resolvers []proxyslices.Resolver
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
		got := Family(tc.svc, tc.resolvers)
		if got.Refused() != tc.refused {
			t.Errorf("%s: refused = %v (%q), want %v", tc.name, got.Refused(), got.Message, tc.refused)
		}
		if got.Refused() && (got.Reason != ReasonResolverFamilyAbsent || !strings.Contains(got.Message, "IPv")) {
			t.Errorf("%s: %+v", tc.name, got)
		}
	}
}

// TestSelector: the Service's selector must match the target's
// pod-template labels; extra template labels are fine, and a target whose
// template cannot be read is not refused.
func TestSelector(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}}}
	ref := elastiv1alpha1.ScaleTargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
	if f := Selector(svc, ref, map[string]string{"app": "web", "tier": "front"}); f.Refused() {
		t.Errorf("a superset of the selector refused: %+v", f)
	}
	if f := Selector(svc, ref, nil); f.Refused() {
		t.Errorf("an unreadable template refused: %+v", f)
	}
	f := Selector(svc, ref, map[string]string{"app": "api"})
	if f.Reason != ReasonSelectorMissesTarget || !strings.Contains(f.Message, "app=web") || !strings.Contains(f.Message, "app=api") {
		t.Errorf("mismatch: %+v", f)
	}
	if f := Selector(svc, ref, map[string]string{}); !f.Refused() || !strings.Contains(f.Message, "(none)") {
		t.Errorf("a template without labels: %+v", f)
	}
}

// TestService: each shape of Service whose traffic the resolvers cannot
// hold is refused with its own reason; the first that applies wins.
func TestService(t *testing.T) {
	local := corev1.ServiceInternalTrafficPolicyLocal
	for _, tc := range []struct {
		name   string
		change func(*corev1.ServiceSpec)
		reason string
	}{
		{"a plain ClusterIP Service", func(*corev1.ServiceSpec) {}, ""},
		{"ExternalName", func(s *corev1.ServiceSpec) { s.Type, s.ExternalName = corev1.ServiceTypeExternalName, "example.com" }, ReasonExternalNameService},
		{"headless", func(s *corev1.ServiceSpec) { s.ClusterIP = corev1.ClusterIPNone }, ReasonHeadlessService},
		{"no selector", func(s *corev1.ServiceSpec) { s.Selector = nil }, ReasonServiceNoSelector},
		{"UDP port", func(s *corev1.ServiceSpec) {
			s.Ports = append(s.Ports, corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP})
		}, ReasonNonTCPServicePort},
		{"internalTrafficPolicy Local", func(s *corev1.ServiceSpec) { s.InternalTrafficPolicy = &local }, ReasonLocalTrafficPolicy},
		{"externalTrafficPolicy Local", func(s *corev1.ServiceSpec) { s.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal }, ReasonLocalTrafficPolicy},
		{"headless without selector: headless first", func(s *corev1.ServiceSpec) { s.ClusterIP, s.Selector = corev1.ClusterIPNone, nil }, ReasonHeadlessService},
	} {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}, Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
		}}
		tc.change(&svc.Spec)
		got := Service(svc)
		if got.Reason != tc.reason || got.Refused() != (tc.reason != "") {
			t.Errorf("%s: got %+v, want reason %q", tc.name, got, tc.reason)
		}
		if got.Refused() && (!strings.Contains(got.Message, "ns/web") || !Is(got.Reason)) {
			t.Errorf("%s: %+v", tc.name, got)
		}
	}
}
