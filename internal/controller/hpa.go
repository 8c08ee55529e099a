package controller

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/scaling"
)

// The custody of an HPA's last step.
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

// indexHPA indexes ElastiServices by the name of the HPA they name.
const indexHPA = "elasti.spec.autoscaler.hpa"

// Condition reasons of the custody.
const (
	// ReasonHPAMetricsUnavailable (TriggersHealthy): the HPA in custody
	// does not report a reading for each of its metrics, so it cannot say
	// the target is idle.
	ReasonHPAMetricsUnavailable = "HPAMetricsUnavailable"
	// ReasonHPAFloorNotRaised (Idle): the HPA could take the target to zero
	// itself and its floor could not be raised, so the target is kept awake.
	ReasonHPAFloorNotRaised = "HPAFloorNotRaised"
)

// hpaFloorControl raises and restores the floor of an HPA in custody.
type hpaFloorControl interface {
	HoldHPAFloor(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, custodian string) error
	ReleaseHPAFloor(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, restore bool) error
}

// heldFloor is the minReplicas of an HPA in custody.
const heldFloor int32 = 1

// hpaObserved is what decide learns about the HPA spec.autoscaler names.
type hpaObserved struct {
	// custody: Elasti holds the HPA's floor at 1, and the HPA's own
	// metrics join the triggers in saying whether the target is idle.
	custody bool
	// exposed: the HPA has minReplicas 0 and could take the target to zero
	// itself, and its floor could not be raised: the target is not put to
	// sleep, since the HPA could take the last step before the proxy is in
	// place.
	exposed bool
	// metrics is what the HPA's readings say, as a trigger would; nil when
	// observe did not read them (see needsTriggers).
	metrics *scaling.Result
}

// hpaHold is what syncHPA hands to observe.
type hpaHold struct {
	custody, exposed bool
	// hpa is the HPA read, when custody holds.
	hpa *autoscalingv2.HorizontalPodAutoscaler
}

// hpaStep is what syncHPA does to the HPA an ElastiService names.
type hpaStep int

const (
	// hpaLeave: not in custody, and none to take.
	hpaLeave hpaStep = iota
	// hpaKeep: in custody, nothing to write.
	hpaKeep
	// hpaRaise: take custody (or take it again after someone set the
	// floor back to 0): minReplicas 1 and the annotations.
	hpaRaise
	// hpaEnd: the owner set the floor to 2 or more; it stands and the
	// annotations go.
	hpaEnd
	// hpaRestore: the HPA can no longer be held (its metrics or its target
	// changed): the recorded floor comes back and the annotations go.
	hpaRestore
)

// custodyStep decides, from the HPA alone, what to do with it. custodian is
// the ElastiService that names it; eligible says whether the HPA can be held
// (custodyEligible).
func custodyStep(h *autoscalingv2.HorizontalPodAutoscaler, custodian string, eligible bool) hpaStep {
	floor := ptr.Deref(h.Spec.MinReplicas, 1)
	_, held := h.Annotations[contract.AnnotationHPAMinReplicas]
	switch {
	case held && floor > heldFloor:
		return hpaEnd
	case held && !eligible:
		return hpaRestore
	case held && (floor < heldFloor || h.Annotations[contract.AnnotationHPACustodian] != custodian):
		return hpaRaise
	case held:
		return hpaKeep
	case floor == 0 && eligible:
		return hpaRaise
	default:
		return hpaLeave
	}
}

// custodyEligible reports whether Elasti can hold the HPA's last step: it
// scales the ElastiService's target, and every metric is of type Object or
// External, the kinds whose readings can say zero and the only ones that let
// an HPA scale to zero. Any other metric (CPU, say) reads only while pods
// run, so the HPA's verdict would be incomplete; such an HPA is left to
// itself.
func custodyEligible(h *autoscalingv2.HorizontalPodAutoscaler, target elastiv1alpha1.ScaleTargetRef) bool {
	if !sameWorkload(h.Spec.ScaleTargetRef, target) || len(h.Spec.Metrics) == 0 {
		return false
	}
	for _, m := range h.Spec.Metrics {
		if m.Type != autoscalingv2.ObjectMetricSourceType && m.Type != autoscalingv2.ExternalMetricSourceType {
			return false
		}
	}
	return true
}

