package controller

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/sleepgate"
)

func TestGracePeriodOf(t *testing.T) {
	def := 2 * time.Second
	for _, tc := range []struct {
		value string
		want  time.Duration
	}{
		{"", def},
		{"30s", 30 * time.Second},
		{"1m30s", 90 * time.Second},
		{"0s", 0},
		{"0", 0},
		{"10m", 10 * time.Minute},
		// What the CRD's rules refuse, should it be stored anyway.
		{"forever", def},
		{"99999999999h", def},
		{"-5s", 0},
		{"1h", 10 * time.Minute},
	} {
		spec := elastiv1alpha1.ElastiServiceSpec{ScaleDownGracePeriod: tc.value}
		if got := gracePeriodOf(spec, def); got != tc.want {
			t.Errorf("scaleDownGracePeriod %q: got %s, want %s", tc.value, got, tc.want)
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
	o := observed{
		now:       t0,
		phase:     phaseScalingDown,
		resolvers: 1,
		ownReady:  true,
		sleep:     sleepgate.Verdict{Reason: sleepgate.ReasonOpen, Polls: true},
		service:   serviceObserved{found: true, ports: []elastiv1alpha1.ProxyPort{{Name: "http", Port: 80, ResolverPort: 20000}}},
		target:    targetObserved{found: true, replicas: 1},
		grace:     graceObserved{period: 30 * time.Second, startedAt: t0.Add(-10 * time.Second)},
	}

	running := desiredStatus(es, o, decide(o), effects{}, "elasti-system")
	c := meta.FindStatusCondition(running.Conditions, elastiv1alpha1.ConditionActive)
	if want := "the triggers are idle; the target goes to zero after the 30s grace period, unless traffic reaches a resolver first"; c == nil || c.Message != want {
		t.Errorf("Active while the grace period runs: %+v, want the message %q", c, want)
	}

	traffic := o
	traffic.demand.wake, traffic.demand.traffic = true, true
	st := desiredStatus(es, traffic, decide(traffic), effects{woke: true, replicas: 1}, "elasti-system")
	if st.LastSleepCancelledTime == nil || !st.LastSleepCancelledTime.Time.Equal(t0) {
		t.Errorf("traffic in the grace period: lastSleepCancelledTime %v, want %v", st.LastSleepCancelledTime, t0)
	}
	if st.Mode != elastiv1alpha1.ModeServe || st.LastScaledUpTime == nil {
		t.Errorf("traffic in the grace period: mode %q, lastScaledUpTime %v; want serve and the cooldown restarted", st.Mode, st.LastScaledUpTime)
	}

	asked := o
	asked.demand.wake = true
	st = desiredStatus(es, asked, decide(asked), effects{woke: true, replicas: 1}, "elasti-system")
	if !st.LastSleepCancelledTime.Equal(&earlier) {
		t.Errorf("a wake asked for in the grace period: lastSleepCancelledTime %v, want it left at %v", st.LastSleepCancelledTime, earlier)
	}
}
