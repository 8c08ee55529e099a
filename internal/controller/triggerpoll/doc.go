// Package triggerpoll evaluates ElastiServices' triggers outside the
// reconcile workers (docs/architecture.md, "Triggers off the reconcile
// path"). A reconcile asks for the latest result (Poller.Result) and never
// waits for a metrics backend: the evaluation runs on one of a fixed number
// of the poller's own workers, bounded by its own timeout, and its result
// comes back as an event that reconciles the ElastiService again. A slow
// backend delays only the ElastiServices that read it; a wake, which needs
// no trigger, never waits behind an evaluation.
package triggerpoll
