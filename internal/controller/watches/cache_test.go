package watches

import (
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"elasti.dev/elasti/internal/controller/proxyslices"
)

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
	if len(s.Endpoints) != 1 || s.Endpoints[0].Addresses[0] != "2" || s.Endpoints[0].Hostname != nil || !proxyslices.OwnReady([]discoveryv1.EndpointSlice{*s}) {
		t.Errorf("trimmed %+v", s.Endpoints)
	}
	if other, _ := trimEndpointSlice("tombstone"); other != "tombstone" {
		t.Error("unknown types must pass through")
	}
}
