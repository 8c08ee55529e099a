// Package scaletarget writes the scale target an ElastiService names,
// through the /scale subresource, and what goes with it: Wake scales a
// target at zero up (unpausing KEDA first), Sleep scales it to zero from the
// replica count the reconcile observed and no other (pausing KEDA first),
// Restore brings a target Elasti may have put to sleep back up, and
// SyncManaged remembers in an annotation which target the ElastiService
// manages, restoring the old one when spec.scaleTargetRef changes. The
// reconciler decides when; Control only carries the writes out, in the order
// of docs/architecture.md, "The order of the writes".
package scaletarget
