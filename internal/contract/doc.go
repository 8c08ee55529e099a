// Package contract holds the names the operator, the resolver and the kubectl
// plugin share: labels, annotations, condition reasons, ports, headers and
// API paths. It imports nothing else from the project, so they can agree on
// them without importing each other.
package contract
