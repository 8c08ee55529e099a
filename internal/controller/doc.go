// Package controller is the ElastiService reconciler: it moves a Service
// between serve mode (traffic goes straight to the target's pods) and proxy
// mode (a proxy EndpointSlice sends it to the resolvers), scales the target to
// zero when its triggers have been idle for the cooldown, wakes it on demand,
// and restores everything when an ElastiService goes away.
//
// A reconcile (reconciler.go) reads the world (observe, observe.go), computes
// a plan with the pure function decide (modes.go), then carries the plan out
// in the order of docs/architecture.md, "The order of the writes" (execute),
// and records it (writeStatus, status.go).
// Each concern keeps its writes beside the pure builder they apply: the
// proxy slices in endpointslices.go (proxySlices, ensureSlices), the status
// in status.go (desiredStatus, writeStatus), the scale target in scaling.go
// (wake, sleep, restore, the managed-target annotation, the grace timers),
// deletion in deletion.go (finalizer, finalize, forget), activation calls in
// wake.go, and the custody of an HPA's last step to zero in hpa.go
// (custodyStep and hpaMetricsVerdict beside syncHPA and letGoHPA, which
// write the HPA). observe lists the resolver pods once and hands that list
// to execute, so the proxy slices list the resolvers decide counted.
//
// Concerns with pure inputs and outputs are packages of their own, which
// this package imports and which never import it (docs/architecture.md,
// "Inside the operator"): ports (the resolver port allocator and the
// quarantine of freed ports), ledger (status.ledger and its metrics) and
// wakeprogress (status.wakeProgress). None writes to the API server; what
// they compute reaches it through this package's status writes (status.go).
//
// Everything durable lives in the API server, so a new leader re-derives the
// state; in-memory bookkeeping (grace timers, in-flight port reservations,
// pending activation calls) only speeds things up and is safe to lose. The
// one exception is the port quarantine: every replica keeps it from the
// ElastiService watch, but a replica started after a port was freed cannot
// know of it, and only the allocation cursor then keeps that port back.
package controller