// sameWorkload compares an HPA's scale target with an ElastiService's by
// group, kind and name; the version may differ.
func sameWorkload(ref autoscalingv2.CrossVersionObjectReference, target elastiv1alpha1.ScaleTargetRef) bool {
	a, err1 := schema.ParseGroupVersion(ref.APIVersion)
	b, err2 := schema.ParseGroupVersion(target.APIVersion)
	return err1 == nil && err2 == nil && a.Group == b.Group && ref.Kind == target.Kind && ref.Name == target.Name
}

// hpaMetricsVerdict says what an HPA's own readings say about its target,
// as a trigger would: idle when status.currentMetrics holds one reading per
// spec.metrics entry, each of an Object or External metric, and every
// reading (value and averageValue, whichever is set) is zero; active when
// one is not zero; unhealthy when a reading is missing. Messages hold no
// measured value, so that they stay stable from one reading to the next.
//
// Zero readings are not taken for idle while they may predate the last
// wake (woke; zero for none): within hpaSettle of it, or while the HPA is
// not scaling (its ScalingActive condition False, as at a zero it did not
// cause) or resumed less than hpaSettle ago. Right after a wake the HPA
// still shows readings from before it, and its next syncs read metrics that
// the traffic which woke the target may not have reached yet (scrape
// interval, rate window). Taking those zeros for idle put the target back to
// sleep in the middle of a burst (TestHPAMinReplicasZeroWithElasti, e2e).
func hpaMetricsVerdict(h *autoscalingv2.HorizontalPodAutoscaler, now, woke time.Time) scaling.Result {
	spec, cur := h.Spec.Metrics, h.Status.CurrentMetrics
	if len(spec) == 0 || len(cur) != len(spec) {
		return scaling.Result{State: scaling.StateUnhealthy, Reason: ReasonHPAMetricsUnavailable,
			Message: fmt.Sprintf("HPA %s reports %d readings for its %d metrics", h.Name, len(cur), len(spec))}
	}
	for i, m := range spec {
		values, ok := currentValues(cur[i], m.Type)
		if !ok {
			return scaling.Result{State: scaling.StateUnhealthy, Reason: ReasonHPAMetricsUnavailable,
				Message: fmt.Sprintf("HPA %s reports no reading for metric %d (%s)", h.Name, i, metricName(m))}
		}
		for _, q := range values {
			if !q.IsZero() {
				return scaling.Result{State: scaling.StateActive, Value: q.AsApproximateFloat64(),
					Message: fmt.Sprintf("HPA %s: metric %d (%s) does not read zero", h.Name, i, metricName(m))}
			}
		}
	}
	if !woke.IsZero() && now.Sub(woke) < hpaSettle {
		return scaling.Result{State: scaling.StateActive,
			Message: fmt.Sprintf("HPA %s: woken less than %s ago, waiting for readings taken after the wake", h.Name, hpaSettle)}
	}
	for _, c := range h.Status.Conditions {
		if c.Type != autoscalingv2.ScalingActive {
			continue
		}
		if c.Status != corev1.ConditionTrue {
			return scaling.Result{State: scaling.StateActive,
				Message: fmt.Sprintf("HPA %s is not scaling (%s): its zero readings may be stale", h.Name, c.Reason)}
		}
		if since := now.Sub(c.LastTransitionTime.Time); since < hpaSettle {
			return scaling.Result{State: scaling.StateActive,
				Message: fmt.Sprintf("HPA %s resumed scaling less than %s ago: waiting for a reading taken after the wake", h.Name, hpaSettle)}
		}
	}
	return scaling.Result{State: scaling.StateIdle, Message: fmt.Sprintf("every metric of HPA %s reads zero", h.Name)}
}

// hpaSettle is how long after a wake, or after an HPA resumes scaling, its
// zero readings are not yet trusted to say idle: two syncs of the HPA
// controller (15 s each by default, --horizontal-pod-autoscaler-sync-period)
// and a scrape, so that the reading used was taken at a sync that came after
// the wake's traffic reached the metric.
const hpaSettle = 40 * time.Second

