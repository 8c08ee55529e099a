package plan

import (
	"time"

	"elasti.dev/elasti/internal/controller/dozer"
	"elasti.dev/elasti/internal/scaling"
)

// DozeObserved is what sleepMode Doze needs (docs/architecture.md, "Doze").
// A dozing target keeps its pods, Ready, with their requests lowered: it
// is asleep though it has replicas, so the phase and the way back to
// serve read Dozing, not the replica count alone.
type DozeObserved struct {
	// On: spec.sleepMode is Doze, so a confirmed sleep dozes the target's
	// pods instead of scaling it to zero.
	On bool
	// Dozing: status.doze records pods whose requests were lowered, and
	// not yet all written back and applied. It is read from the status,
	// not from On, so a doze is undone even after sleepMode changed.
	Dozing bool
	// Report is what the target's pods say of the doze (package dozer),
	// read while Dozing.
	Report dozer.Report
	// Err says why the target's pods could not be read; the doze is then
	// neither changed nor ended this time.
	Err error
}

// dozeRecheck is how soon a reconcile looks at a dozing target's pods
// again while a wake writes their requests back: pods are not watched.
const dozeRecheck = time.Second

// wakeNeeded says whether what the pods report wakes a dozing target on
// its own: a restarted container runs at the dozing size from its start,
// where probes may fail it again; a changed template rolls out pods at
// full size beside the dozing ones; the kubelet's refusal of a doze leaves
// the pods as they were.
func (d DozeObserved) wakeNeeded() bool {
	r := d.Report
	return d.Dozing && d.Err == nil && (len(r.Restarted) > 0 || r.TemplateChanged || len(r.Infeasible) > 0)
}

// busy says whether the triggers, evaluated while dozing, report traffic:
// the dozing pods stay Ready, so kube-proxy sends part of the Service's
// new connections, and all of the kept-alive ones that were open at the
// doze, straight to them, where no resolver sees them. A trigger that
// cannot be evaluated, or whose evaluation is pending, wakes nothing, as
// at zero.
func (d DozeObserved) busy(triggers *scaling.Result) bool {
	return d.Dozing && triggers != nil && triggers.State == scaling.StateActive
}

// over says whether the wake of a dozing target is complete: every pod
// has its requests back, and the kubelet applied them.
func (d DozeObserved) over() bool {
	return d.Dozing && d.Err == nil && d.Report.Restored && d.Report.Done
}
