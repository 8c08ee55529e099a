package proxyslices

import (
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestOwnReady(t *testing.T) {
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
		if got := OwnReady(tc.slices); got != tc.want {
			t.Errorf("%s: got %v", tc.name, got)
		}
	}
}
