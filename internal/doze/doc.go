// Package doze is the pure part of sleepMode Doze (spec.sleepMode,
// docs/architecture.md "Doze"): instead of scaling the target to zero,
// the operator lowers the requests of its pods in place, through the
// pods/resize subresource, and a wake writes them back.
//
// From a pod and the floor it computes the resize patch and the record a
// wake needs (Shrink), the patch that undoes it (Restore), how far a
// resize has got from what the kubelet reports in the pod's status
// (Progress), and which recorded containers restarted since (Restarted).
// Check says why a pod template cannot doze; admission refuses such an
// ElastiService with its words, and the operator refuses a live pod with
// the same rules, so the two never disagree. Nothing here reads or writes
// the API.
//
// The package sits beside sleepgate rather than under internal/controller
// because admission calls it too, and admission never imports the
// operator's packages.
package doze
