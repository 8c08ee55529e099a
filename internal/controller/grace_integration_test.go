//go:build integration

package controller

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/activation"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/plan"
	"elasti.dev/elasti/internal/scaling"
	"elasti.dev/elasti/internal/testenv/estest"
)

// The grace period of these tests. Long enough that, on a loaded machine,
// what the tests do in it is done well before it ends; the tests do not wait
// it out more than once.
const testGrace = 10 * time.Second

// evaluation is one call of the triggers, as recordingTriggers saw it.
type evaluation struct {
	at time.Time
	// scalingDown: the ElastiService the reconcile read was in its grace
	// period.
	scalingDown bool
	state       scaling.State
}

// recordingTriggers are fakeTriggers that record every evaluation.
type recordingTriggers struct {
	*fakeTriggers
	mu    sync.Mutex
	evals []evaluation
}

func (r *recordingTriggers) Evaluate(ctx context.Context, es *elastiv1alpha1.ElastiService) scaling.Result {
	res := r.fakeTriggers.Evaluate(ctx, es)
	c := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionActive)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evals = append(r.evals, evaluation{at: time.Now(), scalingDown: c != nil && c.Reason == contract.ReasonScalingDown, state: res.State})
	return res
}

func (r *recordingTriggers) evaluations() []evaluation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]evaluation(nil), r.evals...)
}

// cachedScalingDown waits until the operator's own cache shows the
// ElastiService in its grace period, so that every later reconcile reads it
// so.
func cachedScalingDown(t *testing.T, op *operator, name string) {
	t.Helper()
	eventually(t, wait, "the operator's cache shows the scale-down", func() error {
		es := &elastiv1alpha1.ElastiService{}
		if err := op.mgr.GetClient().Get(context.Background(), types.NamespacedName{Namespace: op.ns, Name: name}, es); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionActive); c == nil || c.Reason != contract.ReasonScalingDown {
			return fmt.Errorf("Active is %+v", c)
		}
		return nil
	})
}

// resolverClient is the resolver's activation client, presenting a token of
// the resolver's ServiceAccount, against a real activation server in front
// of op.
func resolverClient(t *testing.T, op *operator) *activation.Client {
	t.Helper()
	url := startActivationServer(t, op.resolverNS, op.waker)
	tokenPath := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenPath, []byte(serviceAccountToken(t, op.resolverNS, "elasti-resolver")), 0o600); err != nil {
		t.Fatal(err)
	}
	return activation.NewClient(activation.ClientOptions{OperatorURL: strings.TrimSuffix(url, contract.ActivationPath), TokenPath: tokenPath})
}

