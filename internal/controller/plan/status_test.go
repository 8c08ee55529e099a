package plan

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
	o := Observed{
		Now:       t0,
		Resolvers: 1,
		Sleep:     sleepgate.Verdict{Reason: sleepgate.ReasonOpen, Polls: true},
		Triggers:  &scaling.Result{State: scaling.StateActive, Message: "trigger 0: at or above the threshold 1", Value: 3},
		Service:   ServiceObserved{Found: true, Ports: []elastiv1alpha1.ProxyPort{{Name: "http", Port: 80, ResolverPort: 20000}}},
		Target:    TargetObserved{Found: true, Replicas: 1},
	}
	p := Decide(o)
	st := DesiredStatus(es, o, p, Effects{}, "elasti-system")
	if !StatusChanged(es.Status, st) {
		t.Fatal("the first status is no change")
	}
	Stamp(&st, t0)
	es.Status = st

	o.Now = t0.Add(time.Hour)
	o.Triggers = &scaling.Result{State: scaling.StateActive, Message: "trigger 0: at or above the threshold 1", Value: 7}
	if next := DesiredStatus(es, o, Decide(o), Effects{}, "elasti-system"); StatusChanged(es.Status, next) {
		t.Fatalf("a poll with the same outcome changed the status:\n%+v\n%+v", es.Status, next)
	}
	// Not evaluating (cooldown) keeps the trigger conditions.
	o.Triggers, o.Sleep = nil, sleepgate.Verdict{Reason: sleepgate.ReasonInCooldown, Polls: true, Wait: time.Minute}
	next := DesiredStatus(es, o, Decide(o), Effects{}, "elasti-system")
	if StatusChanged(es.Status, next) {
		t.Fatal("skipping the evaluation changed the status")
	}
	// Unhealthy triggers show a reason.
	o.Sleep = sleepgate.Verdict{Reason: sleepgate.ReasonOpen, Polls: true}
	o.Triggers = &scaling.Result{State: scaling.StateUnhealthy, Reason: scaling.ReasonEmptyResult, Message: "empty"}
	next = DesiredStatus(es, o, Decide(o), Effects{}, "elasti-system")
	c := meta.FindStatusCondition(next.Conditions, elastiv1alpha1.ConditionTriggersHealthy)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != scaling.ReasonEmptyResult || !c.LastTransitionTime.Time.Equal(o.Now) {
		t.Fatalf("TriggersHealthy %+v", c)
	}
	if next.ObservedGeneration != 3 {
		t.Fatalf("observedGeneration %d", next.ObservedGeneration)
	}
	// A wake records lastScaledUpTime.
	next = DesiredStatus(es, o, Decide(o), Effects{Woke: true}, "elasti-system")
	if next.LastScaledUpTime == nil || !next.LastScaledUpTime.Time.Equal(o.Now) {
		t.Fatalf("lastScaledUpTime %v", next.LastScaledUpTime)
	}
}

// TestStatusWordsTheHPA: the Idle condition says why an HPA keeps the
// target awake.
func TestStatusWordsTheHPA(t *testing.T) {
	es := &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "n"},
		Spec: elastiv1alpha1.ElastiServiceSpec{Service: "web", Autoscaler: &elastiv1alpha1.AutoscalerRef{Type: elastiv1alpha1.AutoscalerHPA, Name: "web"}}}
	o := Observed{
		Now:        time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC),
		Resolvers:  1,
		Sleep:      sleepgate.Verdict{Reason: sleepgate.ReasonOpen, Polls: true},
		NoTriggers: true,
		Service:    ServiceObserved{Found: true, Ports: []elastiv1alpha1.ProxyPort{{Name: "http", Port: 80, ResolverPort: 20000}}},
		Target:     TargetObserved{Found: true, Replicas: 1},
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
		o.HPA = tc.hpa
		st := DesiredStatus(es, o, Decide(o), Effects{}, "elasti-system")
		c := meta.FindStatusCondition(st.Conditions, elastiv1alpha1.ConditionIdle)
		if c == nil || c.Status != tc.status || c.Reason != tc.reason {
			t.Errorf("%s: Idle %+v, want %s/%s", tc.name, c, tc.status, tc.reason)
		}
	}
}

