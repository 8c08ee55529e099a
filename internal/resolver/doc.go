// Package resolver is Elasti's data plane: the proxy that receives a Service's
// traffic while its workload is at zero, holds it, asks the operator to wake
// the workload, and forwards it to a ready pod.
//
// Identity is port-mapped. The resolver pre-opens a range of local ports and
// learns from each ElastiService's status.proxyPorts which (Service, port)
// a local port stands for. A port only ever leads to its own Service: there is
// no Host-header routing, so the resolver cannot be used as an open proxy.
//
// The pieces, one per file:
//   - PortMap: local port -> Target, fed by the ElastiService informer;
//   - Endpoints: each Service's ready endpoints from its own EndpointSlices,
//     with a change signal that wakes held requests;
//   - HoldQueue: the per-ElastiService bound on held requests;
//   - waker: one deduplicated, retried activation call per ElastiService;
//   - dialer: dials a ready endpoint, retrying refused dials;
//   - listenerSet: the pre-opened listeners and the per-connection dispatch to
//     L7 (HTTP/1.1, h2c, gRPC, WebSocket) or L4 (TCP splice);
//   - Resolver: ties them together, serves, drains.
package resolver
