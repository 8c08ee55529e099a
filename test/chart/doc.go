// Package chart tests the Helm chart in charts/elasti against the rest of
// the repository without running helm: the copies the chart carries (CRDs,
// RBAC rules, the admission policy, the alerts, the dashboard) must equal
// their sources, and the templates may pass only flags the binaries define.
// `make helm-verify` lints and renders the chart itself.
package chart
