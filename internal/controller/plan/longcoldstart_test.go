package plan

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/scaling"
	"elasti.dev/elasti/internal/sleepgate"
)

// A target whose pods take longer than the cooldown to become ready is not
// put to sleep: the cooldown counts from the target's first ready endpoint
// after the wake, not from the wake. decide is fed the sleep gates'
// verdict on the ElastiService's status, as observe feeds it.
func TestDecideLongColdStartIsNotPutToSleep(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	woke := now.Add(-20 * time.Minute) // cooldown 10m: over, counted from the wake
	targetReady := func(status metav1.ConditionStatus, at time.Time) metav1.Condition {
		return metav1.Condition{Type: elastiv1alpha1.ConditionTargetReady, Status: status, LastTransitionTime: metav1.NewTime(at)}
	}
	es := func(c metav1.Condition) *elastiv1alpha1.ElastiService {
		return &elastiv1alpha1.ElastiService{
			ObjectMeta: metav1.ObjectMeta{Name: "llm", Namespace: "ai", CreationTimestamp: metav1.NewTime(now.Add(-48 * time.Hour))},
			Spec:       elastiv1alpha1.ElastiServiceSpec{Service: "llm", CooldownPeriod: 600, Triggers: []elastiv1alpha1.ScaleTrigger{{Type: elastiv1alpha1.TriggerTypePrometheus}}},
			Status: elastiv1alpha1.ElastiServiceStatus{Mode: elastiv1alpha1.ModeServe, LastScaledUpTime: &metav1.Time{Time: woke},
				Conditions: []metav1.Condition{c}},
		}
	}
	idle := &scaling.Result{State: scaling.StateIdle}
	ports := []elastiv1alpha1.ProxyPort{{Name: "http", Port: 80, ResolverPort: 20000}}
	serve := Plan{Slices: SliceDelete, Mode: elastiv1alpha1.ModeServe, Active: contract.ReasonServing}
	for _, tc := range []struct {
		name      string
		ready     metav1.Condition
		ownReady  bool
		wantGate  string
		wantSleep bool
	}{
		// The pod has not been Ready since the wake 20m ago (it went not
		// ready at the last sleep, before the wake).
		{"not ready since the wake", targetReady(metav1.ConditionFalse, woke.Add(-time.Hour)), false, sleepgate.ReasonWaking, false},
		// The reconcile that first sees the endpoint still reads the old
		// condition: it must not start the scale-down either.
		{"first ready endpoint seen now", targetReady(metav1.ConditionFalse, woke.Add(-time.Hour)), true, sleepgate.ReasonWaking, false},
		// Ready 2m ago, 18m after the wake: the cooldown runs from there.
		{"ready 2m ago", targetReady(metav1.ConditionTrue, now.Add(-2*time.Minute)), true, sleepgate.ReasonInCooldown, false},
		// Ready 11m ago: the cooldown is over.
		{"ready 11m ago", targetReady(metav1.ConditionTrue, now.Add(-11*time.Minute)), true, sleepgate.ReasonOpen, true},
		// Ready before the wake (a wake of a target already up): the
		// cooldown counts from the wake, as before.
		{"ready before the wake", targetReady(metav1.ConditionTrue, woke.Add(-time.Hour)), true, sleepgate.ReasonOpen, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := sleepgate.Evaluate(es(tc.ready), now)
			if v.Reason != tc.wantGate {
				t.Fatalf("sleep gate %s (%s), want %s", v.Reason, v.Message, tc.wantGate)
			}
			o := Observed{
				Now:          now,
				Phase:        PhaseServe,
				Resolvers:    2,
				OwnReady:     tc.ownReady,
				Sleep:        v,
				PollInterval: 30 * time.Second,
				Service:      ServiceObserved{Found: true, Ports: ports},
				Target:       TargetObserved{Found: true, Replicas: 1},
				Grace:        GraceObserved{Period: 2 * time.Second},
			}
			if o.NeedsTriggers() {
				o.Triggers = idle
			}
			got := Decide(o)
			if sleeping := got.StartGrace; sleeping != tc.wantSleep {
				t.Fatalf("decide started a scale-down: %v, want %v (plan %+v)", sleeping, tc.wantSleep, got)
			}
			if !tc.wantSleep {
				want := serve
				want.RequeueAfter = got.RequeueAfter
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("plan (-want +got):\n%s", diff)
				}
				if got.RequeueAfter <= 0 {
					t.Fatal("a target held awake by a gate that time or readiness lifts must be polled")
				}
			}
		})
	}
}
