package proxyslices

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

func TestBuild(t *testing.T) {
	es := &elastiv1alpha1.ElastiService{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "httpbin", UID: "es-uid"},
		Spec:       elastiv1alpha1.ElastiServiceSpec{Service: "httpbin-svc"},
	}
	ports := []elastiv1alpha1.ProxyPort{
		{Name: "http", Port: 80, Protocol: "TCP", AppProtocol: "http", ResolverPort: 20001},
		{Name: "db", Port: 5432, Protocol: "TCP", ResolverPort: 20002},
	}
	v4only := []Resolver{{Name: "a", UID: "ua", IPv4: "10.0.0.1"}}
	dual := []Resolver{{Name: "a", UID: "ua", IPv4: "10.0.0.1", NodeName: "n1"}, {Name: "b", UID: "ub", IPv6: "fd00::2"}}

	if got := Build(es, ports, nil); got != nil {
		t.Fatalf("slices without resolvers: %v", got)
	}
	if got := Build(es, nil, v4only); got != nil {
		t.Fatalf("slices without ports: %v", got)
	}
	got := Build(es, ports, v4only)
	if len(got) != 1 {
		t.Fatalf("want one IPv4 slice, got %d", len(got))
	}
	ready := discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}
	want := &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "httpbin-elasti-ipv4", Namespace: "demo",
			Labels: map[string]string{
				"kubernetes.io/service-name":             "httpbin-svc",
				"endpointslice.kubernetes.io/managed-by": "elasti.dev",
				"elasti.dev/elastiservice":               "httpbin",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "elasti.dev/v1alpha1", Kind: "ElastiService", Name: "httpbin", UID: "es-uid", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: ready, TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "a", UID: "ua"}}},
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(int32(20001)), AppProtocol: ptr.To("http")},
			{Name: ptr.To("db"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(int32(20002))},
		},
	}
	if diff := cmp.Diff(want, got[0]); diff != "" {
		t.Errorf("IPv4 slice (-want +got)\n%s", diff)
	}

	got = Build(es, ports, dual)
	if len(got) != 2 || got[0].AddressType != discoveryv1.AddressTypeIPv4 || got[1].AddressType != discoveryv1.AddressTypeIPv6 {
		t.Fatalf("dual stack: %+v", got)
	}
	if got[1].Name != "httpbin-elasti-ipv6" || got[1].Endpoints[0].Addresses[0] != "fd00::2" || len(got[1].Endpoints) != 1 {
		t.Errorf("IPv6 slice %+v", got[1])
	}
	if sliceNeedsUpdate(got[0], Build(es, ports, dual)[0]) {
		t.Error("identical slices need an update")
	}
	if !sliceNeedsUpdate(got[0], Build(es, ports[:1], dual)[0]) {
		t.Error("a port change needs no update")
	}
}

func TestNamesStayValid(t *testing.T) {
	long := strings.Repeat("a", 253)
	if n := proxySliceName(long, discoveryv1.AddressTypeIPv6); len(n) > 253 || !strings.HasSuffix(n, "-elasti-ipv6") {
		t.Errorf("slice name %q (%d)", n, len(n))
	}
	if v := elastiServiceLabelValue(long); len(v) > 63 {
		t.Errorf("label value %d long", len(v))
	}
	if proxySliceName(long, discoveryv1.AddressTypeIPv4) == proxySliceName(long[:252]+"b", discoveryv1.AddressTypeIPv4) {
		t.Error("truncated names collide")
	}
}
