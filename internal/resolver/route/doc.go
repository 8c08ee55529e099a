// Package route names what a resolver port leads to and what travels with
// a request: the Target an ElastiService's status.proxyPorts gives a port,
// with what its spec.proxy says (spec.go); the Route a connection's port
// leads to, fixed for the connection; and the Release the hold adds to a
// request it lets through, which the dial reads (route.go). It decides
// which layer a port is handled at (Target.Layer) and nothing else.
package route
