// Package controller is the ElastiService reconciler: it moves a Service
// between serve mode (traffic goes straight to the target's pods) and proxy
// mode (a proxy EndpointSlice sends it to the resolvers), scales the target to
// zero when its triggers have been idle for the cooldown, wakes it on demand,
// and restores everything when an ElastiService goes away.
//
// This package orchestrates; the concerns are packages under it, which it
// imports and which never import it (docs/architecture.md, "Inside the
// operator", has a table of what each decides, reads and writes). A
// reconcile (reconciler.go) makes the writes that must come first (the
// finalizer, the managed target, the HPA's custody), reads the world
// (observe, observe.go: reads only), makes the claims it needs in memory
// (claim, claim.go: resolver ports, the target kind's watch), plans with the
// pure function plan.Decide, carries the plan out in the order of
// docs/architecture.md, "The order of the writes" (execute), and writes the
// status once (writeStatus, status.go, from plan.DesiredStatus). Deletion
// (deletion.go) and a rival's stand-down (standdown.go) take their own
// paths. observe lists the resolver pods once and hands that list to
// execute, so the proxy slices list the resolvers decide counted.
//
// Everything durable lives in the API server, so a new leader re-derives the
// state; in-memory bookkeeping (grace timers, in-flight port reservations,
// pending activation calls, refused wakes) only speeds things up and is safe
// to lose. The one exception is the port quarantine: every replica keeps it
// from the ElastiService watch, but a replica started after a port was freed
// cannot know of it, and only the allocation cursor then keeps that port
// back.
package controller
