// Package resolver is Elasti's data plane: the proxy that receives a Service's
// traffic while its workload is at zero, holds it, asks the operator to wake
// the workload, and forwards it to a ready pod.
//
// Identity is port-mapped. The resolver pre-opens a range of local ports and
// learns from each ElastiService's status.proxyPorts which (Service, port)
// a local port stands for. A port only ever leads to its own Service: there is
// no Host-header routing, so the resolver cannot be used as an open proxy.
//
// A connection's way through, file by file:
//   - listeners.go: listenerSet pre-opens the port range and runs one accept
//     loop per port; it hands every connection, with its port, to the
//     Resolver and decides nothing itself;
//   - resolver.go: Resolver.handleConn looks the port up in the PortMap
//     (portmap.go) and dispatches by the Target's Layer (target.go): L7
//     connections go to the one http.Server through connListener
//     (connlistener.go), L4 ones to serveTCP, unmapped ones are refused;
//   - handler.go: the L7 server and its handler chain, built in one place;
//     context.go: the route each L7 request carries through its context;
//   - staticresponse.go: requests that a rule of spec.proxy.staticResponses
//     matches (health checks, uptime monitors) are answered there, before
//     the hold: they never wake the target nor count as traffic;
//   - wakingpage.go: with spec.proxy.wakingPage, a browser's page load
//     while the target has no ready endpoint is answered there with a page
//     that reloads itself (wakingpagehtml.go; accept.go reads the Accept
//     header); it wakes the target like a held request, but is not held;
//   - holdqueue.go: holding, shared by both layers: the per-ElastiService
//     HoldQueue bound and the event-driven wait for a ready endpoint
//     (Endpoints, endpoints.go), which starts activation (waker.go) and
//     watches the held client: a client that leaves is never forwarded.
//     Traffic let through at once, to a target already ready, is reported
//     to the operator instead (traffic.go), throttled and asynchronous;
//     heldbody.go (HTTP/1.x bodies) and heldConn in tcp.go read ahead,
//     bounded, because reading is how a departure shows;
//   - proxy.go (L7) and tcp.go (L4): forwarding once released (an L7
//     answer after a cold start says how long it took), both dialing
//     through the dialer (dialer.go), which picks a ready endpoint and
//     retries refused dials.
//
// Resolver also owns the lifecycle: Start, Ready, Drain (resolver.go), the
// admin endpoints (admin.go) and the informers that feed PortMap and
// Endpoints (informers.go): one on ElastiServices, and one per Service the
// PortMap carries on that Service's own EndpointSlices (slicewatch.go).
package resolver
