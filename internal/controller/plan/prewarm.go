package plan

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/scaling"
)

// PreWarmFiring reads spec.preWarm at now. due is the firing this reconcile
// acts on, zero when none: the latest firing that is less than
// scaling.PreWarmLateness late, later than status.lastPreWarmTime (a firing
// is acted on once) and not before the ElastiService was created (earlier
// firings are not its own); recorded is the last firing this process
// recorded, in case the cache lags behind that write. next is the first firing after now, for the
// requeue; zero without a pre-warm.
//
// A due firing is a wake request, as an activation call is (observe folds
// it into Demand.Wake), so it wakes the target through the same plan and
// in the same order; the cooldown then counts from that wake. A preWarm
// that cannot be read never fires: admission refuses one, so only an object
// stored before the webhook can hold it, and the reconcile logs it.
func PreWarmFiring(ctx context.Context, es *elastiv1alpha1.ElastiService, now, recorded time.Time) (due, next time.Time) {
	if es.Spec.PreWarm == nil {
		return time.Time{}, time.Time{}
	}
	pw, err := scaling.ParsePreWarm(*es.Spec.PreWarm)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "spec.preWarm cannot be read; it never fires")
		return time.Time{}, time.Time{}
	}
	handled := es.CreationTimestamp.Time
	if t := es.Status.LastPreWarmTime; t != nil && t.After(handled) {
		handled = t.Time
	}
	if recorded.After(handled) {
		handled = recorded
	}
	return pw.Due(now, handled)
}
