package controller

import (
	"context"
	"fmt"
	"math/rand/v2"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/controller/dozer"
	"elasti.dev/elasti/internal/controller/fallback"
	"elasti.dev/elasti/internal/controller/hpacustody"
	"elasti.dev/elasti/internal/controller/podtemplates"
	"elasti.dev/elasti/internal/controller/ports"
	"elasti.dev/elasti/internal/controller/proxyslices"
	"elasti.dev/elasti/internal/controller/scaletarget"
	"elasti.dev/elasti/internal/controller/targets"
	"elasti.dev/elasti/internal/controller/triggerpoll"
	"elasti.dev/elasti/internal/controller/wakecalls"
	"elasti.dev/elasti/internal/controller/watches"
	"elasti.dev/elasti/internal/queuemetrics"
	"elasti.dev/elasti/internal/scaling"
)

// Deps are the collaborators the reconciler talks to. Nil fields get the
// real implementations built from the manager.
type Deps struct {
	Scaler      scaletarget.Scaler
	Autoscalers scaletarget.Autoscalers
	HPAFloors   hpacustody.FloorControl
	Triggers    triggerpoll.Evaluator
	// SliceWriter rewrites the proxy slices when the resolvers change; nil:
	// a client of its own on the manager's config, at --slice-update-qps.
	SliceWriter proxyslices.Updater
}

// Parts are what Setup gives the rest of the operator.
type Parts struct {
	// Waker performs the activation server's wakes.
	Waker *wakecalls.Waker
	// Triggers holds the latest trigger evaluations (the metrics API's
	// serve-mode rate); it runs on the leader only.
	Triggers *triggerpoll.Poller
}

