//go:build integration

package controller

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/wakecalls"
	"elasti.dev/elasti/internal/scaling"
	"elasti.dev/elasti/internal/testenv/estest"
)

// sleepCancelledNote starts the note of every SleepCancelled Event.
const sleepCancelledNote = "sleep cancelled: traffic seen during the confirmation window"

// withGracePeriod sets spec.scaleDownGracePeriod.
func withGracePeriod(d string) func(*elastiv1alpha1.ElastiService) {
	return func(es *elastiv1alpha1.ElastiService) { es.Spec.ScaleDownGracePeriod = d }
}

// scalingDown checks that the ElastiService is in the grace period of a
// scale-down, with its target still up.
func scalingDown(ns, name string) func() error {
	return func() error {
		if err := wantCondition(ns, name, elastiv1alpha1.ConditionActive, metav1.ConditionTrue, contract.ReasonScalingDown)(); err != nil {
			return err
		}
		return wantReplicas(ns, name, 1)()
	}
}

// wantSleepCancelled checks what a cancelled sleep leaves behind once it
// is back to serve: the target up, the cooldown restarted, the time
// recorded and one Normal SleepCancelled Event; the other call-off's Event
// is not there. It returns the time recorded.
func wantSleepCancelled(t *testing.T, ns, name string) *metav1.Time {
	t.Helper()
	es := getES(t, ns, name)
	if got := deploymentReplicas(t, ns, name); got != 1 {
		t.Fatalf("the target has %d replicas, want its 1 untouched", got)
	}
	if es.Status.LastScaledUpTime == nil {
		t.Fatal("the cancelled sleep did not restart the cooldown (lastScaledUpTime unset)")
	}
	if es.Status.LastSleepCancelledTime == nil {
		t.Fatal("status.lastSleepCancelledTime is not set")
	}
	if es.Status.LastScaledDownTime != nil {
		t.Fatalf("the target was scaled to zero at %v", es.Status.LastScaledDownTime)
	}
	eventually(t, wait, "a SleepCancelled Event", wantEvent(ns, name, EventSleepCancelled))
	evs := eventsOf(t, ns, name, EventSleepCancelled)
	if len(evs) != 1 {
		t.Fatalf("%d SleepCancelled Events, want 1: %+v", len(evs), evs)
	}
	if ev := evs[0]; ev.Type != corev1.EventTypeNormal || !strings.HasPrefix(ev.Note, sleepCancelledNote) {
		t.Fatalf("SleepCancelled Event %s %q: want a Normal Event starting %q", ev.Type, ev.Note, sleepCancelledNote)
	}
	if evs := eventsOf(t, ns, name, EventScaleDownCalledOff); len(evs) != 0 {
		t.Fatalf("traffic was reported as another writer's raise: %+v", evs)
	}
	return es.Status.LastSleepCancelledTime
}

// TestTrafficInConfirmationWindowCancelsSleep: the ElastiService's own
// grace period (30s) runs well past the operator's --grace-period (300ms
// here), so the target is still up when the resolver reports a request
// through the real activation server. That report cancels the sleep, and
// says so: a SleepCancelled Event and status.lastSleepCancelledTime.
func TestTrafficInConfirmationWindowCancelsSleep(t *testing.T) {
	op := startOperator(t, operatorOptions{triggers: newFakeTriggers(scaling.StateIdle)})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	createDeployment(t, op.ns, "web", 1)
	createService(t, op.ns, "web")
	setOwnSlice(t, op.ns, "web", true)
	// The wake restarts the 4s cooldown: no new scale-down starts while
	// the test looks at the first one's end.
	createES(t, op.ns, "web", "web", "web", withGracePeriod("30s"), estest.Cooldown(4))
	act := resolverClient(t, op)

	eventually(t, wait, "scale-down started", scalingDown(op.ns, "web"))
	c := meta.FindStatusCondition(getES(t, op.ns, "web").Status.Conditions, elastiv1alpha1.ConditionActive)
	if c == nil || !strings.Contains(c.Message, "after the 30s grace period") {
		t.Fatalf("Active %+v: want a message naming the 30s grace period", c)
	}
	// Well past the operator's 300ms, the ElastiService's 30s still runs.
	never(t, 2*time.Second, "the target waits out the ElastiService's grace period", scalingDown(op.ns, "web"))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := act.Activate(ctx, op.ns, "web")
	if err != nil || resp.Replicas != 1 {
		t.Fatalf("activation during the grace period: %+v %v; want the target's 1 replica", resp, err)
	}
	// The call is answered once the status records the wake.
	es := getES(t, op.ns, "web")
	if c := meta.FindStatusCondition(es.Status.Conditions, elastiv1alpha1.ConditionActive); c == nil || c.Reason != contract.ReasonServing {
		t.Fatalf("after the activation: Active is %+v, want Serving", c)
	}
	if es.Status.Mode != elastiv1alpha1.ModeServe {
		t.Fatalf("after the activation: mode %q, want serve", es.Status.Mode)
	}
	eventually(t, wait, "proxy slice removed", wantProxySlices(op.ns, "web", 0))
	wantSleepCancelled(t, op.ns, "web")
}

