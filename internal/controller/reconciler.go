package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/dozer"
	"elasti.dev/elasti/internal/controller/fallback"
	"elasti.dev/elasti/internal/controller/hpacustody"
	"elasti.dev/elasti/internal/controller/plan"
	"elasti.dev/elasti/internal/controller/podtemplates"
	"elasti.dev/elasti/internal/controller/ports"
	"elasti.dev/elasti/internal/controller/proxyslices"
	"elasti.dev/elasti/internal/controller/scaletarget"
	"elasti.dev/elasti/internal/controller/targets"
	"elasti.dev/elasti/internal/controller/triggerpoll"
	"elasti.dev/elasti/internal/controller/wakecalls"
	"elasti.dev/elasti/internal/doze"
	"elasti.dev/elasti/internal/keyed"
)

// Reconciler reconciles ElastiServices. One reconcile reads here from top to
// bottom: observe (observe.go) reads the world, claim (claim.go) makes the
// in-memory claims, plan.Decide plans, execute writes through the concern
// that owns each object (packages scaletarget, proxyslices), and
// writeStatus (status.go) records the result.
// Deletion takes its own path (deletion.go).
type Reconciler struct {
	client client.Client
	// target writes the scale target (package scaletarget).
	target *scaletarget.Control
	hpas   *hpacustody.Custody
	// triggers evaluates the triggers off the reconcile workers; a
	// reconcile reads its latest result.
	triggers *triggerpoll.Poller
	recorder eventRecorder
	clock    clock.Clock
	cfg      Config

	ports *ports.Allocator
	wakes *wakecalls.Requests
	// wake runs the wakes' reconciles beside the work queue, one reconcile
	// of an ElastiService at a time across both.
	wake    wakePath
	targets *targets.Watches
	// grace remembers when each ElastiService's grace period before
	// sleeping began. In memory only: a new leader that finds a scale-down
	// in flight has no start time and waits a full grace period of its own
	// (see plan.Decide), which errs on the side of a target kept up.
	grace keyed.Map[types.NamespacedName, time.Time]
	// preWarmed remembers, per ElastiService, the last pre-warm firing this
	// process recorded in a status. The cache may still hold the status
	// from before that write when the next reconcile runs; this keeps that
	// reconcile from acting on the same firing again. A new leader reads
	// status.lastPreWarmTime, which the write made durable.
	preWarmed keyed.Map[types.NamespacedName, time.Time]
	// wokeUnrecorded remembers, per ElastiService, a wake this process
	// performed until a status write records it as lastScaledUpTime: a
	// reconcile whose status write meets a conflict after the wake would
	// otherwise leave the next one, which finds the target up, nothing to
	// record, and the cooldown would count from an older wake.
	wokeUnrecorded keyed.Map[types.NamespacedName, time.Time]
	// templates reads the targets' pod-template labels, to check that the
	// Service selects the target's pods.
	templates *podtemplates.Cache
	// live reads, uncached, what the cache does not hold: the woken
	// target's pods, for status.ledger (ledger.Observe), the fallback
	// (package fallback) and status.wakeProgress (wakeprogress.Observe),
	// and those pods' Events. The cache holds only resolver pods, and no
	// Event.
	live client.Reader
	// dozer reads and resizes the pods of a sleepMode Doze target (doze.go).
	dozer *dozer.Dozer
	// fallback reads what the FallbackActive condition needs, and
	// remembers, per ElastiService, why the API server refused the last
	// wake's scale write, until a wake goes through.
	fallback *fallback.Tracker
}

var _ reconcile.Reconciler = (*Reconciler)(nil)

// soon is how soon a reconcile that ended early runs again: one whose write
// met a newer version of the object, or one that recorded the proxy ports
// when its plan was the scale to zero (recordProxyPorts). Long enough for
// the cache to see the write.
const soon = 100 * time.Millisecond