// currentValues returns the value and averageValue a reading holds, for a
// reading of the metric type want; false when it holds neither.
func currentValues(st autoscalingv2.MetricStatus, want autoscalingv2.MetricSourceType) ([]resource.Quantity, bool) {
	var cur *autoscalingv2.MetricValueStatus
	switch {
	case st.Type != want:
	case want == autoscalingv2.ObjectMetricSourceType && st.Object != nil:
		cur = &st.Object.Current
	case want == autoscalingv2.ExternalMetricSourceType && st.External != nil:
		cur = &st.External.Current
	}
	if cur == nil {
		return nil, false
	}
	var out []resource.Quantity
	for _, q := range []*resource.Quantity{cur.Value, cur.AverageValue} {
		if q != nil {
			out = append(out, *q)
		}
	}
	return out, len(out) > 0
}

func metricName(m autoscalingv2.MetricSpec) string {
	switch {
	case m.Object != nil:
		return "Object " + m.Object.Metric.Name
	case m.External != nil:
		return "External " + m.External.Metric.Name
	}
	return string(m.Type)
}

// saysIdle: every voice on whether the target is idle says so. The
// triggers, evaluated for this reconcile, speak; an HPA in custody speaks
// through its own metrics, beside them or, without triggers, alone. With
// neither, nothing ever says idle. An HPA that could take the last step
// itself vetoes.
func (o observed) saysIdle() bool {
	switch {
	case o.hpa.exposed:
		return false
	case o.hpa.custody && !isIdle(o.hpa.metrics):
		return false
	case o.noTriggers:
		return o.hpa.custody
	default:
		return isIdle(o.triggers)
	}
}

func isIdle(r *scaling.Result) bool { return r != nil && r.State == scaling.StateIdle }

// idleVerdict is what the triggers and the HPA in custody say together, for
// the status: unhealthy when one cannot be evaluated, active when one is
// active, idle when all that spoke say idle; nil when none was evaluated.
func (o observed) idleVerdict() *scaling.Result {
	var voices []*scaling.Result
	if o.triggers != nil && !o.noTriggers {
		voices = append(voices, o.triggers)
	}
	if o.hpa.custody && o.hpa.metrics != nil {
		voices = append(voices, o.hpa.metrics)
	}
	if len(voices) == 1 {
		return voices[0]
	}
	var active, idle *scaling.Result
	var msgs []string
	for _, v := range voices {
		switch v.State {
		case scaling.StateUnhealthy:
			return v
		case scaling.StateActive:
			if active == nil {
				active = v
			}
		default:
			idle = v
			msgs = append(msgs, v.Message)
		}
	}
	if active != nil {
		return active
	}
	if idle == nil {
		return nil
	}
	return &scaling.Result{State: scaling.StateIdle, Message: strings.Join(msgs, "; "), Value: idle.Value}
}

// gateView is the ElastiService as the sleep gates see it. Their first gate
// holds a target without triggers awake for good, since nothing would ever
// say it is idle; an HPA in custody says so through its metrics, so for the
// gates it stands in for a trigger. Every other gate (keep-awake, cooldown,
// enabledPeriod) applies as it does to triggers.
func gateView(es *elastiv1alpha1.ElastiService, custody bool) *elastiv1alpha1.ElastiService {
	if !custody || len(es.Spec.Triggers) > 0 {
		return es
	}
	v := *es
	v.Spec.Triggers = []elastiv1alpha1.ScaleTrigger{{}}
	return &v
}

// namedHPA is the HPA an ElastiService names, or "".
func namedHPA(es *elastiv1alpha1.ElastiService) string {
	if a := es.Spec.Autoscaler; a != nil && a.Type == elastiv1alpha1.AutoscalerHPA {
		return a.Name
	}
	return ""
}

// hpaIndex is indexHPA's function.
func hpaIndex(obj client.Object) []string {
	es, ok := obj.(*elastiv1alpha1.ElastiService)
	if !ok {
		return nil
	}
	if name := namedHPA(es); name != "" {
		return []string{name}
	}
	return nil
}

