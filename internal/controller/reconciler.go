package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/scaling"
	"elasti.dev/elasti/internal/sleepgate"
)

// targetScaler reads and sets a target's replicas through /scale.
type targetScaler interface {
	Replicas(ctx context.Context, namespace string, ref elastiv1alpha1.ScaleTargetRef) (int32, error)
	Scale(ctx context.Context, namespace string, ref elastiv1alpha1.ScaleTargetRef, replicas int32) error
	// ScaleFromZero scales only a target at zero, atomically, and reports
	// whether it did.
	ScaleFromZero(ctx context.Context, namespace string, ref elastiv1alpha1.ScaleTargetRef, replicas int32) (bool, error)
}

// autoscalerControl pauses KEDA and reads HPA floors.
type autoscalerControl interface {
	PauseKEDA(ctx context.Context, namespace, name string) (bool, error)
	UnpauseKEDA(ctx context.Context, namespace, name string) error
	HPAMinReplicas(ctx context.Context, namespace, name string) (int32, error)
}

// triggerEvaluator evaluates an ElastiService's triggers.
type triggerEvaluator interface {
	Evaluate(ctx context.Context, es *elastiv1alpha1.ElastiService) scaling.Result
}

// Reconciler reconciles ElastiServices.
type Reconciler struct {
	client      client.Client
	scaler      targetScaler
	autoscalers autoscalerControl
	triggers    triggerEvaluator
	recorder    eventRecorder
	clock       clock.Clock
	cfg         Config

	ports   *portAllocator
	wakes   *wakeRequests
	targets *targetWatches

	graceMu sync.Mutex
	grace   map[types.NamespacedName]time.Time
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

// Reconcile brings one ElastiService's world in line with its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	start := time.Now()
	defer func() { reconcileDuration.WithLabelValues(resultLabel(err)).Observe(time.Since(start).Seconds()) }()

	es := &elastiv1alpha1.ElastiService{}
	if err := r.client.Get(ctx, req.NamespacedName, es); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get ElastiService %s: %w", req.NamespacedName, err)
	}
	if es.DeletionTimestamp != nil {
		return ctrl.Result{}, r.finalize(ctx, es)
	}
	if !controllerutil.ContainsFinalizer(es, contract.Finalizer) {
		orig := es.DeepCopy()
		controllerutil.AddFinalizer(es, contract.Finalizer)
		if err := r.client.Patch(ctx, es, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer to ElastiService %s: %w", req.NamespacedName, err)
		}
	}
	targetChanged, err := r.syncManagedTarget(ctx, es)
	if err != nil {
		return ctrl.Result{}, err
	}

	o, fx, err := r.observe(ctx, es)
	if err != nil {
		return ctrl.Result{}, err
	}
	o.wakeRequested = o.wakeRequested || targetChanged
	p := decide(o)
	if err := r.execute(ctx, es, o, p, &fx); err != nil {
		r.recorder.Eventf(es, nil, corev1.EventTypeWarning, EventScaleFailed, "Reconcile", "%v", err)
		return ctrl.Result{}, err
	}
	if err := r.writeStatus(ctx, es, o, p, fx); err != nil {
		return ctrl.Result{}, err
	}
	switch {
	case fx.woke:
		r.wakes.complete(req.NamespacedName, fx.replicas, nil)
	case o.wakeRequested && !o.targetFound:
		r.wakes.complete(req.NamespacedName, 0, fmt.Errorf("%w: %s", errCannotWake, fx.targetErr))
	}
	if _, ok := es.Annotations[contract.AnnotationWakeNow]; ok {
		if err := r.removeAnnotation(ctx, es, contract.AnnotationWakeNow); err != nil {
			return ctrl.Result{}, err
		}
	}
	setModeMetric(es.Namespace, es.Name, p.mode)
	return ctrl.Result{RequeueAfter: p.requeueAfter}, nil
}

