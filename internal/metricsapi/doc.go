// Package metricsapi serves Elasti's own metrics to the
// HorizontalPodAutoscaler as external.metrics.k8s.io, through the
// aggregation layer, so that an HPA at minReplicas 0 can scale on requests
// Elasti holds and forwards without Prometheus or an adapter (issue 46;
// the research is docs/research/hpa-metrics-source.md).
//
// Work in progress: the server and the provider over a Source exist; the
// Source over the operator's state, the APIService, its certificate and
// the HPA's relation to custody do not yet.
package metricsapi