// Reconcile brings one ElastiService's world in line with its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	defer r.wake.serial.Lock(req.NamespacedName)()
	start := time.Now()
	defer func() {
		result := resultLabel(err)
		if apierrors.IsConflict(err) {
			// Another writer changed an object between this reconcile's read
			// and its write. That is no failure: the next reconcile reads the
			// object again and writes from what it finds. No Warning, no
			// error log, no backoff: the other write's watch event, or this
			// requeue, brings the next reconcile.
			ctrl.LoggerFrom(ctx).V(1).Info("write conflict: reconciling again", "error", err.Error())
			writeConflicts.WithLabelValues(req.Namespace, req.Name).Inc()
			result, res, err = "conflict", ctrl.Result{RequeueAfter: soon}, nil
		}
		reconcileDuration.WithLabelValues(result).Observe(time.Since(start).Seconds())
	}()

	es := &elastiv1alpha1.ElastiService{}
	if err := r.client.Get(ctx, req.NamespacedName, es); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get ElastiService %s: %w", req.NamespacedName, err)
	}
	if es.DeletionTimestamp != nil {
		return r.finalize(ctx, es)
	}
	if err := r.ensureFinalizer(ctx, es); err != nil {
		return ctrl.Result{}, err
	}
	switch rival, reason, err := findRival(ctx, r.client, es); {
	case err != nil:
		return ctrl.Result{}, err
	case rival != nil:
		return r.standDown(ctx, es, rival, reason)
	}
	targetChanged, err := r.target.SyncManaged(ctx, es)
	if err != nil {
		return ctrl.Result{}, err
	}
	hold, err := r.hpas.Sync(ctx, es)
	if err != nil {
		return ctrl.Result{}, err
	}

	o, l, err := r.observe(ctx, es, hold)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.claim(ctx, es, l, &o); err != nil {
		return ctrl.Result{}, err
	}
	// A new target starts awake, as the old one was just restored: the
	// serve/proxy cycle begins again from serve.
	o.Demand.Wake = o.Demand.Wake || targetChanged
	p := plan.Decide(o)
	dozed := es.Status.Doze
	fx, err := r.execute(ctx, es, o, l, p)
	if err == nil && fx.Raised > 0 {
		// Someone raised the target between observe and the scale-down.
		// Their count stands, and the raise calls the scale-down off as a
		// request during the grace period would: decide again, as for a
		// wake, from what the target now has.
		o.Target.Replicas, o.Demand.Wake = fx.Raised, true
		p = plan.Decide(o)
		fx, err = r.execute(ctx, es, o, l, p)
	}
	if err != nil {
		if !apierrors.IsConflict(err) {
			r.recorder.Eventf(es, nil, corev1.EventTypeWarning, EventScaleFailed, "Reconcile", "%v", err)
		}
		if p.Wake && !fx.Woke && fallback.ScaleRefusal(err) {
			w := fallback.Wake{InProgress: wakeInProgress(es, o), OwnReady: o.OwnReady}
			if rerr := r.fallback.ReportRefusedWake(ctx, es, w, o.Now, err); rerr != nil {
				ctrl.LoggerFrom(ctx).Error(rerr, "cannot report the refused wake")
			}
		}
		return ctrl.Result{}, err
	}
	if fx.Woke {
		r.fallback.Woke(req.NamespacedName)
		r.wokeUnrecorded.Set(req.NamespacedName, o.Now)
	}
	// A reconcile writes the status once: one that recorded the proxy ports
	// (recordProxyPorts) wrote what it planned, and did nothing since that
	// the status would show.
	if !fx.Recorded {
		if err := r.writeStatus(ctx, es, o, p, fx); err != nil {
			return ctrl.Result{}, err
		}
		r.wokeUnrecorded.Delete(req.NamespacedName)
	}
	if p.DozeOver && dozed != nil {
		r.reportWoke(es, dozed.Pods)
	}
	// Activation calls are answered only once the status records the wake,
	// so a caller that sees the answer also sees lastScaledUpTime.
	if err := r.wakes.Answer(ctx, r.client, es, wakeOutcome(o, fx)); err != nil {
		return ctrl.Result{}, err
	}
	setModeMetric(es.Namespace, es.Name, p.Mode)
	if fx.Recorded && (p.Sleep || p.Doze) && fx.Dozed == nil {
		return ctrl.Result{RequeueAfter: soon}, nil
	}
	return ctrl.Result{RequeueAfter: p.RequeueAfter}, nil
}

// wakePath reconciles an ElastiService for an activation call that started
// its wake, without waiting in the work queue behind other ElastiServices'
// reconciles (docs/architecture.md, "A wake on its own path"). The work
// queue's reconcile, enqueued as well, follows it.
type wakePath struct {
	// serial runs one reconcile of an ElastiService at a time across the
	// work queue and the wake path.
	serial keyed.Locks[types.NamespacedName]
	// slots bounds the wakes reconciled at once (--wake-workers); ctx is
	// the manager's.
	slots     chan struct{}
	ctx       context.Context
	reconcile func(context.Context, ctrl.Request) (ctrl.Result, error)
}

