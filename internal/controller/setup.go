package controller

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/fallback"
	"elasti.dev/elasti/internal/controller/hpacustody"
	"elasti.dev/elasti/internal/controller/ports"
	"elasti.dev/elasti/internal/controller/proxyslices"
	"elasti.dev/elasti/internal/controller/targets"
	"elasti.dev/elasti/internal/controller/wakecalls"
	"elasti.dev/elasti/internal/scaling"
)

// Field indexes on ElastiServices.
const (
	indexService = "elasti.spec.service"
	indexMode    = "elasti.status.mode"
)

// Deps are the collaborators the reconciler talks to. Nil fields get the
// real implementations built from the manager.
type Deps struct {
	Scaler      targetScaler
	Autoscalers autoscalerControl
	HPAFloors   hpacustody.FloorControl
	Triggers    triggerEvaluator
}

// Setup builds the reconciler, registers its indexes and watches with the
// manager, and returns the Waker the activation server uses.
func Setup(ctx context.Context, mgr ctrl.Manager, cfg Config, deps Deps) (*wakecalls.Waker, error) {
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
		indexService:             func(o client.Object) []string { return []string{o.(*elastiv1alpha1.ElastiService).Spec.Service} },
		targets.Index:            targets.IndexValues,
		ports.IndexResolverPorts: ports.ResolverPortsIndex,
		indexMode:                func(o client.Object) []string { return []string{string(o.(*elastiv1alpha1.ElastiService).Status.Mode)} },
		hpacustody.IndexHPA:      hpacustody.Index,
	} {
		if err := idx.IndexField(ctx, &elastiv1alpha1.ElastiService{}, name, fn); err != nil {
			return nil, fmt.Errorf("index ElastiServices by %s: %w", name, err)
		}
	}

	recorder := mgr.GetEventRecorder("elasti-operator")
	r := &Reconciler{
		client:   mgr.GetClient(),
		target:   &targetControl{scaler: deps.Scaler, autoscalers: deps.Autoscalers, recorder: recorder, client: mgr.GetClient()},
		hpas:     &hpacustody.Custody{Cache: mgr.GetClient(), Floors: deps.HPAFloors, Recorder: recorder},
		triggers: deps.Triggers,
		recorder: recorder,
		clock:    cfg.Clock,
		cfg:      cfg,
		ports: ports.NewAllocator(cfg.PortRangeStart, cfg.PortRangeEnd, ports.CacheHolders(mgr.GetClient()), ports.ReusePolicy{
			Quarantine: cfg.PortQuarantine, Clock: timers, InUse: ports.CacheInUse(mgr.GetClient()), RandN: rand.IntN,
			Reserved: func(n int) { resolverPortsAllocated.Set(float64(n)) },
		}),
		wakes: wakecalls.NewRequests(),
	}
	m := mappers{client: mgr.GetClient()}
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named("elastiservice").
		For(&elastiv1alpha1.ElastiService{}, builder.WithPredicates(elastiServiceChanged())).
		// An ElastiService that stands down for an older one (standdown.go)
		// acts again when that one goes or names something else.
		Watches(&elastiv1alpha1.ElastiService{}, handler.EnqueueRequestsFromMapFunc(m.forRivals), builder.WithPredicates(claimChanged())).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(m.forService), builder.WithPredicates(serviceSpecChanged())).
		Watches(&discoveryv1.EndpointSlice{}, handler.EnqueueRequestsFromMapFunc(m.forSlice), builder.WithPredicates(sliceReadinessChanged())).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(m.forResolverPod), builder.WithPredicates(resolverPodChanged())).
		// An HPA whose floor Elasti holds (package hpacustody): a floor set
		// back to 0 is raised again at once, and its readings count when
		// they change.
		Watches(&autoscalingv2.HorizontalPodAutoscaler{}, handler.EnqueueRequestsFromMapFunc(r.hpas.Map), builder.WithPredicates(hpacustody.Changed())).
		WatchesRawSource(source.Channel(r.wakes.Events(), &handler.EnqueueRequestForObject{})).
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
		}).
		Build(r)
	if err != nil {
		return nil, fmt.Errorf("build the ElastiService controller: %w", err)
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
		Cache: mgr.GetCache(), Controller: c, Enqueue: m.forTarget, Live: live, Clock: cfg.Clock,
		Namespaced: len(cfg.WatchNamespaces) > 0,
	}
	r.templates = &podTemplates{live: live, targets: r.targets}
	r.live = live
	r.fallback = &fallback.Tracker{Services: r.client, SlicesReady: proxyslices.OwnReady, Targets: r.templates, Events: live,
		Status: r.client, Recorder: r.recorder}
	return &wakecalls.Waker{Reader: live, Cache: mgr.GetCache(), Writer: mgr.GetClient(), Elected: mgr.Elected(), Timeout: cfg.WakeTimeout, Requests: r.wakes}, nil
}