// observe reads everything decide needs.
func (r *Reconciler) observe(ctx context.Context, es *elastiv1alpha1.ElastiService) (observed, effects, error) {
	key := client.ObjectKeyFromObject(es)
	o := observed{
		now:           r.clock.Now(),
		gracePeriod:   r.cfg.GracePeriod,
		pollInterval:  r.cfg.PollingInterval,
		wakeRequested: r.wakes.isPending(key),
		keepAwake:     contract.KeepAwake(es.Annotations),
	}
	var fx effects
	if _, ok := es.Annotations[contract.AnnotationWakeNow]; ok {
		o.wakeRequested = true
	}

	svc := &corev1.Service{}
	switch err := r.client.Get(ctx, types.NamespacedName{Namespace: es.Namespace, Name: es.Spec.Service}, svc); {
	case err == nil:
		o.serviceFound = true
		o.ports, o.portsErr = r.ports.Allocate(ctx, es, svc)
		if o.portsErr != nil && !errors.Is(o.portsErr, ErrPortsExhausted) {
			return o, fx, o.portsErr
		}
	case apierrors.IsNotFound(err):
	default:
		return o, fx, fmt.Errorf("get Service %s/%s: %w", es.Namespace, es.Spec.Service, err)
	}

	var replicas int32
	var err error
	if !wakeFromZero(es, o.wakeRequested) || !r.targets.cached(ctx, es.Namespace, es.Spec.ScaleTargetRef) {
		replicas, err = r.scaler.Replicas(ctx, es.Namespace, es.Spec.ScaleTargetRef)
	}
	switch {
	case err == nil:
		o.targetFound, o.replicas = true, replicas
		if gvk, gerr := scaling.TargetGVK(es.Spec.ScaleTargetRef); gerr == nil {
			if werr := r.targets.ensure(gvk); werr != nil {
				return o, fx, werr
			}
		}
	case apierrors.IsNotFound(err) || errors.Is(err, scaling.ErrTargetKindUnknown):
		fx.targetErr = "it does not exist"
		if errors.Is(err, scaling.ErrTargetKindUnknown) {
			fx.targetErr = fmt.Sprintf("the API server serves no %s in %s", es.Spec.ScaleTargetRef.Kind, es.Spec.ScaleTargetRef.APIVersion)
		}
	default:
		return o, fx, err
	}

	pods := &corev1.PodList{}
	if err := r.client.List(ctx, pods, client.InNamespace(r.cfg.ResolverNamespace),
		client.MatchingLabels{contract.LabelComponent: contract.ComponentResolver}); err != nil {
		return o, fx, fmt.Errorf("list resolver pods in %s: %w", r.cfg.ResolverNamespace, err)
	}
	o.resolvers = len(readyResolvers(pods.Items))

	slices := &discoveryv1.EndpointSliceList{}
	if err := r.client.List(ctx, slices, client.InNamespace(es.Namespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: es.Spec.Service}); err != nil {
		return o, fx, fmt.Errorf("list EndpointSlices of Service %s/%s: %w", es.Namespace, es.Spec.Service, err)
	}
	o.ownReady = ownSlicesReady(slices.Items)

	o.phase = currentPhase(es.Status, o.replicas)
	o.sleep = sleepgate.Evaluate(es, o.now)
	if o.phase == phaseServe && o.targetFound && o.replicas > 0 && !o.wakeRequested && o.sleep.Allowed() {
		res := r.triggers.Evaluate(ctx, es)
		o.triggers = &res
		triggerEvaluations.WithLabelValues(es.Namespace, es.Name, string(res.State)).Inc()
		ctrl.LoggerFrom(ctx).V(1).Info("triggers evaluated", "state", res.State, "value", res.Value, "reason", res.Reason)
	}
	r.graceMu.Lock()
	o.graceStartedAt = r.grace[key]
	r.graceMu.Unlock()
	return o, fx, nil
}

// wakeFromZero reports whether a wake is requested for a target this
// operator put to zero itself. observe then skips the /scale read: the wake's
// scale-from-zero write is conditional on zero anyway, and skipping the read
// takes one API round trip off every cold start. A target that turns out to
// have replicas, or to be gone, is read on that path or by the next
// reconcile. The caller also requires the target in the metadata cache, so a
// deleted target takes the read and is reported as missing.
func wakeFromZero(es *elastiv1alpha1.ElastiService, wakeRequested bool) bool {
	if !wakeRequested || es.Status.Mode != elastiv1alpha1.ModeProxy {
		return false
	}
	c := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionActive)
	return c != nil && c.Reason == contract.ReasonScaledToZero
}

