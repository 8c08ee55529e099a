// Package observability tests Elasti's monitoring assets against the code:
// the Grafana dashboard (config/grafana) and the Prometheus alerts
// (config/prometheus) must be well-formed, reference only metrics the
// operator and the resolver export, and the dashboard must show every one
// of them. There is no PromQL parser in the module graph, so expressions are
// checked by a small lexer (promql_test.go) instead.
package observability