// perform reconciles key. An error is left to the work queue's reconcile,
// which retries with backoff.
func (w *wakePath) perform(key types.NamespacedName) {
	ctx := w.ctx
	select {
	case w.slots <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-w.slots }()
	id := uuid.NewUUID()
	ctx = context.WithValue(ctx, wakeReconcileID{}, id)
	log := ctrl.LoggerFrom(ctx).WithValues("ElastiService", key.String(), "path", "wake", "reconcileID", id)
	defer func() {
		if p := recover(); p != nil {
			log.Error(fmt.Errorf("panic: %v", p), "wake reconcile panicked; the work queue's reconcile retries")
		}
	}()
	if _, err := w.reconcile(ctrl.LoggerInto(ctx, log), ctrl.Request{NamespacedName: key}); err != nil {
		log.V(1).Info("wake reconcile failed; the work queue's reconcile retries", "error", err.Error())
	}
}

// freshResolvers rebuilds want from the resolvers as the cache has them now,
// just before the write. Those observed at the start of the reconcile may
// be stale by then (its writes wait on the client's rate limit): written
// back, they would undo the slice refresher's pass of a rollout, and leave
// the slice listing a draining resolver (docs/architecture.md, "When the
// resolvers change"). A change of the address families that have a
// resolver changes the plan instead; the reconcile it causes writes that,
// so want stays as planned then.
func freshResolvers(ctx context.Context, c proxyslices.Lister, namespace string, es *elastiv1alpha1.ElastiService, ports []elastiv1alpha1.ProxyPort, want []*discoveryv1.EndpointSlice) []*discoveryv1.EndpointSlice {
	now, err := proxyslices.ListResolvers(ctx, c, namespace)
	if err != nil {
		return want
	}
	fresh := proxyslices.Build(es, ports, now)
	if len(fresh) != len(want) {
		return want
	}
	for i := range fresh {
		if fresh[i].Name != want[i].Name {
			return want
		}
	}
	return fresh
}

// wakeReconcileID is the context key of a wake reconcile's ID (a UID, as
// controller-runtime gives each of its own reconciles one in a key of its
// own), for the logs and for tests that tell reconciles apart.
type wakeReconcileID struct{}

// wakeOutcome is what the activation calls waiting on this reconcile are
// answered: the replicas a wake gave the target, or, when a wake was asked
// for and the target cannot be read, why.
func wakeOutcome(o plan.Observed, fx plan.Effects) wakecalls.Outcome {
	return wakecalls.Outcome{
		Woke: fx.Woke, Replicas: fx.Replicas,
		CannotWake: o.Demand.Wake && !o.Target.Found, TargetErr: o.Target.Err,
	}
}

