// Package estest builds the ElastiServices tests start from, the same way in
// every tier: unit tests, integration tests against internal/testenv, the
// end-to-end tests and the bench (through test/e2e). It imports only the
// API, so any test package can import it without a cycle. Only test code
// imports it.
package estest
