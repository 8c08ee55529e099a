// Package controller is the ElastiService reconciler: it moves a Service
// between serve mode (traffic goes straight to the target's pods) and proxy
// mode (a proxy EndpointSlice sends it to the resolvers), scales the target to
// zero when its triggers have been idle for the cooldown, wakes it on demand,
// and restores everything when an ElastiService goes away.
//
// A reconcile reads the world (observe), computes a plan with the pure
// function decide, then carries the plan out in DESIGN.md's order. The
// objects it writes come from pure builders (proxySlices, desiredStatus).
// Everything durable lives in the API server, so a new leader re-derives the
// state; in-memory bookkeeping (grace timers, in-flight port reservations,
// pending activation calls) only speeds things up and is safe to lose.
package controller
