// Package sleepgate decides whether an ElastiService may sleep now, leaving
// aside its triggers and the data path: the gates set by its spec, its
// annotations and the clock.
//
// The gates form one ordered chain of small pure functions, as in
// cert-manager's trigger policy chain. The operator acts on the chain's
// Verdict and `kubectl elasti status` only words it, so the explanation a
// user reads is the decision the operator took. It sits in a package of its
// own because both import it and the plugin must not import the operator.
// The admission webhook (internal/admission) imports it too: ParseSchedule
// refuses exactly the schedules the enabledPeriod gate would hold as
// invalid.
package sleepgate
