package controller

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/controller/dozer"
	"elasti.dev/elasti/internal/controller/plan"
	"elasti.dev/elasti/internal/doze"
)

// observeDoze reads a sleepMode Doze target's pods while they doze, and
// while a scale-down that may end in a doze runs; nothing otherwise, so a
// target that never dozes costs no pod list.
func (r *Reconciler) observeDoze(ctx context.Context, es *elastiv1alpha1.ElastiService, o plan.Observed) (plan.DozeObserved, dozer.Target) {
	d := plan.DozeObserved{
		On:     es.Spec.SleepMode == elastiv1alpha1.SleepModeDoze && es.Spec.Doze != nil,
		Dozing: es.Status.Doze != nil,
	}
	mayDoze := d.On && o.Phase == plan.PhaseScalingDown
	if r.dozer == nil || !o.Target.Found || !d.Dozing && !mayDoze {
		return d, dozer.Target{}
	}
	t, err := r.dozer.Read(ctx, es)
	if err != nil {
		d.Err = err
		ctrl.LoggerFrom(ctx).V(1).Info("cannot read the dozing target's pods", "error", err.Error())
		return d, t
	}
	d.Report = dozer.Observe(t, es.Status.Doze)
	return d, t
}

// doze lowers the requests of the target's pods to spec.doze's floor. The
// records go into the status first, as this reconcile's one status write,
// and the resizes follow: a doze cut short between the two is still
// known, and a wake writes back what it had resized (docs/architecture.md,
// "Doze"). Over dozing pods it only adds the pods that appeared since and
// drops those gone, writing nothing when nothing changed. A target whose
// pods cannot doze gets doze.ErrRefused, and the caller scales it to zero
// instead. It returns nil when it did nothing.
func (r *Reconciler) doze(ctx context.Context, es *elastiv1alpha1.ElastiService, o plan.Observed, l listed, p plan.Plan, fx plan.Effects) (*elastiv1alpha1.DozeStatus, error) {
	if es.Spec.Doze == nil {
		// sleepMode changed while dozing: the pods dozing stay so until
		// the wake, and none is added.
		return nil, nil
	}
	if err := o.Doze.Err; err != nil {
		if errors.Is(err, dozer.ErrUnsupportedTarget) {
			return nil, fmt.Errorf("%w: %w", doze.ErrRefused, err)
		}
		return nil, err
	}
	st := &elastiv1alpha1.DozeStatus{Since: metav1.NewTime(o.Now), TemplateHash: l.doze.TemplateHash}
	var prev []elastiv1alpha1.DozedPod
	if cur := es.Status.Doze; cur != nil {
		prev, st.Since = cur.Pods, cur.Since
		if cur.TemplateHash != "" {
			st.TemplateHash = cur.TemplateHash
		}
	}
	rs, err := dozer.Plan(l.doze.Pods, *es.Spec.Doze, prev)
	if err != nil {
		return nil, err
	}
	if len(rs.Records) == 0 && !o.Doze.Dozing {
		return nil, fmt.Errorf("%w: no pod of %s %s requests more than the floor", doze.ErrRefused, es.Spec.ScaleTargetRef.Kind, es.Spec.ScaleTargetRef.Name)
	}
	st.Pods = append([]elastiv1alpha1.DozedPod(nil), rs.Records...)
	fx.Dozed, fx.Recorded = st, true
	if err := r.writeStatus(ctx, es, o, p, fx); err != nil {
		return nil, err
	}
	if err := r.dozer.Apply(ctx, &rs); err != nil {
		return st, err
	}
	if !o.Doze.Dozing {
		ctrl.LoggerFrom(ctx).Info("target dozing", "pods", len(st.Pods))
		r.recorder.Eventf(es, nil, corev1.EventTypeNormal, EventDozed, "Doze", "lowered the requests of %d pods of %s %s to the floor (cpu %s%s); limits kept",
			len(st.Pods), es.Spec.ScaleTargetRef.Kind, es.Spec.ScaleTargetRef.Name, es.Spec.Doze.CPU.String(), memoryFloor(es.Spec.Doze))
	}
	return st, nil
}

// undoze writes the requests recorded in status.doze back on the target's
// pods. A pod whose node has no room left is reported and left dozing,
// still serving at the floor; the others wake.
func (r *Reconciler) undoze(ctx context.Context, es *elastiv1alpha1.ElastiService, l listed) error {
	if es.Status.Doze == nil {
		return nil
	}
	err := r.dozer.Restore(ctx, l.doze.Pods, es.Status.Doze.Pods)
	if errors.Is(err, dozer.ErrNoRoom) {
		ctrl.LoggerFrom(ctx).Info("a dozing pod cannot get its requests back", "reason", err.Error())
		r.recorder.Eventf(es, nil, corev1.EventTypeWarning, EventDozeWakeRefused, "Wake", "%v", err)
		return nil
	}
	return err
}

// reportWoke says that a dozing target's wake is over, once the status no
// longer records the doze: a status write that conflicted is retried with
// a reconcile that sees the doze over again, and says it only then.
func (r *Reconciler) reportWoke(es *elastiv1alpha1.ElastiService, dozed []elastiv1alpha1.DozedPod) {
	r.recorder.Eventf(es, nil, corev1.EventTypeNormal, EventDozeWoke, "Wake", "the %d dozing pods of %s %s have their requests back",
		len(dozed), es.Spec.ScaleTargetRef.Kind, es.Spec.ScaleTargetRef.Name)
}

// restoreDozing writes back the requests of a dozing target's pods when
// its ElastiService is deleted: the workload is left as it was before.
func (r *Reconciler) restoreDozing(ctx context.Context, es *elastiv1alpha1.ElastiService) error {
	if es.Status.Doze == nil || r.dozer == nil {
		return nil
	}
	t, err := r.dozer.Read(ctx, es)
	if err != nil {
		// A target gone or of another kind has no dozing pod left.
		ctrl.LoggerFrom(ctx).V(1).Info("cannot read the dozing target's pods at deletion", "error", err.Error())
		return nil
	}
	if err := r.dozer.Restore(ctx, t.Pods, es.Status.Doze.Pods); err != nil && !errors.Is(err, dozer.ErrNoRoom) {
		return err
	}
	return nil
}

func memoryFloor(d *elastiv1alpha1.DozeSpec) string {
	if d.Memory == nil {
		return ""
	}
	return ", memory " + d.Memory.String()
}
