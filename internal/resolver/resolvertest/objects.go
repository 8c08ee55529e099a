package resolvertest

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/testenv/estest"
)

// BrowserAccept is the Accept header Firefox and Safari send when they load
// a page.
const BrowserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"

// Endpoint is one endpoint of a Slice, with its conditions as written (nil:
// not set).
type Endpoint struct {
	IP          string
	Ready       *bool
	Terminating *bool
}

// ReadyEP is an endpoint that says it is ready.
func ReadyEP(ip string) Endpoint { return Endpoint{IP: ip, Ready: ptr.To(true)} }

// Slice builds an EndpointSlice of Service svc in ns with one TCP port, as
// the EndpointSlice controller writes them.
func Slice(ns, name, svc, portName string, port int32, eps ...Endpoint) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: svc, contract.LabelManagedBy: "endpointslice-controller.k8s.io"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(portName), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, ep := range eps {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{ep.IP},
			Conditions: discoveryv1.EndpointConditions{Ready: ep.Ready, Terminating: ep.Terminating},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "pod-" + ep.IP},
		})
	}
	return s
}

// ElastiService is the fixture ElastiService for Service svc in proxy mode,
// with proxy settings and status.proxyPorts: all the resolver reads.
func ElastiService(ns, name, svc string, proxy *elastiv1alpha1.ProxySpec, ports ...elastiv1alpha1.ProxyPort) *elastiv1alpha1.ElastiService {
	es := estest.New(ns, name, estest.Service(svc), estest.ProxyPorts(ports...))
	es.Spec.Proxy = proxy
	es.Status.Mode = elastiv1alpha1.ModeProxy
	return es
}

// InMode returns es with status.mode set to mode.
func InMode(es *elastiv1alpha1.ElastiService, mode elastiv1alpha1.Mode) *elastiv1alpha1.ElastiService {
	es.Status.Mode = mode
	return es
}
