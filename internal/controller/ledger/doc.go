// Package ledger keeps status.ledger (docs/ledger.md): the periods an
// ElastiService's target spent at zero, what they did not reserve, and the
// phases of the last cold start. Next computes the ledger a status write
// records from the status before, the status about to be written and what
// observe read (Observed); Record moves the ledger's metrics by what that
// write added, so they agree with the status and a new leader neither
// repeats nor loses a period.
//
// It writes nothing. Observe reads the woken pods through a PodLister
// while a cold start is pending; one replica's requests come from the
// caller's pod-template cache (TemplateRequests reads them from a target).
package ledger