// execute carries a plan out in the order of docs/architecture.md, "The
// order of the writes": wake first; the proxy slice before any scale-down,
// with status.proxyPorts recording its ports before it is written; KEDA
// paused before the target goes to zero.
// The proxy slices list the resolvers observe listed, the same ones decide
// counted, so a slice never disagrees with the plan that asked for it. It
// returns what it did, for the status and the waiting activation calls.
func (r *Reconciler) execute(ctx context.Context, es *elastiv1alpha1.ElastiService, o plan.Observed, l listed, p plan.Plan) (plan.Effects, error) {
	log := ctrl.LoggerFrom(ctx)
	var fx plan.Effects
	if p.Wake {
		n, scaled, err := r.target.Wake(ctx, es, o.Target.Replicas)
		if err != nil {
			return fx, err
		}
		fx.Woke, fx.Replicas = true, n
		// Repeated activation calls for a target already up complete the
		// wake, but only a real scale-up is news worth an Event.
		if scaled {
			log.Info("target woken", "replicas", n)
			r.recorder.Eventf(es, nil, corev1.EventTypeNormal, EventWoke, "Wake", "woke %s %s to %d replicas", es.Spec.ScaleTargetRef.Kind, es.Spec.ScaleTargetRef.Name, n)
		}
		if p.SleepCancelled {
			log.Info("scale-down called off: traffic seen during the confirmation window", "gracePeriod", o.Grace.Period)
			r.recorder.Eventf(es, nil, corev1.EventTypeNormal, EventSleepCancelled, "ScaleDown",
				"sleep cancelled: traffic seen during the confirmation window; %s %s stays up and its cooldown starts again",
				es.Spec.ScaleTargetRef.Kind, es.Spec.ScaleTargetRef.Name)
		}
		if !o.Demand.PreWarm.IsZero() {
			log.Info("pre-warm firing acted on", "firing", o.Demand.PreWarm, "replicas", n, "scaled", scaled)
			r.announcePreWarm(es, o.Demand.PreWarm, n, scaled)
			// Remembered at once, not after the status write: a reconcile
			// that fails after this point (a status conflict, a slice
			// write) must not act on the firing again when it is retried.
			// The status records it then (DesiredStatus, PreWarmHandled).
			r.preWarmed.Set(types.NamespacedName{Namespace: es.Namespace, Name: es.Name}, o.Demand.PreWarm)
		}
	}
	var want []*discoveryv1.EndpointSlice
	if p.Slices == plan.SliceEnsure {
		want = proxyslices.Build(es, o.Service.Ports, l.resolvers)
	}
	if len(want) > 0 {
		// The allocation is durable before a slice uses it, so that a
		// leader elected after a crash here sees these ports as taken.
		// That write is this reconcile's one status write.
		recorded, err := r.recordProxyPorts(ctx, es, o, p, fx)
		if err != nil {
			return fx, err
		}
		fx.Recorded = recorded
	}
	if len(want) > 0 {
		want = freshResolvers(ctx, r.client, r.cfg.ResolverNamespace, es, o.Service.Ports, want)
	}
	if err := proxyslices.Ensure(ctx, r.client, es, want); err != nil {
		return fx, err
	}
	// A refusal that leaves the data path is announced by writeStatus, with
	// the refusal's own reason.
	if p.FailOpen && !o.Service.Refusal.Refused() {
		log.Info("no ready resolvers: proxy slice removed, target kept awake")
		r.recorder.Eventf(es, nil, corev1.EventTypeWarning, EventResolversGone, "FailOpen",
			"no ready resolver in %s: removed the proxy EndpointSlice and kept %s %s awake", r.cfg.ResolverNamespace, es.Spec.ScaleTargetRef.Kind, es.Spec.ScaleTargetRef.Name)
	}
	if fx.Recorded && (p.Sleep || p.Doze) {
		// The status records the grace period as still running: the scale
		// to zero (or the doze), and the status that says so, are the next
		// reconcile's.
		return fx, nil
	}
	key := client.ObjectKeyFromObject(es)
	switch {
	case p.StartGrace:
		r.grace.Set(key, o.Now)
	case p.Active != contract.ReasonScalingDown:
		r.grace.Delete(key)
	}
	if p.Undoze {
		if err := r.undoze(ctx, es, l); err != nil {
			return fx, err
		}
	}
	if p.Doze {
		dozed, err := r.doze(ctx, es, o, l, p, fx)
		switch {
		case errors.Is(err, doze.ErrRefused) && o.Doze.Dozing:
			// A pod that appeared while the others doze, and cannot:
			// it runs at full size, and the others stay dozing. Seen at
			// every look, so not worth more than a debug line.
			log.V(1).Info("a new pod of the dozing target cannot doze; left at full size", "reason", err.Error())
		case errors.Is(err, doze.ErrRefused):
			// The pods cannot doze: the target sleeps as it would
			// without sleepMode Doze.
			log.Info("the target's pods cannot doze: scaling it to zero instead", "reason", err.Error())
			r.recorder.Eventf(es, nil, corev1.EventTypeWarning, EventDozeRefused, "Doze", "%v; scaling %s %s to zero instead",
				err, es.Spec.ScaleTargetRef.Kind, es.Spec.ScaleTargetRef.Name)
			p.Sleep = true
		case err != nil:
			return fx, err
		case dozed != nil:
			fx.Dozed, fx.Recorded = dozed, true
		}
	}
	if p.Sleep {
		n, err := r.target.Sleep(ctx, es, o.Target.Replicas)
		if err != nil {
			return fx, err
		}
		if n > 0 {
			fx.Raised = n
			log.Info("scale-down called off: another writer changed the target meanwhile", "replicas", n)
			r.recorder.Eventf(es, nil, corev1.EventTypeNormal, EventScaleDownCalledOff, "ScaleDown",
				"another writer set %s %s to %d replicas before the scale to zero; left as it is", es.Spec.ScaleTargetRef.Kind, es.Spec.ScaleTargetRef.Name, n)
			return fx, nil
		}
		fx.Slept = true
		log.Info("target scaled to zero")
		r.recorder.Eventf(es, nil, corev1.EventTypeNormal, EventScaledToZero, "ScaleDown", "scaled %s %s to zero", es.Spec.ScaleTargetRef.Kind, es.Spec.ScaleTargetRef.Name)
	}
	return fx, nil
}