// syncHPA takes, keeps or ends the custody of the HPA the ElastiService
// names, and lets go of any other HPA it holds (spec.autoscaler changed).
// It reads the HPAs from the cache: a write from a stale read fails on its
// resourceVersion and the reconcile is retried.
func (r *Reconciler) syncHPA(ctx context.Context, es *elastiv1alpha1.ElastiService) (hpaHold, error) {
	list := &autoscalingv2.HorizontalPodAutoscalerList{}
	if err := r.client.List(ctx, list, client.InNamespace(es.Namespace)); err != nil {
		return hpaHold{}, fmt.Errorf("list HPAs in %s: %w", es.Namespace, err)
	}
	named := namedHPA(es)
	var hold hpaHold
	for i := range list.Items {
		h := &list.Items[i]
		switch {
		case h.Name == named:
			var err error
			if hold, err = r.holdHPA(ctx, es, h); err != nil {
				return hold, err
			}
		case heldBy(h, es):
			if err := r.letGoHPA(ctx, es, h, "the ElastiService no longer names it"); err != nil {
				return hold, err
			}
		}
	}
	return hold, nil
}

// releaseHPAs lets go of every HPA the ElastiService holds: it is being
// deleted.
func (r *Reconciler) releaseHPAs(ctx context.Context, es *elastiv1alpha1.ElastiService) error {
	list := &autoscalingv2.HorizontalPodAutoscalerList{}
	if err := r.client.List(ctx, list, client.InNamespace(es.Namespace)); err != nil {
		return fmt.Errorf("list HPAs in %s: %w", es.Namespace, err)
	}
	for i := range list.Items {
		if h := &list.Items[i]; heldBy(h, es) {
			if err := r.letGoHPA(ctx, es, h, "the ElastiService is being deleted"); err != nil {
				return err
			}
		}
	}
	return nil
}

// heldBy reports whether the ElastiService holds the HPA's floor.
func heldBy(h *autoscalingv2.HorizontalPodAutoscaler, es *elastiv1alpha1.ElastiService) bool {
	_, held := h.Annotations[contract.AnnotationHPAMinReplicas]
	return held && h.Annotations[contract.AnnotationHPACustodian] == es.Name
}

// holdHPA carries out custodyStep for the HPA the ElastiService names.
func (r *Reconciler) holdHPA(ctx context.Context, es *elastiv1alpha1.ElastiService, h *autoscalingv2.HorizontalPodAutoscaler) (hpaHold, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("hpa", klog.KObj(h))
	switch custodyStep(h, es.Name, custodyEligible(h, es.Spec.ScaleTargetRef)) {
	case hpaKeep:
		return hpaHold{custody: true, hpa: h}, nil
	case hpaRaise:
		from := ptr.Deref(h.Spec.MinReplicas, 1)
		err := r.hpaFloors.HoldHPAFloor(ctx, h, es.Name)
		switch {
		case err == nil:
			log.Info("HPA floor raised: Elasti takes the last step to zero", "from", from)
			r.recorder.Eventf(es, nil, corev1.EventTypeNormal, EventHPAFloorRaised, "HoldHPAFloor",
				"raised minReplicas of HPA %s from %d to %d: Elasti takes the last step to zero itself, proxy first, when the HPA's metrics read zero; %s records the 0 to restore",
				h.Name, from, heldFloor, contract.AnnotationHPAMinReplicas)
			return hpaHold{custody: true, hpa: h}, nil
		case apierrors.IsNotFound(err):
			return hpaHold{}, nil
		case apierrors.IsConflict(err):
			// A stale read: retried with the HPA as it is now.
			return hpaHold{}, err
		}
		log.Error(err, "raise the HPA floor")
		r.recorder.Eventf(es, nil, corev1.EventTypeWarning, EventHPAFloorNotRaised, "HoldHPAFloor",
			"could not raise minReplicas of HPA %s from %d to %d: %v; the target is kept awake while the HPA could take it to zero itself. Grant the operator patch on horizontalpodautoscalers, or set minReplicas to 1",
			h.Name, from, heldFloor, err)
		if from == 0 {
			return hpaHold{exposed: true}, nil
		}
		// Only the custodian could not be written: the floor is held.
		return hpaHold{custody: true, hpa: h}, nil
	case hpaEnd:
		return hpaHold{}, r.letGoHPA(ctx, es, h, "its minReplicas was set above 1")
	case hpaRestore:
		return hpaHold{}, r.letGoHPA(ctx, es, h, "it no longer scales the target on Object or External metrics alone")
	default:
		return hpaHold{}, nil
	}
}

