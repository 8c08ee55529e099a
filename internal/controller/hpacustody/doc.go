// Package hpacustody holds the last step to zero of the HPA an ElastiService
// names (docs/hpa.md).
//
// An autoscaling/v2 HPA with minReplicas 0 and Object or External metrics
// scales its target to zero by itself (Kubernetes 1.37 and later). Taken by
// the HPA, that step loses requests: the Service has no endpoint left, and
// the proxy slice is written only once Elasti notices. So when the HPA an
// ElastiService names has minReplicas 0, the operator holds its floor at 1
// (recording the owner's 0 in contract.AnnotationHPAMinReplicas) and takes
// the last step itself, proxy first, when the HPA's own metrics read zero.
// The HPA still scales 1 -> N and back; a wake is Elasti's, as always. The
// custody ends when the owner raises the floor to 2 or more (their floor
// stands), and the floor goes back to 0 when the ElastiService is deleted or
// stops naming the HPA.
//
// The decisions are pure: custodyStep says what to do with an HPA
// (step.go), MetricsVerdict what its readings say about the target
// (verdict.go), and Observed.SaysIdle and Observed.IdleVerdict what they
// say together with the triggers (observed.go). Custody (custody.go) is the
// one place that writes to HPAs: the reconciler calls Sync before observe
// and Release when an ElastiService is deleted, and maps HPA events to
// ElastiServices with Map and Changed (watch.go). Its writes go through a
// FloorControl (internal/scaling's Autoscalers), and its Events (reasons.go)
// land on the ElastiService.
package hpacustody