// execute carries a plan out in DESIGN.md's order: wake first; the proxy
// slice before any scale-down; KEDA paused before the target goes to zero.
func (r *Reconciler) execute(ctx context.Context, es *elastiv1alpha1.ElastiService, o observed, p plan, fx *effects) error {
	log := ctrl.LoggerFrom(ctx)
	key := client.ObjectKeyFromObject(es)
	if p.wake {
		n, scaled, err := r.wakeTarget(ctx, es, o.replicas)
		if err != nil {
			return err
		}
		fx.woke, fx.replicas = true, n
		// Repeated activation calls for a target already up complete the
		// wake, but only a real scale-up is news worth an Event.
		if scaled {
			log.Info("target woken", "replicas", n)
			r.recorder.Eventf(es, nil, corev1.EventTypeNormal, EventWoke, "Wake", "woke %s %s to %d replicas", es.Spec.ScaleTargetRef.Kind, es.Spec.ScaleTargetRef.Name, n)
		}
	}
	switch p.slices {
	case sliceEnsure:
		pods := &corev1.PodList{}
		if err := r.client.List(ctx, pods, client.InNamespace(r.cfg.ResolverNamespace),
			client.MatchingLabels{contract.LabelComponent: contract.ComponentResolver}); err != nil {
			return fmt.Errorf("list resolver pods in %s: %w", r.cfg.ResolverNamespace, err)
		}
		if err := r.ensureSlices(ctx, es, proxySlices(es, o.ports, readyResolvers(pods.Items))); err != nil {
			return err
		}
	default:
		if err := r.ensureSlices(ctx, es, nil); err != nil {
			return err
		}
	}
	if p.failOpen {
		log.Info("no ready resolvers: proxy slice removed, target kept awake")
		r.recorder.Eventf(es, nil, corev1.EventTypeWarning, EventResolversGone, "FailOpen",
			"no ready resolver in %s: removed the proxy EndpointSlice and kept %s %s awake", r.cfg.ResolverNamespace, es.Spec.ScaleTargetRef.Kind, es.Spec.ScaleTargetRef.Name)
	}
	r.graceMu.Lock()
	switch {
	case p.startGrace:
		r.grace[key] = o.now
	case p.active != contract.ReasonScalingDown:
		delete(r.grace, key)
	}
	r.graceMu.Unlock()
	if p.sleep {
		if err := r.sleepTarget(ctx, es); err != nil {
			return err
		}
		fx.slept = true
		log.Info("target scaled to zero")
		r.recorder.Eventf(es, nil, corev1.EventTypeNormal, EventScaledToZero, "ScaleDown", "scaled %s %s to zero", es.Spec.ScaleTargetRef.Kind, es.Spec.ScaleTargetRef.Name)
	}
	return nil
}

// wakeTarget unpauses KEDA and, when the target is at zero, scales it to
// minTargetReplicas (or the HPA's floor if higher). It returns the replica
// count the target now has, and whether this call scaled it up.
func (r *Reconciler) wakeTarget(ctx context.Context, es *elastiv1alpha1.ElastiService, current int32) (int32, bool, error) {
	if a := es.Spec.Autoscaler; a != nil && a.Type == elastiv1alpha1.AutoscalerKEDA {
		if err := r.autoscalers.UnpauseKEDA(ctx, es.Namespace, a.Name); err != nil {
			return 0, false, err
		}
	}
	if current > 0 {
		return current, false, nil
	}
	want := max(es.Spec.MinTargetReplicas, 1)
	if a := es.Spec.Autoscaler; a != nil && a.Type == elastiv1alpha1.AutoscalerHPA {
		floor, err := r.autoscalers.HPAMinReplicas(ctx, es.Namespace, a.Name)
		if err != nil {
			return 0, false, err
		}
		want = max(want, floor)
	}
	scaled, err := r.scaler.ScaleFromZero(ctx, es.Namespace, es.Spec.ScaleTargetRef, want)
	if err != nil || scaled {
		scaleOperations.WithLabelValues(es.Namespace, es.Name, "up", resultLabel(err)).Inc()
	}
	if err != nil {
		return 0, false, err
	}
	if !scaled {
		// Someone else raised the target since it was read (or observe
		// assumed zero): leave their replica count alone.
		n, err := r.scaler.Replicas(ctx, es.Namespace, es.Spec.ScaleTargetRef)
		return n, false, err
	}
	return want, true, nil
}

