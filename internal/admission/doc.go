// Package admission is the operator's validating admission webhook for
// ElastiServices, and the upkeep of the certificate it serves with.
//
// Most of an ElastiService is checked by the CRD's CEL rules and the
// trigger-threshold ValidatingAdmissionPolicy. This webhook refuses what CEL
// cannot decide because the answer is a Go parser's: a schedule the
// operator's cron parser rejects (minute 61, a range 5-1) in
// spec.enabledPeriod or spec.preWarm, a time zone its embedded database
// does not know, a duration too long for time.ParseDuration, a threshold beyond float64, a
// header net/http would not send. Each check calls the function the
// operator itself uses at run time, so admission and run time cannot
// disagree. It checks CREATE, and UPDATE only when the spec changed, so
// that finalizer and label updates of objects stored before a check existed
// are never blocked.
//
// A sleepMode Doze is checked against the target's pod template, read
// live (doze.go): a BestEffort or Guaranteed target, or a floor above a
// container's request, is refused with package doze's words, the rules
// the operator holds each pod to before it resizes it.
//
// It also refuses an ElastiService whose author may not do what it makes
// the operator do (access.go): a SubjectAccessReview in the author's name
// for each effect of the spec.
//
// There is no cert-manager to rely on. Every operator replica runs
// cert-controller's rotator, which keeps a CA and a serving certificate in
// one Secret of the operator's namespace (renewing them before they expire)
// and writes the CA into the ValidatingWebhookConfiguration's caBundle.
// certFiles copies the serving pair from that Secret into the directory the
// webhook server reads, without waiting for the kubelet to refresh a
// mounted Secret. The webhook server starts, and the replica reports ready,
// only once the certificate is in place and the CA injected.
package admission
