package triggerpoll

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/queuemetrics"
	"elasti.dev/elasti/internal/scaling"
)

// Evaluator evaluates an ElastiService's triggers (scaling.Evaluator).
type Evaluator interface {
	Evaluate(ctx context.Context, es *elastiv1alpha1.ElastiService) scaling.Result
}

// Poller runs trigger evaluations on Workers goroutines of its own. Set the
// fields, then call Start once; Result may be called before Start (the
// evaluations then wait for it).
type Poller struct {
	Evaluator Evaluator
	// Interval is how often an awake target's triggers are evaluated (the
	// operator's --polling-interval). A result older than half the
	// Interval is refreshed when a reconcile asks, and one older than the
	// Interval (or minUsable) is not acted on: the reconcile that a
	// polling interval's requeue brings waits for the fresh one, rather
	// than start a scale-down on what the triggers said an interval ago.
	Interval time.Duration
	// Timeout bounds one evaluation of all of an ElastiService's
	// triggers; a trigger still unanswered then counts as unhealthy.
	Timeout time.Duration
	// Workers is how many evaluations run at once.
	Workers int
	Clock   clock.Clock
	// Done, when set, is called with every completed evaluation (metrics,
	// logs).
	Done func(es *elastiv1alpha1.ElastiService, res scaling.Result)

	mu      sync.Mutex
	entries map[types.NamespacedName]*entry
	queue   workqueue.TypedInterface[types.NamespacedName]
	events  chan event.GenericEvent
	once    sync.Once
}

// minUsable is the age up to which a result is acted on however short the
// Interval, so that a reconcile delayed on a busy machine still acts on
// the evaluation that its event announced.
const minUsable = 5 * time.Second

type entry struct {
	// es is a copy of the latest object a reconcile asked with: what the
	// next evaluation reads.
	es *elastiv1alpha1.ElastiService
	// result, started, at and generation describe the latest completed
	// evaluation: when it began and ended, and of which spec.
	result     *scaling.Result
	started    time.Time
	at         time.Time
	generation int64
	queued     bool
}

func (p *Poller) init() {
	p.once.Do(func() {
		p.entries = map[types.NamespacedName]*entry{}
		// A nil provider (never, unless controller-runtime changed its
		// collectors: queuemetrics' test says) is client-go's global one.
		mp, _ := queuemetrics.Provider()
		p.queue = workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[types.NamespacedName]{Name: "elasti_trigger_evaluations", MetricsProvider: mp})
		p.events = make(chan event.GenericEvent, 1024)
	})
}

// Events carries an ElastiService after each completed evaluation of its
// triggers, for the controller to reconcile it.
func (p *Poller) Events() <-chan event.GenericEvent {
	p.init()
	return p.events
}

// Result returns the latest result of es's triggers for its current spec
// (generation) from an evaluation begun at notBefore or later, or nil when
// there is none recent enough to act on. It queues an evaluation when there
// is no such result, or it is older than half the Interval, and none is
// queued or running; the reconcile that the evaluation's event brings reads
// its result. Result never waits for a backend.
func (p *Poller) Result(es *elastiv1alpha1.ElastiService, notBefore time.Time) *scaling.Result {
	p.init()
	key := client.ObjectKeyFromObject(es)
	now := p.Clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.entries[key]
	if !ok {
		e = &entry{}
		p.entries[key] = e
	}
	// A copy: the reconcile goes on to write the status into es.
	e.es = es.DeepCopy()
	current := e.result != nil && e.generation == es.Generation && !e.started.Before(notBefore)
	if !e.queued && (!current || now.Sub(e.at) >= p.Interval/2) {
		e.queued = true
		p.queue.Add(key)
	}
	if !current || now.Sub(e.at) > max(p.Interval, minUsable) {
		return nil
	}
	r := *e.result
	return &r
}

// Latest returns the latest completed evaluation of key's triggers and when
// it ended, for readers that only look (the metrics API): it queues
// nothing, and ok is false when there is none. It answers on the elected
// leader only; elsewhere the poller does not run.
func (p *Poller) Latest(key types.NamespacedName) (res scaling.Result, at time.Time, ok bool) {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.entries[key]
	if e == nil || e.result == nil {
		return scaling.Result{}, time.Time{}, false
	}
	return *e.result, e.at, true
}

// Forget drops what the poller knows of key: the ElastiService is gone. An
// evaluation already running completes and is dropped.
func (p *Poller) Forget(key types.NamespacedName) {
	p.init()
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.entries, key)
}

// Start runs the workers until ctx ends. It implements
// controller-runtime's manager.Runnable; the poller runs on the elected
// leader only, like the reconciles that ask it.
func (p *Poller) Start(ctx context.Context) error {
	p.init()
	var wg sync.WaitGroup
	for range max(p.Workers, 1) {
		wg.Go(func() {
			for p.work(ctx) {
			}
		})
	}
	<-ctx.Done()
	p.queue.ShutDown()
	wg.Wait()
	return nil
}

// work evaluates one queued ElastiService; false once the queue is shut
// down.
func (p *Poller) work(ctx context.Context) bool {
	key, shutdown := p.queue.Get()
	if shutdown {
		return false
	}
	defer p.queue.Done(key)
	p.mu.Lock()
	e, ok := p.entries[key]
	var es *elastiv1alpha1.ElastiService
	if ok {
		es = e.es
	}
	p.mu.Unlock()
	if es == nil {
		return true
	}
	started := p.Clock.Now()
	evalCtx, cancel := context.WithTimeout(ctx, p.Timeout)
	res := p.Evaluator.Evaluate(evalCtx, es)
	cancel()
	if ctx.Err() != nil {
		return true
	}
	p.mu.Lock()
	current := p.entries[key] == e
	if current {
		e.result, e.started, e.at, e.generation, e.queued = &res, started, p.Clock.Now(), es.Generation, false
	}
	p.mu.Unlock()
	if !current {
		return true // forgotten meanwhile
	}
	if p.Done != nil {
		p.Done(es, res)
	}
	wake := &elastiv1alpha1.ElastiService{}
	wake.Namespace, wake.Name = key.Namespace, key.Name
	select {
	case p.events <- event.GenericEvent{Object: wake}:
	case <-ctx.Done():
	}
	return true
}

// NeedLeaderElection: only the leader reconciles, so only it evaluates.
func (p *Poller) NeedLeaderElection() bool { return true }