// A wake that cancels a sleep records when; another wake from the grace
// period leaves the record as it was. The ScalingDown message names the
// grace period in force.
func TestDesiredStatusRecordsCancelledSleep(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	earlier := metav1.NewTime(t0.Add(-time.Hour))
	es := &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "n"}, Spec: elastiv1alpha1.ElastiServiceSpec{Service: "s"}}
	es.Status.LastSleepCancelledTime = &earlier
	o := Observed{
		Now:       t0,
		Phase:     PhaseScalingDown,
		Resolvers: 1,
		OwnReady:  true,
		Sleep:     sleepgate.Verdict{Reason: sleepgate.ReasonOpen, Polls: true},
		Service:   ServiceObserved{Found: true, Ports: []elastiv1alpha1.ProxyPort{{Name: "http", Port: 80, ResolverPort: 20000}}},
		Target:    TargetObserved{Found: true, Replicas: 1},
		Grace:     GraceObserved{Period: 30 * time.Second, StartedAt: t0.Add(-10 * time.Second)},
	}

	running := DesiredStatus(es, o, Decide(o), Effects{}, "elasti-system")
	c := meta.FindStatusCondition(running.Conditions, elastiv1alpha1.ConditionActive)
	if want := "the triggers are idle; the target goes to zero after the 30s grace period, unless traffic reaches a resolver first"; c == nil || c.Message != want {
		t.Errorf("Active while the grace period runs: %+v, want the message %q", c, want)
	}

	traffic := o
	traffic.Demand.Wake, traffic.Demand.Traffic = true, true
	st := DesiredStatus(es, traffic, Decide(traffic), Effects{Woke: true, Replicas: 1}, "elasti-system")
	if st.LastSleepCancelledTime == nil || !st.LastSleepCancelledTime.Time.Equal(t0) {
		t.Errorf("traffic in the grace period: lastSleepCancelledTime %v, want %v", st.LastSleepCancelledTime, t0)
	}
	if st.Mode != elastiv1alpha1.ModeServe || st.LastScaledUpTime == nil {
		t.Errorf("traffic in the grace period: mode %q, lastScaledUpTime %v; want serve and the cooldown restarted", st.Mode, st.LastScaledUpTime)
	}

	asked := o
	asked.Demand.Wake = true
	st = DesiredStatus(es, asked, Decide(asked), Effects{Woke: true, Replicas: 1}, "elasti-system")
	if !st.LastSleepCancelledTime.Equal(&earlier) {
		t.Errorf("a wake asked for in the grace period: lastSleepCancelledTime %v, want it left at %v", st.LastSleepCancelledTime, earlier)
	}
}

// A wake whose status write met a conflict is recorded by the next status,
// although that reconcile finds the target up and wakes nothing; a newer
// lastScaledUpTime is left alone.
func TestDesiredStatusRecordsAnUnrecordedWake(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	older := metav1.NewTime(t0.Add(-time.Hour))
	es := &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "n"}, Spec: elastiv1alpha1.ElastiServiceSpec{Service: "s"}}
	es.Status.LastScaledUpTime = &older
	o := Observed{
		Now:       t0.Add(time.Second),
		Phase:     PhaseWaking,
		Resolvers: 1,
		Sleep:     sleepgate.Verdict{Reason: sleepgate.ReasonOpen, Polls: true},
		Service:   ServiceObserved{Found: true, Ports: []elastiv1alpha1.ProxyPort{{Name: "http", Port: 80, ResolverPort: 20000}}},
		Target:    TargetObserved{Found: true, Replicas: 1},
	}
	o.Demand.WokeUnrecorded = t0
	st := DesiredStatus(es, o, Decide(o), Effects{}, "elasti-system")
	if st.LastScaledUpTime == nil || !st.LastScaledUpTime.Time.Equal(t0) {
		t.Errorf("lastScaledUpTime %v, want the unrecorded wake at %v", st.LastScaledUpTime, t0)
	}
	newer := metav1.NewTime(t0.Add(time.Minute))
	es.Status.LastScaledUpTime = &newer
	st = DesiredStatus(es, o, Decide(o), Effects{}, "elasti-system")
	if !st.LastScaledUpTime.Equal(&newer) {
		t.Errorf("lastScaledUpTime %v, want the newer %v left alone", st.LastScaledUpTime, newer)
	}
}
