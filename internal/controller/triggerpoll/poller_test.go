package triggerpoll

import (
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/scaling"
)

// gatedEvaluator answers each ElastiService's evaluation only when the test
// releases it, with the state the test set, and counts the calls.
type gatedEvaluator struct {
	mu      sync.Mutex
	state   map[string]scaling.State
	gates   map[string]chan struct{}
	calls   map[string]int
	entered chan string
}

func newGatedEvaluator() *gatedEvaluator {
	return &gatedEvaluator{state: map[string]scaling.State{}, gates: map[string]chan struct{}{}, calls: map[string]int{}, entered: make(chan string, 100)}
}

func (g *gatedEvaluator) gate(name string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gates[name] == nil {
		g.gates[name] = make(chan struct{})
	}
	return g.gates[name]
}

func (g *gatedEvaluator) Evaluate(ctx context.Context, es *elastiv1alpha1.ElastiService) scaling.Result {
	gate := g.gate(es.Name)
	g.mu.Lock()
	g.calls[es.Name]++
	g.mu.Unlock()
	g.entered <- es.Name
	select {
	case <-gate:
	case <-ctx.Done():
		return scaling.Result{State: scaling.StateUnhealthy, Reason: "Timeout"}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return scaling.Result{State: g.state[es.Name]}
}

func es(name string, generation int64) *elastiv1alpha1.ElastiService {
	return &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Generation: generation}}
}

func waitEvent(t *testing.T, p *Poller, want string) {
	t.Helper()
	select {
	case ev := <-p.Events():
		if ev.Object.GetName() != want {
			t.Fatalf("event for %s, want %s", ev.Object.GetName(), want)
		}
	case <-time.After(time.Minute):
		t.Fatalf("no event for %s", want)
	}
}

// TestPollerNeverWaitsForABackend: Result answers at once whatever the
// backend does; a slow ElastiService holds one worker, never another
// ElastiService's evaluation; a result is used while fresh, refreshed after
// half the interval, dropped for a new spec and when not begun after
// notBefore, and its end is an event.
func TestPollerNeverWaitsForABackend(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	ev := newGatedEvaluator()
	p := &Poller{Evaluator: ev, Interval: 30 * time.Second, Timeout: time.Hour, Workers: 2, Clock: clk}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Start(ctx) }()
	defer func() {
		cancel()
		close(ev.gate("slow"))
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	// slow's backend never answers; fast's answers when released.
	if r := p.Result(es("slow", 1), time.Time{}); r != nil {
		t.Fatalf("first Result: %v, want nil", r)
	}
	<-ev.entered
	ev.mu.Lock()
	ev.state["fast"] = scaling.StateIdle
	ev.mu.Unlock()
	if r := p.Result(es("fast", 1), time.Time{}); r != nil {
		t.Fatalf("fast's first Result: %v, want nil", r)
	}
	if got := <-ev.entered; got != "fast" {
		t.Fatalf("evaluated %s, want fast", got)
	}
	// Asked again while running: nothing more is queued.
	p.Result(es("fast", 1), time.Time{})
	close(ev.gate("fast"))
	waitEvent(t, p, "fast")
	if r := p.Result(es("fast", 1), time.Time{}); r == nil || r.State != scaling.StateIdle {
		t.Fatalf("after the event: %v, want idle", r)
	}

	// Fresh: used, not re-evaluated.
	clk.Step(10 * time.Second)
	if r := p.Result(es("fast", 1), time.Time{}); r == nil {
		t.Fatal("a 10 s old result is not used")
	}
	// Past half the interval: still used, and refreshed.
	ev.mu.Lock()
	ev.state["fast"] = scaling.StateActive
	ev.mu.Unlock()
	clk.Step(10 * time.Second)
	if r := p.Result(es("fast", 1), time.Time{}); r == nil || r.State != scaling.StateIdle {
		t.Fatalf("a 20 s old result: %v, want the idle one while the refresh runs", r)
	}
	<-ev.entered
	waitEvent(t, p, "fast")
	if r := p.Result(es("fast", 1), time.Time{}); r == nil || r.State != scaling.StateActive {
		t.Fatalf("after the refresh: %v, want active", r)
	}
	// Past the interval (a polling requeue): not acted on, refreshed.
	clk.Step(31 * time.Second)
	if r := p.Result(es("fast", 1), time.Time{}); r != nil {
		t.Fatalf("a 31 s old result: %v, want nil while the refresh runs", r)
	}
	<-ev.entered
	waitEvent(t, p, "fast")
	if r := p.Result(es("fast", 1), time.Time{}); r == nil || r.State != scaling.StateActive {
		t.Fatalf("after the refresh: %v, want active", r)
	}
	// Begun before notBefore: not used, and evaluated again.
	if r := p.Result(es("fast", 1), clk.Now().Add(time.Second)); r != nil {
		t.Fatalf("a result begun before notBefore: %v, want nil", r)
	}
	clk.Step(time.Second)
	<-ev.entered
	waitEvent(t, p, "fast")
	if r := p.Result(es("fast", 1), clk.Now()); r == nil {
		t.Fatal("the result begun at notBefore is not used")
	}
	// A new spec: the old result does not count.
	if r := p.Result(es("fast", 2), time.Time{}); r != nil {
		t.Fatalf("a result of generation 1 for generation 2: %v", r)
	}
	<-ev.entered
	waitEvent(t, p, "fast")

	ev.mu.Lock()
	slowCalls, fastCalls := ev.calls["slow"], ev.calls["fast"]
	ev.mu.Unlock()
	if slowCalls != 1 || fastCalls != 5 {
		t.Errorf("evaluations: slow %d, fast %d; want 1 and 5", slowCalls, fastCalls)
	}
}

