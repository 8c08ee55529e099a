// Package wakeprogress derives status.wakeProgress: how far a wake from
// zero has got (Scaling, Scheduling, PullingImage, Starting, Ready), for the
// resolvers' waking page. Observe reads the phase from the target's pods,
// which the caller lists once per reconcile, and from their Events, listed
// live through a Lister; Next computes the status fragment from the status
// about to be written and that observation; Recheck says how soon a
// reconcile comes back while the wake is short of Ready.
//
// It writes nothing. Package fallback reads pods and Events the same way
// and shares its helpers: WokenCandidates, EventTime, ColdStartBegan,
// TruncateMessage and MsgPodsNotCreated.
package wakeprogress