// TestForwardedTrafficCancelsSleepAndAWakeDoesNot: an activation call that
// reaches a follower, which hands it to the leader through the wake-now
// annotation, is traffic too and cancels the sleep. A wake-now someone sets
// by hand (kubectl elasti wake) calls the next scale-down off as it always
// did, and is not recorded as traffic.
func TestForwardedTrafficCancelsSleepAndAWakeDoesNot(t *testing.T) {
	op := startOperator(t, operatorOptions{triggers: newFakeTriggers(scaling.StateIdle)})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	createDeployment(t, op.ns, "api", 1)
	createService(t, op.ns, "api")
	setOwnSlice(t, op.ns, "api", true)
	// A 3s cooldown leaves the time to see serve between the scale-downs.
	createES(t, op.ns, "api", "api", "api", withGracePeriod("30s"), estest.Cooldown(3))
	follower := &wakecalls.Waker{Reader: k8s, Writer: k8s, Elected: make(chan struct{})} // never elected
	url := startActivationServer(t, op.resolverNS, follower)
	token := serviceAccountToken(t, op.resolverNS, "elasti-resolver")

	eventually(t, wait, "scale-down started", scalingDown(op.ns, "api"))
	code, resp, err := activate(url, token, op.ns, "api")
	if err != nil || code != http.StatusOK || resp.Replicas != 1 {
		t.Fatalf("activation through a follower: %d %+v %v", code, resp, err)
	}
	eventually(t, wait, "back to serve", wantMode(op.ns, "api", elastiv1alpha1.ModeServe))
	eventually(t, wait, "wake-now consumed", func() error {
		if v, ok := getES(t, op.ns, "api").Annotations[contract.AnnotationWakeNow]; ok {
			return fmt.Errorf("wake-now still set to %q", v)
		}
		return nil
	})
	cancelled := wantSleepCancelled(t, op.ns, "api")

	// The cooldown over, the next scale-down starts; a wake asked for
	// by hand calls it off without being taken for traffic.
	eventually(t, wait, "next scale-down started", scalingDown(op.ns, "api"))
	woke := getES(t, op.ns, "api").Status.LastScaledUpTime
	patchAnnotation(t, op.ns, "api", contract.AnnotationWakeNow, time.Now().UTC().Format(time.RFC3339Nano))
	eventually(t, wait, "the wake calls it off", func() error {
		es := getES(t, op.ns, "api")
		if es.Status.Mode != elastiv1alpha1.ModeServe || es.Status.LastScaledUpTime.Equal(woke) {
			return fmt.Errorf("mode %q, lastScaledUpTime %v", es.Status.Mode, es.Status.LastScaledUpTime)
		}
		return nil
	})
	es := getES(t, op.ns, "api")
	if !es.Status.LastSleepCancelledTime.Equal(cancelled) {
		t.Fatalf("a wake by hand moved lastSleepCancelledTime from %v to %v", cancelled, es.Status.LastSleepCancelledTime)
	}
	if n := len(eventsOf(t, op.ns, "api", EventSleepCancelled)); n != 1 {
		t.Fatalf("%d SleepCancelled Events after a wake by hand, want still 1", n)
	}
}

// TestScaleDownGracePeriodPerService drives the grace period with a fake
// clock: past the operator's --grace-period (300ms here) the target keeps
// its replica, because its ElastiService asks for 30s; past those 30s it
// goes to zero.
func TestScaleDownGracePeriodPerService(t *testing.T) {
	fake := clocktesting.NewFakeClock(time.Now())
	op := startOperator(t, operatorOptions{
		triggers: newFakeTriggers(scaling.StateIdle),
		cfg:      func(c *Config) { c.Clock = fake },
	})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	createDeployment(t, op.ns, "slow", 1)
	createService(t, op.ns, "slow")
	setOwnSlice(t, op.ns, "slow", true)
	createES(t, op.ns, "slow", "slow", "slow", withGracePeriod("30s"))
	eventually(t, wait, "reconciled", wantMode(op.ns, "slow", elastiv1alpha1.ModeServe))

	fake.Step(2 * time.Second) // past the 1s cooldown
	eventually(t, wait, "scale-down started", scalingDown(op.ns, "slow"))

	// The operator's grace period is long over; a reconcile then must not
	// scale the target down.
	fake.Step(5 * time.Second)
	patchAnnotation(t, op.ns, "slow", "example.com/poke", "1")
	never(t, 3*time.Second, "inside the ElastiService's grace period", scalingDown(op.ns, "slow"))

	fake.Step(26 * time.Second) // 31s into the grace period
	patchAnnotation(t, op.ns, "slow", "example.com/poke", "2")
	eventually(t, wait, "asleep after the ElastiService's grace period", wantReplicas(op.ns, "slow", 0))
	eventually(t, wait, "Active=False", wantCondition(op.ns, "slow", elastiv1alpha1.ConditionActive, metav1.ConditionFalse, contract.ReasonScaledToZero))
	es := getES(t, op.ns, "slow")
	if es.Status.LastSleepCancelledTime != nil {
		t.Fatalf("a sleep that went through recorded lastSleepCancelledTime %v", es.Status.LastSleepCancelledTime)
	}
}
