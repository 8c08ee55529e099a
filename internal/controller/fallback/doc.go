// Package fallback derives the FallbackActive condition (spec.proxy.fallback),
// which tells the resolvers to send held and new requests to the fallback
// Service while a wake cannot bring the target up: its pods cannot be
// scheduled (PodsUnschedulable), the workload controller cannot create them
// (PodsNotCreated), the API server refused the wake's scale write
// (ScaleRefused), or fallback.after has passed (DeadlinePassed).
//
// The decision is pure: SetCondition writes the condition a status records
// from what was observed (Observed) and Recheck says how soon a reconcile
// comes back; Announce turns a change of the condition into its Event. A
// Tracker, which the operator keeps one of, does the reading: Observe reads
// the fallback Service and its slices through a Reader, NotCreated asks the
// target's object (a CreationReader) and its Events (a Lister) why no pod
// of the wake exists. The target's pods come from the caller, which lists
// them once per reconcile for this package and package wakeprogress; the pod
// and Event helpers are wakeprogress's.
//
// It writes one thing itself: when a wake's scale write is refused
// (ReportRefusedWake), the Tracker remembers the refusal in memory until a
// wake goes through (Woke), and writes the condition at once, with its
// Event, so that the resolvers stop holding before the retried wake.
package fallback