// letGoHPA ends the custody of an HPA: the recorded floor comes back while
// the HPA still has Elasti's, and the owner's floor stands when they raised
// it. An HPA that is gone needs nothing; one the operator may not patch, or
// whose API server refuses minReplicas 0, is reported and left, so that a
// deletion never hangs on it.
func (r *Reconciler) letGoHPA(ctx context.Context, es *elastiv1alpha1.ElastiService, h *autoscalingv2.HorizontalPodAutoscaler, why string) error {
	floor := ptr.Deref(h.Spec.MinReplicas, 1)
	restore := floor <= heldFloor
	err := r.hpaFloors.ReleaseHPAFloor(ctx, h, restore)
	if err != nil && restore && apierrors.IsInvalid(err) {
		// The API server refuses minReplicas 0 (its HPAScaleToZero gate is
		// off): the floor stays at 1 and the custody ends all the same.
		r.recorder.Eventf(es, nil, corev1.EventTypeWarning, EventHPAFloorNotRestored, "ReleaseHPAFloor",
			"could not restore minReplicas of HPA %s: %v; left it at %d", h.Name, err, floor)
		restore, err = false, r.hpaFloors.ReleaseHPAFloor(ctx, h, false)
		if err == nil {
			return nil
		}
	}
	switch {
	case err == nil:
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
		r.recorder.Eventf(es, nil, corev1.EventTypeWarning, EventHPAFloorNotRestored, "ReleaseHPAFloor",
			"could not release HPA %s (%s): %v; remove the annotation %s and set minReplicas by hand", h.Name, why, err, contract.AnnotationHPAMinReplicas)
		return nil
	default:
		return err
	}
	ctrl.LoggerFrom(ctx).Info("HPA released", "hpa", klog.KObj(h), "restored", restore, "cause", why)
	if restore {
		r.recorder.Eventf(es, nil, corev1.EventTypeNormal, EventHPAFloorReleased, "ReleaseHPAFloor",
			"restored minReplicas of HPA %s to its owner's floor: %s", h.Name, why)
	} else {
		r.recorder.Eventf(es, nil, corev1.EventTypeNormal, EventHPAFloorReleased, "ReleaseHPAFloor",
			"released HPA %s, whose minReplicas %d stands: %s", h.Name, floor, why)
	}
	return nil
}

// forHPA maps an HPA to the ElastiServices that name it, and to the one
// that holds it (which may name another since).
func (m mappers) forHPA(ctx context.Context, obj client.Object) []reconcile.Request {
	out := m.byIndex(ctx, obj.GetNamespace(), indexHPA, obj.GetName())
	if _, held := obj.GetAnnotations()[contract.AnnotationHPAMinReplicas]; held {
		if name := obj.GetAnnotations()[contract.AnnotationHPACustodian]; name != "" {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}})
		}
	}
	return out
}

// hpaChanged passes what custody and the idle decision read: the floor, the
// annotations, the metrics and the target in the spec, and a change of what
// the readings say (not every new reading).
func hpaChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*autoscalingv2.HorizontalPodAutoscaler)
		n, ok2 := e.ObjectNew.(*autoscalingv2.HorizontalPodAutoscaler)
		if !ok1 || !ok2 {
			return true
		}
		for _, k := range []string{contract.AnnotationHPAMinReplicas, contract.AnnotationHPACustodian} {
			if o.Annotations[k] != n.Annotations[k] {
				return true
			}
		}
		return ptr.Deref(o.Spec.MinReplicas, 1) != ptr.Deref(n.Spec.MinReplicas, 1) ||
			o.Spec.ScaleTargetRef != n.Spec.ScaleTargetRef ||
			!reflect.DeepEqual(o.Spec.Metrics, n.Spec.Metrics) ||
			hpaMetricsVerdict(o, time.Now(), time.Time{}).State != hpaMetricsVerdict(n, time.Now(), time.Time{}).State
	}}
}
