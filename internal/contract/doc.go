// Package contract holds what the operator, the resolver and the kubectl
// plugin must agree on: labels, annotations, condition reasons, ports,
// headers and API paths, and the rules both planes apply (when an endpoint
// is ready, which Service ports the resolver carries, the port range). It
// imports nothing else from the project, and besides the standard library
// only the Kubernetes API types its rules read (core/v1, discovery/v1), so
// they can agree on them without importing each other.
package contract
