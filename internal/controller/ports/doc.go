// Package ports allocates the resolver ports of ElastiServices: one port of
// the configured range per Service port the resolver carries
// (contract.ResolverCarries). It decides which port an ElastiService gets
// and keeps (Allocator.Allocate; on a clash the older ElastiService keeps
// it), when a freed port may be handed out again (the quarantine,
// quarantine.go, fed by the ElastiService informer through StatusHandler),
// and which ElastiServices waiting for a port to reconcile again (Events).
//
// It writes nothing to the API server: the durable record is every
// ElastiService's status.proxyPorts, which the reconciler writes and the
// allocator reads back through the cache (CacheHolders, CacheInUse). What it
// keeps in memory (reservations not yet in the cache, the quarantine, the
// cursor) only keeps ports apart sooner; see docs/architecture.md.
package ports
