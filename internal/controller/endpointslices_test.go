package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

func pod(name string, ready bool, ips ...string) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}, Spec: corev1.PodSpec{NodeName: "node-1"}}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	return p
}

func TestReadyResolvers(t *testing.T) {
	deleting := pod("d", true, "10.0.0.9")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	got := readyResolvers([]corev1.Pod{
		pod("b", true, "10.0.0.2", "fd00::2"),
		pod("a", true, "10.0.0.1"),
		pod("not-ready", false, "10.0.0.3"),
		pod("no-ip", true),
		pod("v6", true, "fd00::6"),
		deleting,
	})
	want := []resolverEndpoint{
		{Name: "a", UID: "uid-a", NodeName: "node-1", IPv4: "10.0.0.1"},
		{Name: "b", UID: "uid-b", NodeName: "node-1", IPv4: "10.0.0.2", IPv6: "fd00::2"},
		{Name: "v6", UID: "uid-v6", NodeName: "node-1", IPv6: "fd00::6"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

func TestProxySlices(t *testing.T) {
	es := &elastiv1alpha1.ElastiService{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "httpbin", UID: "es-uid"},
		Spec:       elastiv1alpha1.ElastiServiceSpec{Service: "httpbin-svc"},
	}
	ports := []elastiv1alpha1.ProxyPort{
		{Name: "http", Port: 80, Protocol: "TCP", AppProtocol: "http", ResolverPort: 20001},
		{Name: "db", Port: 5432, Protocol: "TCP", ResolverPort: 20002},
	}
	v4only := []resolverEndpoint{{Name: "a", UID: "ua", IPv4: "10.0.0.1"}}
	dual := []resolverEndpoint{{Name: "a", UID: "ua", IPv4: "10.0.0.1", NodeName: "n1"}, {Name: "b", UID: "ub", IPv6: "fd00::2"}}

	if got := proxySlices(es, ports, nil); got != nil {
		t.Fatalf("slices without resolvers: %v", got)
	}
	if got := proxySlices(es, nil, v4only); got != nil {
		t.Fatalf("slices without ports: %v", got)
	}
	got := proxySlices(es, ports, v4only)
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

	got = proxySlices(es, ports, dual)
	if len(got) != 2 || got[0].AddressType != discoveryv1.AddressTypeIPv4 || got[1].AddressType != discoveryv1.AddressTypeIPv6 {
		t.Fatalf("dual stack: %+v", got)
	}
	if got[1].Name != "httpbin-elasti-ipv6" || got[1].Endpoints[0].Addresses[0] != "fd00::2" || len(got[1].Endpoints) != 1 {
		t.Errorf("IPv6 slice %+v", got[1])
	}
	if sliceNeedsUpdate(got[0], proxySlices(es, ports, dual)[0]) {
		t.Error("identical slices need an update")
	}
	if !sliceNeedsUpdate(got[0], proxySlices(es, ports[:1], dual)[0]) {
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

func TestOwnSlicesReady(t *testing.T) {
	slice := func(managedBy string, eps ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
		return discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"endpointslice.kubernetes.io/managed-by": managedBy}}, Endpoints: eps}
	}
	ep := func(ready, terminating *bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{"10.1.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ready, Terminating: terminating}}
	}
	for _, tc := range []struct {
		name   string
		slices []discoveryv1.EndpointSlice
		want   bool
	}{
		{"none", nil, false},
		{"ready", []discoveryv1.EndpointSlice{slice("endpointslice-controller.k8s.io", ep(ptr.To(true), nil))}, true},
		{"ready absent is not ready", []discoveryv1.EndpointSlice{slice("x", ep(nil, nil))}, false},
		{"not ready", []discoveryv1.EndpointSlice{slice("x", ep(ptr.To(false), nil))}, false},
		{"terminating", []discoveryv1.EndpointSlice{slice("x", ep(ptr.To(true), ptr.To(true)))}, false},
		{"Elasti's own slice does not count", []discoveryv1.EndpointSlice{slice("elasti.dev", ep(ptr.To(true), nil))}, false},
	} {
		if got := ownSlicesReady(tc.slices); got != tc.want {
			t.Errorf("%s: got %v", tc.name, got)
		}
	}
}

func TestTrimEndpointSliceKeepsFirstReady(t *testing.T) {
	in := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "s", Labels: map[string]string{"kubernetes.io/service-name": "svc"}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}},
			{Addresses: []string{"2"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}, Hostname: ptr.To("h")},
			{Addresses: []string{"3"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
		},
	}
	out, err := trimEndpointSlice(in)
	if err != nil {
		t.Fatal(err)
	}
	s := out.(*discoveryv1.EndpointSlice)
	if len(s.Endpoints) != 1 || s.Endpoints[0].Addresses[0] != "2" || s.Endpoints[0].Hostname != nil || !ownSlicesReady([]discoveryv1.EndpointSlice{*s}) {
		t.Errorf("trimmed %+v", s.Endpoints)
	}
	if other, _ := trimEndpointSlice("tombstone"); other != "tombstone" {
		t.Error("unknown types must pass through")
	}
}
