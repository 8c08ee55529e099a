package watches

import (
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"elasti.dev/elasti/internal/contract"
)

// TestSliceReadinessChanged: a rewrite of a proxy slice's endpoints (the
// slice refresher's, when the resolvers change) reconciles nothing; any
// other change to it does, and a Service's own slice counts only when it
// gains its first endpoint or loses its last.
func TestSliceReadinessChanged(t *testing.T) {
	slice := func(managedBy string, port int32, ips ...string) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "team", Name: "web-x", Labels: map[string]string{contract.LabelManagedBy: managedBy}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Port: ptr.To(port)}},
		}
		for _, ip := range ips {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}})
		}
		return s
	}
	const kube = "endpointslice-controller.k8s.io"
	for _, tc := range []struct {
		name     string
		old, new *discoveryv1.EndpointSlice
		want     bool
	}{
		{"proxy slice, other resolvers", slice(contract.ManagedBy, 20001, "10.0.0.1"), slice(contract.ManagedBy, 20001, "10.0.0.2"), false},
		{"proxy slice, another port", slice(contract.ManagedBy, 20001, "10.0.0.1"), slice(contract.ManagedBy, 20002, "10.0.0.1"), true},
		{"proxy slice, relabelled", slice(contract.ManagedBy, 20001, "10.0.0.1"), func() *discoveryv1.EndpointSlice {
			s := slice(contract.ManagedBy, 20001, "10.0.0.1")
			s.Labels["extra"] = "x"
			return s
		}(), true},
		{"own slice, another pod", slice(kube, 80, "10.1.0.1"), slice(kube, 80, "10.1.0.2"), false},
		{"own slice, last pod gone", slice(kube, 80, "10.1.0.1"), slice(kube, 80), true},
		{"own slice, first pod", slice(kube, 80), slice(kube, 80, "10.1.0.1"), true},
	} {
		if got := SliceReadinessChanged().Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
			t.Errorf("%s: passes = %v, want %v", tc.name, got, tc.want)
		}
	}
}
