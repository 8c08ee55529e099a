// Package scalingtest holds test support for the operator's packages: a real
// Prometheus server scraping a loopback exporter, and a real
// Prometheus-compatible backend with tenants and authentication in front
// (VictoriaMetrics single-node behind vmauth, built by
// hack/victoriametrics.sh). It is imported only by tests. (The KEDA and Argo
// Rollouts CRDs that integration tests install come from internal/testenv.)
package scalingtest
