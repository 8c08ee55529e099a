package estest

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// Option adjusts the ElastiService that New builds.
type Option func(*elastiv1alpha1.ElastiService)

// New returns ElastiService ns/name for the Service of the same name
// and the Deployment of the same name, with the API's defaults for the rest
// (one replica when awake, a 900 s cooldown) and no trigger, so it never
// sleeps on its own. The options adjust it, in order.
func New(ns, name string, opts ...Option) *elastiv1alpha1.ElastiService {
	es := &elastiv1alpha1.ElastiService{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: elastiv1alpha1.ElastiServiceSpec{
			Service:           name,
			ScaleTargetRef:    elastiv1alpha1.ScaleTargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
			MinTargetReplicas: 1,
			CooldownPeriod:    900,
		},
	}
	for _, o := range opts {
		o(es)
	}
	return es
}

// Service fronts Service svc instead.
func Service(svc string) Option {
	return func(es *elastiv1alpha1.ElastiService) { es.Spec.Service = svc }
}

// Deployment scales the Deployment name instead.
func Deployment(name string) Option {
	return func(es *elastiv1alpha1.ElastiService) {
		es.Spec.ScaleTargetRef = elastiv1alpha1.ScaleTargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: name}
	}
}

// Cooldown sets the cooldown. Through the API server, 0 is omitted and so
// defaulted to 900.
func Cooldown(seconds int32) Option {
	return func(es *elastiv1alpha1.ElastiService) { es.Spec.CooldownPeriod = seconds }
}

// PodMetrics adds a podMetrics trigger: idle while the rate of counter
// metric, scraped from the target's ready pods at port, reads below
// threshold.
func PodMetrics(metric string, port int32, threshold string) Option {
	return func(es *elastiv1alpha1.ElastiService) {
		th := elastiv1alpha1.Threshold(threshold)
		es.Spec.Triggers = append(es.Spec.Triggers, elastiv1alpha1.ScaleTrigger{
			Type:     elastiv1alpha1.TriggerTypePodMetrics,
			Metadata: elastiv1alpha1.TriggerMetadata{MetricName: metric, Port: port, Threshold: &th},
		})
	}
}

// HPA names the HorizontalPodAutoscaler name as the ElastiService's
// autoscaler.
func HPA(name string) Option {
	return func(es *elastiv1alpha1.ElastiService) {
		es.Spec.Autoscaler = &elastiv1alpha1.AutoscalerRef{Type: elastiv1alpha1.AutoscalerHPA, Name: name}
	}
}

// Prometheus adds a Prometheus trigger: idle while query reads below
// threshold on the server at serverAddress.
func Prometheus(serverAddress, query, threshold string) Option {
	return func(es *elastiv1alpha1.ElastiService) {
		th := elastiv1alpha1.Threshold(threshold)
		es.Spec.Triggers = append(es.Spec.Triggers, elastiv1alpha1.ScaleTrigger{
			Type:     elastiv1alpha1.TriggerTypePrometheus,
			Metadata: elastiv1alpha1.TriggerMetadata{ServerAddress: serverAddress, Query: query, Threshold: &th},
		})
	}
}

// MaxHeld caps the requests the resolvers hold for it while it wakes.
func MaxHeld(n int32) Option {
	return func(es *elastiv1alpha1.ElastiService) {
		if es.Spec.Proxy == nil {
			es.Spec.Proxy = &elastiv1alpha1.ProxySpec{}
		}
		es.Spec.Proxy.MaxHeldRequests = n
	}
}

// Annotation sets an annotation.
func Annotation(key, value string) Option {
	return func(es *elastiv1alpha1.ElastiService) {
		if es.Annotations == nil {
			es.Annotations = map[string]string{}
		}
		es.Annotations[key] = value
	}
}

// Created sets the creation time and generation, as the API server would
// have.
func Created(at time.Time, generation int64) Option {
	return func(es *elastiv1alpha1.ElastiService) {
		es.CreationTimestamp = metav1.NewTime(at)
		es.Generation = generation
	}
}

// ProxyPorts sets status.proxyPorts, as the operator writes it.
func ProxyPorts(ports ...elastiv1alpha1.ProxyPort) Option {
	return func(es *elastiv1alpha1.ElastiService) { es.Status.ProxyPorts = ports }
}
