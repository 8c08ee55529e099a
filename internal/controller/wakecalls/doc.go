// Package wakecalls carries activation calls, a resolver's "wake this
// ElastiService" (internal/activation), to the reconcile that performs the
// wake. Waker is what the activation server calls: on the elected leader it
// registers the call with Requests, where concurrent calls for one
// ElastiService join one pending wake, enqueues its reconcile (Events) and
// waits for the answer; on any other replica it forwards the call by
// setting the elasti.dev/wake-now annotation, marked as an activation
// (Forwarded), which the leader's watch picks up.
//
// The reconciler reads Pending and Forwarded as traffic a resolver saw, and
// once its status write records the wake it calls Answer with the
// reconcile's Outcome: the calls get the target's replicas, or
// ErrCannotWake when the target cannot be read, and the wake-now
// annotation is removed. Complete answers the calls of a wake that is not
// coming (the ElastiService is gone or stands down).
//
// Unlike the other packages under internal/controller it writes to the API
// server: that annotation, set on a follower and removed by Answer. The
// pending calls live in the leader's memory, beside the calls' own
// connections, and go with it; a forwarded call is durable in the
// annotation.
package wakecalls
