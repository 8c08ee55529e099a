// Package scalingtest holds test support for the operator's packages: real
// CRD files taken from the Go modules of KEDA and Argo Rollouts, and a real
// Prometheus server scraping a loopback exporter. It is imported only by
// tests.
package scalingtest
