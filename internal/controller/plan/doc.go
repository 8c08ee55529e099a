// Package plan is the pure heart of an ElastiService's reconcile: what was
// observed in, what to do and what the status says out.
//
// The reconciler's observe fills an Observed (the Service, the target, the
// resolvers, the demand for a wake, the sleep gates, the triggers, the HPA in
// custody, the grace period, and what the concern packages read for their
// parts of the status); CurrentPhase derives where the ElastiService is in
// its serve/proxy cycle (phase.go), NeedsTriggers tells observe whether the
// triggers are worth evaluating, and PreWarmFiring which spec.preWarm firing
// asks for a wake (prewarm.go). Decide (decide.go), the operator's state
// machine, turns an Observed into a Plan: whether to wake or sleep, whether
// the proxy slice should exist, the mode, the Active reason and when to
// come back. The reconciler carries the Plan out and reports what it did as
// Effects; DesiredStatus (status.go) builds the status from the three,
// with the condition reasons of reasons.go and the fragments of packages
// fallback, ledger and wakeprogress, and StatusChanged says whether it
// needs a write.
//
// It reads and writes nothing: the reconciler (package controller, which
// imports it and which it never imports) reads the world, executes the plan
// and writes the status, with its Events.
package plan
