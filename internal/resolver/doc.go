// Package resolver is Elasti's data plane: the proxy that receives a Service's
// traffic while its workload is at zero, holds it, asks the operator to wake
// the workload, and forwards it to a ready pod.
//
// Identity is port-mapped. The resolver pre-opens a range of local ports and
// learns from each ElastiService's status.proxyPorts which (Service, port)
// a local port stands for. A port only ever leads to its own Service: there is
// no Host-header routing, so the resolver cannot be used as an open proxy.
//
// This package builds the parts and owns their lifecycle; each part is a
// package with one job (docs/architecture.md#inside-the-resolver has the
// map):
//   - route: what a port leads to (Target, from the ElastiService), the
//     Route of a connection and the Release the hold adds to a request;
//   - endpoints: the ready endpoints of each Service, from its own
//     EndpointSlices, with an event at each change;
//   - ports: the pre-opened listeners, the PortMap fed by the ElastiService
//     informer (ports.Watch), and the watches of the mapped Services' slices;
//   - hold: whether a request goes through now, and the event-driven hold
//     until it can (queue bound, activation, fallback, release pace);
//   - park: where a held bodiless HTTP/1.x request waits without its
//     handler, the watches of held clients, and the hand-off of connections
//     to the L7 server; Parker.Enter is the one entry into the hold;
//   - upstream: the dial to a ready endpoint, the reverse proxy and the TCP
//     splice;
//   - handler: the L7 handler chain, one type per handler, built in one
//     place (handler.Chain), and the server that runs it.
//
// A connection's way through: the listeners hand it, with its port, to
// Resolver.handleConn (resolver.go), which looks the port up in the PortMap
// and dispatches by the Target's Layer: L7 connections go to the one
// http.Server through a park.ConnListener (or, while the target cannot
// serve, are read first to park their request on arrival), L4 ones to
// upstream.TCP, unmapped ones are refused.
//
// Here too: Start, Ready, Drain (resolver.go), the admin endpoints
// (admin.go), the options and their defaults (options.go), the metrics and
// the label values the parts' Recorders map to (metrics.go), and the return
// of a burst's memory to the OS once the hold queue has drained
// (memreturn.go).
package resolver
