// Package proxyslices owns the proxy EndpointSlices, through which a
// Service in proxy mode sends its traffic to the resolvers. Build is the
// pure builder: one slice per address family the ready resolvers have
// (ReadyResolvers picks them from the resolver pods), one port per carried
// Service port, numbered with the resolver port the ElastiService was
// allocated. Ensure is the one place that writes them: it makes the slices
// an ElastiService owns exactly what Build asked for, and Remove deletes
// them all.
//
// It also answers the question the way back turns on: does the Service's
// own EndpointSlice (not Elasti's) list a ready endpoint yet (OwnReady,
// ServiceReady, EndpointReady)? The caller decides when each write happens
// (docs/architecture.md, "The order of the writes"); this package never
// imports internal/controller.
package proxyslices