// CacheOptions keeps the manager's caches to what the reconciler reads:
// resolver pods only in their namespace and by label; EndpointSlices that
// belong to a Service, trimmed to what readiness needs; Services trimmed to
// their ports.
func CacheOptions(cfg Config) cache.Options {
	hasServiceName, _ := labels.NewRequirement(discoveryv1.LabelServiceName, selection.Exists, nil)
	opts := cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {
				Namespaces: map[string]cache.Config{cfg.ResolverNamespace: {}},
				Label:      labels.SelectorFromSet(labels.Set{contract.LabelComponent: contract.ComponentResolver}),
				Transform:  trimPod,
			},
			&discoveryv1.EndpointSlice{}: {
				Label:     labels.NewSelector().Add(*hasServiceName),
				Transform: trimEndpointSlice,
			},
			&corev1.Service{}: {Transform: trimService},
		},
	}
	if len(cfg.WatchNamespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range cfg.WatchNamespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}

// trimPod keeps what readiness and the proxy slice need.
func trimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	var ready []corev1.PodCondition
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			ready = append(ready, corev1.PodCondition{Type: c.Type, Status: c.Status})
		}
	}
	return &corev1.Pod{
		TypeMeta:   p.TypeMeta,
		ObjectMeta: trimMeta(p.ObjectMeta),
		Spec:       corev1.PodSpec{NodeName: p.Spec.NodeName},
		Status:     corev1.PodStatus{PodIP: p.Status.PodIP, PodIPs: p.Status.PodIPs, Conditions: ready},
	}, nil
}

// trimEndpointSlice keeps Elasti's own proxy slices whole, and reduces every
// other slice to its first ready endpoint: the reconciler only asks whether
// a Service has one.
func trimEndpointSlice(obj any) (any, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return obj, nil
	}
	if s.Labels[contract.LabelManagedBy] == contract.ManagedBy {
		s.ManagedFields = nil
		return s, nil
	}
	out := &discoveryv1.EndpointSlice{TypeMeta: s.TypeMeta, ObjectMeta: trimMeta(s.ObjectMeta), AddressType: s.AddressType}
	for _, ep := range s.Endpoints {
		if proxyslices.EndpointReady(ep) {
			out.Endpoints = []discoveryv1.Endpoint{{Addresses: ep.Addresses, Conditions: ep.Conditions}}
			break
		}
	}
	return out, nil
}

// trimService keeps the ports and what decides whether Elasti can hold the
// Service's traffic (package refusals).
func trimService(obj any) (any, error) {
	s, ok := obj.(*corev1.Service)
	if !ok {
		return obj, nil
	}
	return &corev1.Service{TypeMeta: s.TypeMeta, ObjectMeta: trimMeta(s.ObjectMeta), Spec: corev1.ServiceSpec{
		Ports: s.Spec.Ports, Selector: s.Spec.Selector, Type: s.Spec.Type, ClusterIP: s.Spec.ClusterIP,
		ExternalName: s.Spec.ExternalName, IPFamilies: s.Spec.IPFamilies,
		InternalTrafficPolicy: s.Spec.InternalTrafficPolicy, ExternalTrafficPolicy: s.Spec.ExternalTrafficPolicy,
	}}, nil
}

func trimMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, Labels: m.Labels, DeletionTimestamp: m.DeletionTimestamp,
		OwnerReferences: m.OwnerReferences, CreationTimestamp: m.CreationTimestamp,
	}
}

// elastiServiceChanged lets through what the reconciler must act on: spec
// changes, annotations (wake-now, keep-awake), deletion and finalizers, but
// not the operator's own status writes.
func elastiServiceChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld, e.ObjectNew
		return o.GetGeneration() != n.GetGeneration() ||
			!reflect.DeepEqual(o.GetAnnotations(), n.GetAnnotations()) ||
			!reflect.DeepEqual(o.GetFinalizers(), n.GetFinalizers()) ||
			!o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp())
	}}
}

// serviceSpecChanged passes changes of what the cache keeps of a Service
// (trimService): its ports and its shape.
func serviceSpecChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Service)
		n, ok2 := e.ObjectNew.(*corev1.Service)
		return !ok1 || !ok2 || !reflect.DeepEqual(o.Spec, n.Spec)
	}}
}

// claimChanged passes what can change which ElastiService wins a Service
// or a target: creation, deletion and a changed spec.
func claimChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
			!e.ObjectOld.GetDeletionTimestamp().Equal(e.ObjectNew.GetDeletionTimestamp())
	}}
}

// sliceReadinessChanged passes every change to Elasti's slices, and changes
// of "has a ready endpoint" for the Services' own slices.
func sliceReadinessChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*discoveryv1.EndpointSlice)
		n, ok2 := e.ObjectNew.(*discoveryv1.EndpointSlice)
		if !ok1 || !ok2 || n.Labels[contract.LabelManagedBy] == contract.ManagedBy {
			return true
		}
		return (len(o.Endpoints) > 0) != (len(n.Endpoints) > 0)
	}}
}

// resolverPodChanged passes changes of readiness, addresses or deletion.
func resolverPodChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.Pod)
		n, ok2 := e.ObjectNew.(*corev1.Pod)
		if !ok1 || !ok2 {
			return true
		}
		return proxyslices.PodReady(o) != proxyslices.PodReady(n) || !reflect.DeepEqual(o.Status.PodIPs, n.Status.PodIPs) ||
			o.Status.PodIP != n.Status.PodIP || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil)
	}}
}
