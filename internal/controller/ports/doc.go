// Package ports allocates the resolver ports of ElastiServices: one port of
// the configured range per Service port the resolver carries
// (contract.ResolverCarries). It decides which port an ElastiService gets
// and keeps (Allocator.Allocate; on a clash the older ElastiService keeps
// it), when a freed port may be handed out again (the quarantine,
// quarantine.go, fed by the ElastiService informer through StatusHandler),
// and which ElastiServices waiting for a port to reconcile again (Events).
//
// The durable record of who holds a port is every ElastiService's
// status.proxyPorts, which the reconciler writes and the allocator reads
// back through the cache (CacheHolders, CacheInUse). The quarantine is kept
// in memory and, when a QuarantineRecord is set, in a ConfigMap that a new
// operator reads before it hands out a port (record.go). Reservations not
// yet in the cache and the cursor only keep ports apart sooner; see
// docs/architecture.md.
package ports
