package contract

import (
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

func TestEndpointReady(t *testing.T) {
	for _, tt := range []struct {
		name string
		c    discoveryv1.EndpointConditions
		want bool
	}{
		{"ready", discoveryv1.EndpointConditions{Ready: ptr.To(true)}, true},
		{"ready, serving, not terminating", discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)}, true},
		{"ready absent", discoveryv1.EndpointConditions{}, false},
		{"ready absent, serving", discoveryv1.EndpointConditions{Serving: ptr.To(true)}, false},
		{"not ready", discoveryv1.EndpointConditions{Ready: ptr.To(false)}, false},
		{"terminating, still serving", discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}, false},
		{"ready but terminating (publishNotReadyAddresses)", discoveryv1.EndpointConditions{Ready: ptr.To(true), Terminating: ptr.To(true)}, false},
		{"ready, not serving (publishNotReadyAddresses)", discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(false)}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := EndpointReady(tt.c); got != tt.want {
				t.Errorf("EndpointReady(%+v) = %v, want %v", tt.c, got, tt.want)
			}
		})
	}
}
