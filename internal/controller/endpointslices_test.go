package controller

import (
	"context"
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

func TestPortAllocator(t *testing.T) {
	ctx := context.Background()
	older := time.Unix(100, 0)
	// holdersDB simulates the cache: who records which port.
	db := map[int32][]elastiv1alpha1.ElastiService{}
	a := newPortAllocator(20000, 20003, func(_ context.Context, p int32) ([]elastiv1alpha1.ElastiService, error) { return db[p], nil })
	svc := func(names ...string) *corev1.Service {
		s := &corev1.Service{}
		for i, n := range names {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: n, Port: int32(80 + i)})
		}
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "udp", Port: 53, Protocol: corev1.ProtocolUDP})
		return s
	}
	es := func(name string, created time.Time, ports ...elastiv1alpha1.ProxyPort) *elastiv1alpha1.ElastiService {
		return &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(created)},
			Status: elastiv1alpha1.ElastiServiceStatus{ProxyPorts: ports}}
	}
	record := func(e *elastiv1alpha1.ElastiService, ports []elastiv1alpha1.ProxyPort) {
		e.Status.ProxyPorts = ports
		for _, p := range ports {
			db[p.ResolverPort] = append(db[p.ResolverPort], *e)
		}
	}
	resolverPorts := func(pp []elastiv1alpha1.ProxyPort) []int32 {
		var out []int32
		for _, p := range pp {
			out = append(out, p.ResolverPort)
		}
		return out
	}

	a1 := es("a", older)
	got, err := a.Allocate(ctx, a1, svc("http", "grpc"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int32{20000, 20001}, resolverPorts(got)); diff != "" {
		t.Fatalf("first allocation (-want +got)\n%s", diff)
	}
	// b allocates before a's status reached the cache: the reservation
	// keeps them apart.
	b := es("b", older.Add(time.Second))
	gotB, err := a.Allocate(ctx, b, svc("http"))
	if err != nil || resolverPorts(gotB)[0] != 20002 {
		t.Fatalf("b got %v %v", gotB, err)
	}
	record(a1, got)
	record(b, gotB)

	// Stable: a keeps its ports, and a port added later gets a new one.
	again, err := a.Allocate(ctx, a1, svc("http", "grpc", "admin"))
	if err != nil || cmp.Diff([]int32{20000, 20001, 20003}, resolverPorts(again)) != "" {
		t.Fatalf("a again: %v %v", again, err)
	}
	// Exhausted.
	c := es("c", older.Add(2*time.Second))
	if _, err := a.Allocate(ctx, c, svc("http")); err == nil {
		t.Fatal("allocation beyond the range succeeded")
	}
	// Released ports are reused.
	a.Release(types.NamespacedName{Namespace: "ns", Name: "b"})
	delete(db, 20002)
	gotC, err := a.Allocate(ctx, c, svc("http"))
	if err != nil || resolverPorts(gotC)[0] != 20002 {
		t.Fatalf("c after release: %v %v", gotC, err)
	}

	// A collision recorded by two objects (say, from two leaders): the
	// older keeps the port, the younger moves.
	fresh := newPortAllocator(20000, 20009, func(_ context.Context, p int32) ([]elastiv1alpha1.ElastiService, error) { return db[p], nil })
	db = map[int32][]elastiv1alpha1.ElastiService{}
	clash := []elastiv1alpha1.ProxyPort{{Name: "http", Port: 80, ResolverPort: 20005}}
	old, young := es("old", older, clash...), es("young", older.Add(time.Hour), clash...)
	db[20005] = []elastiv1alpha1.ElastiService{*old, *young}
	gotOld, _ := fresh.Allocate(ctx, old, svc("http"))
	gotYoung, _ := fresh.Allocate(ctx, young, svc("http"))
	if resolverPorts(gotOld)[0] != 20005 || resolverPorts(gotYoung)[0] == 20005 {
		t.Fatalf("collision: old %v young %v", gotOld, gotYoung)
	}
}
