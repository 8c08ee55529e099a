// Package contract holds the names both planes share: labels, annotations,
// ports, headers and API paths. It imports nothing else from the project, so
// the operator and the resolver can agree on them without importing each
// other.
package contract