// TestActivationDuringGraceCallsScaleDownOff: while a scale-down waits out
// its grace period the target still has ready endpoints, so the resolver
// forwards requests at once and reports them with an activation call. That
// call, through the real activation server with the resolver's identity,
// calls the scale-down off before the grace period ends: the target keeps
// its replicas, the status is back to serve and Serving, and the target is
// not put to sleep when that grace period would have ended.
func TestActivationDuringGraceCallsScaleDownOff(t *testing.T) {
	op := startOperator(t, operatorOptions{
		triggers: newFakeTriggers(scaling.StateIdle),
		cfg:      func(c *Config) { c.GracePeriod = testGrace },
	})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	createDeployment(t, op.ns, "web", 1)
	createService(t, op.ns, "web")
	setOwnSlice(t, op.ns, "web", true)
	// The wake below restarts the cooldown, so the next scale-down cannot
	// complete before testGrace+4s from the wake, after the check below.
	createES(t, op.ns, "web", "web", "web", estest.Cooldown(4))
	act := resolverClient(t, op)

	eventually(t, wait, "scale-down started", wantCondition(op.ns, "web", elastiv1alpha1.ConditionActive, metav1.ConditionTrue, contract.ReasonScalingDown))
	// The status records the scale-down (and the proxy ports) before the
	// proxy slice is written (docs/architecture.md, "The order of the
	// writes"): on a busy machine the slice comes a moment later.
	eventually(t, wait, "the proxy slice in the grace period", wantProxySlices(op.ns, "web", 1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	called := time.Now()
	resp, err := act.Activate(ctx, op.ns, "web")
	if err != nil || resp.Replicas != 1 {
		t.Fatalf("activation during the grace period: %+v %v; want the target's 1 replica", resp, err)
	}

	// The operator answers once the status records the wake, so the call
	// is off by now, long before the grace period could have ended.
	es := getES(t, op.ns, "web")
	if c := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionActive); c == nil || c.Reason != contract.ReasonServing {
		t.Fatalf("after the activation: Active is %+v, want Serving", c)
	}
	if es.Status.Mode != elastiv1alpha1.ModeServe {
		t.Fatalf("after the activation: mode %q, want serve", es.Status.Mode)
	}
	if es.Status.LastScaledUpTime == nil {
		t.Fatal("the wake that called the scale-down off did not restart the cooldown (lastScaledUpTime unset)")
	}
	eventually(t, wait, "proxy slice removed", wantProxySlices(op.ns, "web", 0))

	// Past the end of the grace period that was called off, the target still
	// has its replica and never slept.
	never(t, testGrace-time.Since(called)+time.Second, "the target keeps its replica", wantReplicas(op.ns, "web", 1))
	if es := getES(t, op.ns, "web"); es.Status.LastScaledDownTime != nil {
		t.Fatalf("the target was scaled to zero at %v", es.Status.LastScaledDownTime)
	}
}

// TestTriggersBusyAtGraceEndCallScaleDownOff: the triggers said idle, the
// scale-down started, then they turned busy during the grace period. At its
// end the operator evaluates them again, and calls the scale-down off: the
// target is left as it is, the proxy slice goes and the status is back to
// serve and Serving. The triggers are evaluated for that at the end of the
// grace period, not by the reconciles in it.
func TestTriggersBusyAtGraceEndCallScaleDownOff(t *testing.T) {
	trig := &recordingTriggers{fakeTriggers: newFakeTriggers(scaling.StateIdle)}
	op := startOperator(t, operatorOptions{
		triggers: trig,
		cfg:      func(c *Config) { c.GracePeriod = testGrace },
	})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	createDeployment(t, op.ns, "web", 2)
	createService(t, op.ns, "web")
	setOwnSlice(t, op.ns, "web", true)
	createES(t, op.ns, "web", "web", "web")

	cachedScalingDown(t, op, "web")
	trig.set(scaling.StateActive)
	// A change in the grace period reconciles the ElastiService; it must not
	// evaluate the triggers yet.
	patchAnnotation(t, op.ns, "web", "example.com/poke", "1")

	eventually(t, wait, "called off at the end of the grace period", wantCondition(op.ns, "web", elastiv1alpha1.ConditionActive, metav1.ConditionTrue, contract.ReasonServing))
	eventually(t, wait, "back to serve", wantMode(op.ns, "web", elastiv1alpha1.ModeServe))
	eventually(t, wait, "proxy slice removed", wantProxySlices(op.ns, "web", 0))
	eventually(t, wait, "Idle says why", wantCondition(op.ns, "web", elastiv1alpha1.ConditionIdle, metav1.ConditionFalse, plan.ReasonTriggerActive))
	if got := deploymentReplicas(t, op.ns, "web"); got != 2 {
		t.Fatalf("the target has %d replicas after the call-off, want its 2 untouched", got)
	}
	es := getES(t, op.ns, "web")
	if es.Status.LastScaledDownTime != nil {
		t.Fatalf("the target was scaled to zero at %v", es.Status.LastScaledDownTime)
	}
	if es.Status.LastScaledUpTime != nil {
		t.Fatalf("the call-off woke the target (lastScaledUpTime %v); it must leave it untouched", es.Status.LastScaledUpTime)
	}

	// The evaluation that started the scale-down is the last idle one; the
	// first one inside the grace period must come a grace period later. The
	// second of slack covers the time between a reconcile reading the clock
	// and evaluating. Between the two there may be one more evaluation of
	// the object as it was before the scale-down: the reconcile that started
	// it had also queued a refresh of the result (triggerpoll.Poller.Result),
	// which a busy machine runs only after the triggers turned busy. Its
	// result is not acted on: nothing inside the grace period is.
	evals := trig.evaluations()
	first := -1
	for i, e := range evals {
		if e.scalingDown {
			first = i
			break
		}
	}
	started := -1
	for i := range first {
		if evals[i].state == scaling.StateIdle {
			started = i
		}
	}
	if first < 1 || started < 0 {
		t.Fatalf("no idle evaluation followed by one at the end of the grace period: %+v", evals)
	}
	if first-started > 2 {
		t.Fatalf("%d evaluations between the one that started the scale-down and the end of the grace period, want at most the one queued before it: %+v", first-started-1, evals)
	}
	if d := evals[first].at.Sub(evals[started].at); d < testGrace-time.Second {
		t.Fatalf("the triggers were evaluated %s into a %s grace period, before it ended", d, testGrace)
	}
	if evals[first].state != scaling.StateActive {
		t.Fatalf("the evaluation at the end of the grace period said %s, want %s", evals[first].state, scaling.StateActive)
	}
}