// sleepTarget pauses KEDA, then scales the target to zero.
func (r *Reconciler) sleepTarget(ctx context.Context, es *elastiv1alpha1.ElastiService) error {
	if a := es.Spec.Autoscaler; a != nil && a.Type == elastiv1alpha1.AutoscalerKEDA {
		found, err := r.autoscalers.PauseKEDA(ctx, es.Namespace, a.Name)
		if err != nil {
			return err
		}
		if !found {
			r.recorder.Eventf(es, nil, corev1.EventTypeWarning, EventAutoscalerNotFound, "PauseKEDA", "KEDA ScaledObject %s not found; scaling to zero without pausing it", a.Name)
		}
	}
	err := r.scaler.Scale(ctx, es.Namespace, es.Spec.ScaleTargetRef, 0)
	scaleOperations.WithLabelValues(es.Namespace, es.Name, "down", resultLabel(err)).Inc()
	return err
}

// ensureSlices makes the ElastiService's proxy slices exactly want: creates
// or updates those in want, deletes every other slice it owns (an old
// address family, or one left for a previous spec.service).
func (r *Reconciler) ensureSlices(ctx context.Context, es *elastiv1alpha1.ElastiService, want []*discoveryv1.EndpointSlice) error {
	have := &discoveryv1.EndpointSliceList{}
	if err := r.client.List(ctx, have, client.InNamespace(es.Namespace), client.MatchingLabels{
		contract.LabelManagedBy:     contract.ManagedBy,
		contract.LabelElastiService: elastiServiceLabelValue(es.Name),
	}); err != nil {
		return fmt.Errorf("list proxy EndpointSlices of %s/%s: %w", es.Namespace, es.Name, err)
	}
	existing := map[string]*discoveryv1.EndpointSlice{}
	for i := range have.Items {
		if ownedBy(&have.Items[i], es.UID) {
			existing[have.Items[i].Name] = &have.Items[i]
		}
	}
	for _, w := range want {
		h, ok := existing[w.Name]
		delete(existing, w.Name)
		switch {
		case !ok:
			// AlreadyExists means the cache lags; the retry compares
			// and updates.
			if err := r.client.Create(ctx, w); err != nil {
				return fmt.Errorf("create proxy EndpointSlice %s/%s: %w", w.Namespace, w.Name, err)
			}
		case sliceNeedsUpdate(h, w):
			w.ResourceVersion = h.ResourceVersion
			if err := r.client.Update(ctx, w); err != nil {
				return fmt.Errorf("update proxy EndpointSlice %s/%s: %w", w.Namespace, w.Name, err)
			}
		}
	}
	for _, s := range existing {
		if err := r.client.Delete(ctx, s, client.Preconditions{UID: &s.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete proxy EndpointSlice %s/%s: %w", s.Namespace, s.Name, err)
		}
	}
	return nil
}

// writeStatus writes the status when it changed, and emits the Events that
// describe the change.
func (r *Reconciler) writeStatus(ctx context.Context, es *elastiv1alpha1.ElastiService, o observed, p plan, fx effects) error {
	st := desiredStatus(es, o, p, fx, r.cfg.ResolverNamespace)
	if !statusChanged(es.Status, st) {
		return nil
	}
	if modeOrServe(es.Status.Mode) != st.Mode {
		r.recorder.Eventf(es, nil, corev1.EventTypeNormal, EventModeChanged, "SwitchMode", "mode %s -> %s", modeOrServe(es.Status.Mode), st.Mode)
	}
	if was, now := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionTriggersHealthy),
		meta.FindStatusCondition(st.Conditions, elastiv1alpha1.ConditionTriggersHealthy); now != nil && now.Status == "False" &&
		(was == nil || was.Status != now.Status || was.Reason != now.Reason) {
		r.recorder.Eventf(es, nil, corev1.EventTypeWarning, EventTriggerUnhealthy, "EvaluateTriggers", "%s: %s", now.Reason, now.Message)
	}
	stamp(&st, o.now)
	es.Status = st
	if err := r.client.Status().Update(ctx, es); err != nil {
		return fmt.Errorf("update status of ElastiService %s/%s: %w", es.Namespace, es.Name, err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("status updated", "elastiservice", klog.KObj(es), "mode", st.Mode)
	return nil
}

func modeOrServe(m elastiv1alpha1.Mode) elastiv1alpha1.Mode {
	if m == "" {
		return elastiv1alpha1.ModeServe
	}
	return m
}

// syncManagedTarget remembers the target in an annotation and, when
// spec.scaleTargetRef changed, restores the old target to at least
// minTargetReplicas. It reports whether the target changed.
func (r *Reconciler) syncManagedTarget(ctx context.Context, es *elastiv1alpha1.ElastiService) (bool, error) {
	cur := encodeTarget(es.Spec.ScaleTargetRef)
	prev, had := es.Annotations[contract.AnnotationScaleTarget]
	if had && prev == cur {
		return false, nil
	}
	if old, ok := decodeTarget(prev); had && ok {
		if err := r.restoreTarget(ctx, es, old); err != nil {
			return false, err
		}
		r.recorder.Eventf(es, nil, corev1.EventTypeNormal, EventTargetChanged, "ChangeTarget", "scale target changed from %s %s; restored it", old.Kind, old.Name)
	}
	orig := es.DeepCopy()
	if es.Annotations == nil {
		es.Annotations = map[string]string{}
	}
	es.Annotations[contract.AnnotationScaleTarget] = cur
	if err := r.client.Patch(ctx, es, client.MergeFrom(orig)); err != nil {
		return false, fmt.Errorf("record the scale target of ElastiService %s/%s: %w", es.Namespace, es.Name, err)
	}
	return had, nil
}

// restoreTarget puts a target Elasti may have put to sleep back to at least
// minTargetReplicas. A target that no longer exists is fine.
func (r *Reconciler) restoreTarget(ctx context.Context, es *elastiv1alpha1.ElastiService, ref elastiv1alpha1.ScaleTargetRef) error {
	n, err := r.scaler.Replicas(ctx, es.Namespace, ref)
	if apierrors.IsNotFound(err) || errors.Is(err, scaling.ErrTargetKindUnknown) {
		return nil
	}
	if err != nil {
		return err
	}
	want := max(es.Spec.MinTargetReplicas, 1)
	if n >= want {
		return nil
	}
	err = r.scaler.Scale(ctx, es.Namespace, ref, want)
	scaleOperations.WithLabelValues(es.Namespace, es.Name, "up", resultLabel(err)).Inc()
	return err
}

// finalize restores the Service and the workload, then lets the
// ElastiService go.
func (r *Reconciler) finalize(ctx context.Context, es *elastiv1alpha1.ElastiService) error {
	if !controllerutil.ContainsFinalizer(es, contract.Finalizer) {
		return nil
	}
	if err := r.ensureSlices(ctx, es, nil); err != nil {
		return err
	}
	if a := es.Spec.Autoscaler; a != nil && a.Type == elastiv1alpha1.AutoscalerKEDA {
		if err := r.autoscalers.UnpauseKEDA(ctx, es.Namespace, a.Name); err != nil {
			return err
		}
	}
	if err := r.restoreTarget(ctx, es, es.Spec.ScaleTargetRef); err != nil {
		return err
	}
	if old, ok := decodeTarget(es.Annotations[contract.AnnotationScaleTarget]); ok && old != es.Spec.ScaleTargetRef {
		if err := r.restoreTarget(ctx, es, old); err != nil {
			return err
		}
	}
	orig := es.DeepCopy()
	controllerutil.RemoveFinalizer(es, contract.Finalizer)
	if err := r.client.Patch(ctx, es, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("remove finalizer from ElastiService %s/%s: %w", es.Namespace, es.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("ElastiService released: proxy slice removed, target restored")
	r.forget(client.ObjectKeyFromObject(es))
	return nil
}

// forget drops in-memory state of an ElastiService that is gone.
func (r *Reconciler) forget(key types.NamespacedName) {
	r.ports.Release(key)
	r.graceMu.Lock()
	delete(r.grace, key)
	r.graceMu.Unlock()
	r.wakes.complete(key, 0, errGone)
	forgetMetrics(key.Namespace, key.Name)
}

var (
	errGone       = errors.New("the ElastiService was deleted")
	errCannotWake = errors.New("the scale target cannot be woken")
)

func (r *Reconciler) removeAnnotation(ctx context.Context, es *elastiv1alpha1.ElastiService, key string) error {
	orig := es.DeepCopy()
	delete(es.Annotations, key)
	if err := r.client.Patch(ctx, es, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("remove annotation %s from ElastiService %s/%s: %w", key, es.Namespace, es.Name, err)
	}
	return nil
}