// Setup builds the reconciler and registers its indexes and watches with
// the manager.
func Setup(ctx context.Context, mgr ctrl.Manager, cfg Config, deps Deps) (*Parts, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	// The port quarantine ends on a timer of this clock.
	timers, ok := cfg.Clock.(clock.WithDelayedExecution)
	if !ok {
		return nil, fmt.Errorf("the clock %T has no AfterFunc", cfg.Clock)
	}
	live := mgr.GetAPIReader()
	if deps.Scaler == nil {
		// /scale reads must be live: a cache would need list/watch on every
		// target kind before its first use.
		deps.Scaler = &scaling.Scaler{Client: mgr.GetClient()}
	}
	if deps.Autoscalers == nil {
		deps.Autoscalers = &scaling.Autoscalers{Reader: live, Writer: mgr.GetClient()}
	}
	if deps.HPAFloors == nil {
		deps.HPAFloors = &scaling.Autoscalers{Reader: live, Writer: mgr.GetClient()}
	}
	if deps.Triggers == nil {
		deps.Triggers = &scaling.Evaluator{Secrets: live, Endpoints: live, Pods: live, Clock: cfg.Clock}
	}

	idx := mgr.GetFieldIndexer()
	for name, fn := range map[string]client.IndexerFunc{
		watches.IndexService:     func(o client.Object) []string { return []string{o.(*elastiv1alpha1.ElastiService).Spec.Service} },
		targets.Index:            targets.IndexValues,
		ports.IndexResolverPorts: ports.ResolverPortsIndex,
		watches.IndexMode:        func(o client.Object) []string { return []string{string(o.(*elastiv1alpha1.ElastiService).Status.Mode)} },
		hpacustody.IndexHPA:      hpacustody.Index,
	} {
		if err := idx.IndexField(ctx, &elastiv1alpha1.ElastiService{}, name, fn); err != nil {
			return nil, fmt.Errorf("index ElastiServices by %s: %w", name, err)
		}
	}

	recorder := mgr.GetEventRecorder("elasti-operator")
	var record *ports.QuarantineRecord
	if cfg.QuarantineRecord.Name != "" {
		record = &ports.QuarantineRecord{Reader: live, Writer: mgr.GetClient(), Key: cfg.QuarantineRecord}
	}
	r := &Reconciler{
		client: mgr.GetClient(),
		target: &scaletarget.Control{Scaler: deps.Scaler, Autoscalers: deps.Autoscalers, Recorder: recorder, Client: mgr.GetClient()},
		hpas:   &hpacustody.Custody{Cache: mgr.GetClient(), Floors: deps.HPAFloors, Recorder: recorder},
		triggers: &triggerpoll.Poller{
			Evaluator: deps.Triggers, Interval: cfg.PollingInterval, Timeout: cfg.TriggerEvaluationTimeout,
			Workers: cfg.TriggerWorkers, Clock: cfg.Clock, Done: countEvaluation,
		},
		recorder: recorder,
		clock:    cfg.Clock,
		cfg:      cfg,
		ports: ports.NewAllocator(cfg.PortRangeStart, cfg.PortRangeEnd, ports.CacheHolders(mgr.GetClient()), ports.ReusePolicy{
			Quarantine: cfg.PortQuarantine, Clock: timers, InUse: ports.CacheInUse(mgr.GetClient()), RandN: rand.IntN,
			Reserved: func(n int) { resolverPortsAllocated.Set(float64(n)) },
			Record:   record,
		}),
	}
	r.wake.slots, r.wake.ctx, r.wake.reconcile = make(chan struct{}, cfg.WakeWorkers), ctx, r.Reconcile
	r.wakes = wakecalls.NewRequests(r.wake.perform)
	m := watches.Mappers{Client: mgr.GetClient()}
	if deps.SliceWriter == nil {
		sliceCfg := rest.CopyConfig(mgr.GetConfig())
		sliceCfg.QPS, sliceCfg.Burst, sliceCfg.RateLimiter = float32(cfg.SliceUpdateQPS), max(1, int(cfg.SliceUpdateQPS)), nil
		w, err := client.New(sliceCfg, client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
		if err != nil {
			return nil, fmt.Errorf("build the proxy slices' client: %w", err)
		}
		deps.SliceWriter = w
	}
	refresher := newSliceRefresher(mgr.GetClient(), deps.SliceWriter, cfg.ResolverNamespace, m)
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named("elastiservice").
		For(&elastiv1alpha1.ElastiService{}, builder.WithPredicates(watches.ElastiServiceChanged())).
		// An ElastiService that stands down for an older one (standdown.go)
		// acts again when that one goes or names something else.
		Watches(&elastiv1alpha1.ElastiService{}, handler.EnqueueRequestsFromMapFunc(m.ForRivals), builder.WithPredicates(watches.ClaimChanged())).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(m.ForService), builder.WithPredicates(watches.ServiceSpecChanged())).
		Watches(&discoveryv1.EndpointSlice{}, handler.EnqueueRequestsFromMapFunc(m.ForSlice), builder.WithPredicates(watches.SliceReadinessChanged())).
		// A change of the ready resolvers: one pass over every proxy slice
		// (resolverchange.go), or every proxy-mode reconcile when there is
		// none left, or none was before.
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(refresher.Map), builder.WithPredicates(watches.ResolverPodChanged())).
		WatchesRawSource(source.Channel(refresher.Events(), &handler.EnqueueRequestForObject{})).
		// An HPA whose floor Elasti holds (package hpacustody): a floor set
		// back to 0 is raised again at once, and its readings count when
		// they change.
		Watches(&autoscalingv2.HorizontalPodAutoscaler{}, handler.EnqueueRequestsFromMapFunc(r.hpas.Map), builder.WithPredicates(hpacustody.Changed())).
		WatchesRawSource(source.Channel(r.wakes.Events(), &handler.EnqueueRequestForObject{})).
		// Each completed trigger evaluation (package triggerpoll).
		WatchesRawSource(source.Channel(r.triggers.Events(), &handler.EnqueueRequestForObject{})).
		// ElastiServices waiting for a resolver port, when one frees up.
		WatchesRawSource(source.Channel(r.ports.Events(), &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: cfg.MaxConcurrentReconciles,
			SkipNameValidation:      ptr.To(cfg.SkipNameValidation),
			// A FIFO work queue, not controller-runtime's default priority
			// queue. That one enqueues the objects of the informers'
			// initial list at low priority, and a RequeueAfter keeps the
			// priority an item had: while serve-mode ElastiServices polling
			// their triggers keep normal-priority work ready, an
			// ElastiService listed at start-up is never reconciled (no
			// finalizer, no port). FIFO serves every key in turn.
			UsePriorityQueue: ptr.To(false),
			NewQueue:         fifoQueue,
		}).
		Build(r)
	if err != nil {
		return nil, fmt.Errorf("build the ElastiService controller: %w", err)
	}
	if err := mgr.Add(r.triggers); err != nil {
		return nil, fmt.Errorf("add the trigger poller: %w", err)
	}
	if err := mgr.Add(refresher); err != nil {
		return nil, fmt.Errorf("add the proxy slice refresher: %w", err)
	}
	// The allocator follows the statuses' ports on every replica, leader or
	// not: the caches run on followers too, so a standby that is elected
	// knows which ports were freed while it stood by.
	esInformer, err := mgr.GetCache().GetInformer(ctx, &elastiv1alpha1.ElastiService{})
	if err != nil {
		return nil, fmt.Errorf("get the ElastiService informer: %w", err)
	}
	if _, err := esInformer.AddEventHandler(r.ports.StatusHandler()); err != nil {
		return nil, fmt.Errorf("follow the ElastiServices' resolver ports: %w", err)
	}
	r.targets = &targets.Watches{
		Cache: mgr.GetCache(), Controller: c, Enqueue: m.ForTarget, Live: live, Clock: cfg.Clock,
		Namespaced: len(cfg.WatchNamespaces) > 0,
	}
	r.templates = &podtemplates.Cache{Live: live, Targets: r.targets}
	r.live = live
	r.dozer = &dozer.Dozer{Live: live, Client: mgr.GetClient()}
	r.fallback = &fallback.Tracker{Services: r.client, Targets: r.templates, Events: live,
		Status: r.client, Recorder: r.recorder}
	return &Parts{
		Waker:    &wakecalls.Waker{Reader: live, Cache: mgr.GetCache(), Writer: mgr.GetClient(), Elected: mgr.Elected(), Timeout: cfg.WakeTimeout, Requests: r.wakes},
		Triggers: r.triggers,
	}, nil
}

// CacheOptions keeps the manager's caches to what the reconciler reads
// (watches.CacheOptions).
func CacheOptions(cfg Config) cache.Options {
	return watches.CacheOptions(cfg.ResolverNamespace, cfg.WatchNamespaces)
}

// fifoQueue is the ElastiService controller's FIFO queue (the comment at
// UsePriorityQueue says why), with its workqueue_* metrics on the
// operator's /metrics whichever provider client-go took first
// (internal/queuemetrics). A nil provider, which queuemetrics' test
// rules out, is client-go's global one.
func fifoQueue(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	mp, _ := queuemetrics.Provider()
	return workqueue.NewTypedRateLimitingQueueWithConfig(rl, workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Name: name, MetricsProvider: mp})
}