// TestPollerTimeout: an evaluation whose backend does not answer ends at the
// poller's timeout, as unhealthy, and its end is an event.
func TestPollerTimeout(t *testing.T) {
	ev := newGatedEvaluator()
	p := &Poller{Evaluator: ev, Interval: 30 * time.Second, Timeout: 50 * time.Millisecond, Workers: 1, Clock: clocktesting.NewFakeClock(time.Unix(1000, 0))}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = p.Start(ctx) }()
	key := types.NamespacedName{Namespace: "ns", Name: "stuck"}
	if _, _, ok := p.Latest(key); ok {
		t.Fatal("Latest before any evaluation: ok")
	}
	p.Result(es("stuck", 1), time.Time{})
	waitEvent(t, p, "stuck")
	if r := p.Result(es("stuck", 1), time.Time{}); r == nil || r.State != scaling.StateUnhealthy {
		t.Fatalf("after the timeout: %v, want unhealthy", r)
	}
	// Latest only looks: an hour on, it still gives the old result and
	// queues no evaluation.
	p.Clock.(*clocktesting.FakeClock).Step(time.Hour)
	if r, _, ok := p.Latest(key); !ok || r.State != scaling.StateUnhealthy {
		t.Fatalf("Latest: %v, %v; want the unhealthy result", r, ok)
	}
	p.mu.Lock()
	queued := p.entries[key].queued
	p.mu.Unlock()
	if queued {
		t.Error("Latest queued an evaluation")
	}
}

// TestPollerForget: a forgotten ElastiService's running evaluation is
// dropped, with no event.
func TestPollerForget(t *testing.T) {
	ev := newGatedEvaluator()
	p := &Poller{Evaluator: ev, Interval: 30 * time.Second, Timeout: time.Hour, Workers: 1, Clock: clocktesting.NewFakeClock(time.Unix(1000, 0))}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = p.Start(ctx) }()
	p.Result(es("gone", 1), time.Time{})
	<-ev.entered
	p.Forget(types.NamespacedName{Namespace: "ns", Name: "gone"})
	close(ev.gate("gone"))
	// The next evaluation, of another ElastiService on the one worker,
	// shows the first has ended.
	close(ev.gate("next"))
	p.Result(es("next", 1), time.Time{})
	waitEvent(t, p, "next")
}
