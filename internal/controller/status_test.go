package controller

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/controller/hpacustody"
	"elasti.dev/elasti/internal/scaling"
	"elasti.dev/elasti/internal/sleepgate"
)

// An unchanged world must give an unchanged status, so that polling never
// writes.
func TestDesiredStatusIsStable(t *testing.T) {
	es := &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "n", Generation: 3}, Spec: elastiv1alpha1.ElastiServiceSpec{Service: "s"}}
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	o := observed{
		now:       t0,
		resolvers: 1,
		sleep:     sleepgate.Verdict{Reason: sleepgate.ReasonOpen, Polls: true},
		triggers:  &scaling.Result{State: scaling.StateActive, Message: "trigger 0: at or above the threshold 1", Value: 3},
		service:   serviceObserved{found: true, ports: []elastiv1alpha1.ProxyPort{{Name: "http", Port: 80, ResolverPort: 20000}}},
		target:    targetObserved{found: true, replicas: 1},
	}
	p := decide(o)
	st := desiredStatus(es, o, p, effects{}, "elasti-system")
	if !statusChanged(es.Status, st) {
		t.Fatal("the first status is no change")
	}
	stamp(&st, t0)
	es.Status = st

	o.now = t0.Add(time.Hour)
	o.triggers = &scaling.Result{State: scaling.StateActive, Message: "trigger 0: at or above the threshold 1", Value: 7}
	if next := desiredStatus(es, o, decide(o), effects{}, "elasti-system"); statusChanged(es.Status, next) {
		t.Fatalf("a poll with the same outcome changed the status:\n%+v\n%+v", es.Status, next)
	}
	// Not evaluating (cooldown) keeps the trigger conditions.
	o.triggers, o.sleep = nil, sleepgate.Verdict{Reason: sleepgate.ReasonInCooldown, Polls: true, Wait: time.Minute}
	next := desiredStatus(es, o, decide(o), effects{}, "elasti-system")
	if statusChanged(es.Status, next) {
		t.Fatal("skipping the evaluation changed the status")
	}
	// Unhealthy triggers show a reason.
	o.sleep = sleepgate.Verdict{Reason: sleepgate.ReasonOpen, Polls: true}
	o.triggers = &scaling.Result{State: scaling.StateUnhealthy, Reason: scaling.ReasonEmptyResult, Message: "empty"}
	next = desiredStatus(es, o, decide(o), effects{}, "elasti-system")
	c := meta.FindStatusCondition(next.Conditions, elastiv1alpha1.ConditionTriggersHealthy)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != scaling.ReasonEmptyResult || !c.LastTransitionTime.Time.Equal(o.now) {
		t.Fatalf("TriggersHealthy %+v", c)
	}
	if next.ObservedGeneration != 3 {
		t.Fatalf("observedGeneration %d", next.ObservedGeneration)
	}
	// A wake records lastScaledUpTime.
	next = desiredStatus(es, o, decide(o), effects{woke: true}, "elasti-system")
	if next.LastScaledUpTime == nil || !next.LastScaledUpTime.Time.Equal(o.now) {
		t.Fatalf("lastScaledUpTime %v", next.LastScaledUpTime)
	}
}

// TestStatusWordsTheHPA: the Idle condition says why an HPA keeps the
// target awake.
func TestStatusWordsTheHPA(t *testing.T) {
	es := &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "n"},
		Spec: elastiv1alpha1.ElastiServiceSpec{Service: "web", Autoscaler: &elastiv1alpha1.AutoscalerRef{Type: elastiv1alpha1.AutoscalerHPA, Name: "web"}}}
	o := observed{
		now:        time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC),
		resolvers:  1,
		sleep:      sleepgate.Verdict{Reason: sleepgate.ReasonOpen, Polls: true},
		noTriggers: true,
		service:    serviceObserved{found: true, ports: []elastiv1alpha1.ProxyPort{{Name: "http", Port: 80, ResolverPort: 20000}}},
		target:     targetObserved{found: true, replicas: 1},
	}
	for _, tc := range []struct {
		name   string
		hpa    hpacustody.Observed
		status metav1.ConditionStatus
		reason string
	}{
		{"floor not raisable", hpacustody.Observed{Exposed: true}, metav1.ConditionFalse, hpacustody.ReasonFloorNotRaised},
		{"held, reading nonzero", hpacustody.Observed{Custody: true, Metrics: &scaling.Result{State: scaling.StateActive, Message: "busy"}}, metav1.ConditionFalse, ReasonTriggerActive},
		{"held, reading zero", hpacustody.Observed{Custody: true, Metrics: &scaling.Result{State: scaling.StateIdle, Message: "zero"}}, metav1.ConditionTrue, ReasonAllTriggersIdle},
		{"held, no readings", hpacustody.Observed{Custody: true, Metrics: &scaling.Result{State: scaling.StateUnhealthy, Reason: hpacustody.ReasonMetricsUnavailable}}, metav1.ConditionUnknown, ReasonTriggersUnhealthy},
	} {
		o.hpa = tc.hpa
		st := desiredStatus(es, o, decide(o), effects{}, "elasti-system")
		c := meta.FindStatusCondition(st.Conditions, elastiv1alpha1.ConditionIdle)
		if c == nil || c.Status != tc.status || c.Reason != tc.reason {
			t.Errorf("%s: Idle %+v, want %s/%s", tc.name, c, tc.status, tc.reason)
		}
	}
}
