package plan

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/hpacustody"
	"elasti.dev/elasti/internal/controller/refusals"
	"elasti.dev/elasti/internal/controller/targets"
	"elasti.dev/elasti/internal/scaling"
	"elasti.dev/elasti/internal/sleepgate"
)

func TestCurrentPhase(t *testing.T) {
	scalingDown := []metav1.Condition{{Type: elastiv1alpha1.ConditionActive, Status: metav1.ConditionTrue, Reason: contract.ReasonScalingDown}}
	for _, tc := range []struct {
		name     string
		st       elastiv1alpha1.ElastiServiceStatus
		replicas int32
		want     Phase
	}{
		{"new object", elastiv1alpha1.ElastiServiceStatus{}, 1, PhaseServe},
		{"serve at zero is still serve", elastiv1alpha1.ElastiServiceStatus{Mode: elastiv1alpha1.ModeServe}, 0, PhaseServe},
		{"grace period", elastiv1alpha1.ElastiServiceStatus{Mode: elastiv1alpha1.ModeProxy, Conditions: scalingDown}, 1, PhaseScalingDown},
		{"asleep", elastiv1alpha1.ElastiServiceStatus{Mode: elastiv1alpha1.ModeProxy}, 0, PhaseProxy},
		{"woken", elastiv1alpha1.ElastiServiceStatus{Mode: elastiv1alpha1.ModeProxy}, 2, PhaseWaking},
	} {
		if got := CurrentPhase(tc.st, tc.replicas); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestDecide(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	idle := &scaling.Result{State: scaling.StateIdle}
	active := &scaling.Result{State: scaling.StateActive}
	unhealthy := &scaling.Result{State: scaling.StateUnhealthy, Reason: scaling.ReasonEmptyResult}
	ports := []elastiv1alpha1.ProxyPort{{Name: "http", Port: 80, ResolverPort: 20000}}
	open := sleepgate.Verdict{Reason: sleepgate.ReasonOpen, Polls: true}
	base := func(ph Phase, mut func(*Observed)) Observed {
		o := Observed{
			Now:          now,
			Phase:        ph,
			Resolvers:    2,
			Sleep:        open,
			PollInterval: 30 * time.Second,
			Service:      ServiceObserved{Found: true, Ports: ports},
			Target:       TargetObserved{Found: true, Replicas: 1},
			Grace:        GraceObserved{Period: 2 * time.Second},
		}
		if mut != nil {
			mut(&o)
		}
		return o
	}
	serve := Plan{Slices: SliceDelete, Mode: elastiv1alpha1.ModeServe, Active: contract.ReasonServing, RequeueAfter: 30 * time.Second}
	scaleDown := Plan{Slices: SliceEnsure, Mode: elastiv1alpha1.ModeProxy, Active: contract.ReasonScalingDown, StartGrace: true, RequeueAfter: 2 * time.Second}
	for _, tc := range []struct {
		name string
		o    Observed
		want Plan
	}{
		{"active triggers keep serving and poll", base(PhaseServe, func(o *Observed) { o.Triggers = active }), serve},
		{"unhealthy triggers never scale down", base(PhaseServe, func(o *Observed) { o.Triggers = unhealthy }), serve},
		{"idle starts the scale-down with the proxy slice", base(PhaseServe, func(o *Observed) { o.Triggers = idle }),
			Plan{Slices: SliceEnsure, Mode: elastiv1alpha1.ModeProxy, Active: contract.ReasonScalingDown, StartGrace: true, RequeueAfter: 2 * time.Second}},
		{"idle but no resolvers stays up", base(PhaseServe, func(o *Observed) { o.Triggers = idle; o.Resolvers = 0 }), serve},
		{"idle but no ports stays up", base(PhaseServe, func(o *Observed) { o.Triggers = idle; o.Service.Ports = nil }), serve},
		{"cooldown: poll when it ends", base(PhaseServe, func(o *Observed) {
			o.Sleep = sleepgate.Verdict{Reason: sleepgate.ReasonInCooldown, Polls: true, Wait: 5 * time.Second}
		}),
			Plan{Slices: SliceDelete, Mode: elastiv1alpha1.ModeServe, Active: contract.ReasonServing, RequeueAfter: 5 * time.Second}},
		{"no triggers: no polling", base(PhaseServe, func(o *Observed) { o.Sleep = sleepgate.Verdict{Reason: sleepgate.ReasonNoTriggers} }),
			Plan{Slices: SliceDelete, Mode: elastiv1alpha1.ModeServe, Active: contract.ReasonServing}},
		{"keep-awake: no polling", base(PhaseServe, func(o *Observed) { o.Sleep = sleepgate.Verdict{Reason: sleepgate.ReasonKeepAwake} }),
			Plan{Slices: SliceDelete, Mode: elastiv1alpha1.ModeServe, Active: contract.ReasonServing}},
		// The metrics API serves the podMetrics trigger's rate: measured
		// at the polling interval while a gate holds, never acted on.
		{"keep-awake, rate served: polls for the rate", base(PhaseServe, func(o *Observed) {
			o.Sleep = sleepgate.Verdict{Reason: sleepgate.ReasonKeepAwake}
			o.RateWanted = true
		}), serve},
		{"wake in serve", base(PhaseServe, func(o *Observed) { o.Demand.Wake = true; o.Triggers = nil }),
			Plan{Wake: true, Slices: SliceDelete, Mode: elastiv1alpha1.ModeServe, Active: contract.ReasonServing, RequeueAfter: 30 * time.Second}},
		{"target put to zero by someone else is proxied", base(PhaseServe, func(o *Observed) { o.Target.Replicas = 0 }),
			Plan{Slices: SliceEnsure, Mode: elastiv1alpha1.ModeProxy, Active: contract.ReasonScaledToZero}},
		{"keep-awake wakes a sleeping target", base(PhaseProxy, func(o *Observed) { o.Target.Replicas = 0; o.Demand.KeepAwake = true }),
			Plan{Wake: true, Slices: SliceEnsure, Mode: elastiv1alpha1.ModeProxy, Active: contract.ReasonWaking}},
		{"grace running", base(PhaseScalingDown, func(o *Observed) { o.Grace.StartedAt = now.Add(-time.Second) }),
			Plan{Slices: SliceEnsure, Mode: elastiv1alpha1.ModeProxy, Active: contract.ReasonScalingDown, RequeueAfter: time.Second}},
		{"new leader restarts the grace", base(PhaseScalingDown, nil),
			Plan{Slices: SliceEnsure, Mode: elastiv1alpha1.ModeProxy, Active: contract.ReasonScalingDown, StartGrace: true, RequeueAfter: 2 * time.Second}},
		// What production sees when a request arrives in the grace period:
		// the target is still up with ready endpoints, so the resolver
		// forwards the request at once and reports it with an activation
		// call; observe does not evaluate the triggers for a wake.
		{"request during the grace calls the scale-down off", base(PhaseScalingDown, func(o *Observed) {
			o.Grace.StartedAt = now.Add(-time.Second)
			o.OwnReady = true
			o.Demand.Wake = true
		}), Plan{Wake: true, Slices: SliceDelete, Mode: elastiv1alpha1.ModeServe, Active: contract.ReasonServing, RequeueAfter: 30 * time.Second}},
		{"request as the grace ends still calls the scale-down off", base(PhaseScalingDown, func(o *Observed) {
			o.Grace.StartedAt = now.Add(-3 * time.Second)
			o.OwnReady = true
			o.Demand.Wake = true
		}), Plan{Wake: true, Slices: SliceDelete, Mode: elastiv1alpha1.ModeServe, Active: contract.ReasonServing, RequeueAfter: 30 * time.Second}},
		// Traffic is what the grace period waits for: an activation call
		// (handed to the leader, or forwarded by a follower) cancels the
		// sleep, and says so; any other wake only calls it off.
		{"traffic during the grace cancels the sleep", base(PhaseScalingDown, func(o *Observed) {
			o.Grace.StartedAt = now.Add(-time.Second)
			o.OwnReady = true
			o.Demand.Wake, o.Demand.Traffic = true, true
		}), Plan{Wake: true, SleepCancelled: true, Slices: SliceDelete, Mode: elastiv1alpha1.ModeServe, Active: contract.ReasonServing, RequeueAfter: 30 * time.Second}},
		{"traffic during the grace without a ready endpoint cancels it too", base(PhaseScalingDown, func(o *Observed) {
			o.Grace.StartedAt = now.Add(-time.Second)
			o.Demand.Wake, o.Demand.Traffic = true, true
		}), Plan{Wake: true, SleepCancelled: true, Slices: SliceEnsure, Mode: elastiv1alpha1.ModeProxy, Active: contract.ReasonWaking}},
		{"traffic in the grace period of a target already at zero wakes it", base(PhaseScalingDown, func(o *Observed) {
			o.Grace.StartedAt = now.Add(-time.Second)
			o.Target.Replicas = 0
			o.Demand.Wake, o.Demand.Traffic = true, true
		}), Plan{Wake: true, Slices: SliceEnsure, Mode: elastiv1alpha1.ModeProxy, Active: contract.ReasonWaking}},
		{"keep-awake during the grace calls it off, not traffic", base(PhaseScalingDown, func(o *Observed) {
			o.Grace.StartedAt = now.Add(-time.Second)
			o.OwnReady = true
			o.Demand.KeepAwake = true
		}), Plan{Wake: true, Slices: SliceDelete, Mode: elastiv1alpha1.ModeServe, Active: contract.ReasonServing, RequeueAfter: 30 * time.Second}},
		{"traffic in serve is a wake, no cancelled sleep", base(PhaseServe, func(o *Observed) {
			o.OwnReady = true
			o.Demand.Wake, o.Demand.Traffic = true, true
		}), Plan{Wake: true, Slices: SliceDelete, Mode: elastiv1alpha1.ModeServe, Active: contract.ReasonServing, RequeueAfter: 30 * time.Second}},
		{"traffic while asleep is a wake, no cancelled sleep", base(PhaseProxy, func(o *Observed) {
			o.Target.Replicas = 0
			o.Demand.Wake, o.Demand.Traffic = true, true
		}), Plan{Wake: true, Slices: SliceEnsure, Mode: elastiv1alpha1.ModeProxy, Active: contract.ReasonWaking}},
		// A longer grace period (spec.scaleDownGracePeriod) keeps waiting
		// where the operator's default would be over.
		{"a 30s grace period is not over after 3s", base(PhaseScalingDown, func(o *Observed) {
			o.Grace.Period = 30 * time.Second
			o.Grace.StartedAt = now.Add(-3 * time.Second)
			o.OwnReady = true
			o.Triggers = idle
		}), Plan{Slices: SliceEnsure, Mode: elastiv1alpha1.ModeProxy, Active: contract.ReasonScalingDown, RequeueAfter: 27 * time.Second}},
		{"a 0s grace period is over at once", base(PhaseScalingDown, func(o *Observed) {
			o.Grace.Period = 0
			o.Grace.StartedAt = now
			o.OwnReady = true
			o.Triggers = idle
		}), Plan{Slices: SliceEnsure, Mode: elastiv1alpha1.ModeProxy, Active: contract.ReasonScaledToZero, Sleep: true}},
		// At the end of the grace period the triggers are evaluated again.
		{"grace over, triggers still idle: sleep", base(PhaseScalingDown, func(o *Observed) {
			o.Grace.StartedAt = now.Add(-3 * time.Second)
			o.OwnReady = true
			o.Triggers = idle
		}), Plan{Slices: SliceEnsure, Mode: elastiv1alpha1.ModeProxy, Active: contract.ReasonScaledToZero, Sleep: true}},
		{"grace over, triggers busy: called off, target untouched", base(PhaseScalingDown, func(o *Observed) {
			o.Grace.StartedAt = now.Add(-3 * time.Second)
			o.OwnReady = true
			o.Triggers = active
		}), serve},
		{"grace over, a trigger fails: not put to sleep", base(PhaseScalingDown, func(o *Observed) {
			o.Grace.StartedAt = now.Add(-3 * time.Second)
			o.OwnReady = true
			o.Triggers = unhealthy
		}), serve},
		{"grace over, triggers not evaluated: not put to sleep", base(PhaseScalingDown, func(o *Observed) {
			o.Grace.StartedAt = now.Add(-3 * time.Second)
			o.OwnReady = true
		}), serve},
		// The evaluation begun after the grace period runs off the
		// reconcile (package triggerpoll): wait for it, neither sleep nor
		// call off.
		{"grace over, its evaluation not answered yet: wait", base(PhaseScalingDown, func(o *Observed) {
			o.Grace.StartedAt = now.Add(-3 * time.Second)
			o.OwnReady = true
			o.TriggersPending = true
		}), Plan{Slices: SliceEnsure, Mode: elastiv1alpha1.ModeProxy, Active: contract.ReasonScalingDown, RequeueAfter: 30 * time.Second}},
		{"grace over, the enabledPeriod closed meanwhile: called off", base(PhaseScalingDown, func(o *Observed) {
			o.Grace.StartedAt = now.Add(-3 * time.Second)
			o.OwnReady = true
			o.Triggers = idle
			o.Sleep = sleepgate.Verdict{Reason: sleepgate.ReasonOutsideEnabledPeriod, Polls: true, Wait: time.Hour}
		}), serve},
		{"grace over, target kind no longer watched: called off", base(PhaseScalingDown, func(o *Observed) {
			o.Grace.StartedAt = now.Add(-3 * time.Second)
			o.OwnReady = true
			o.Triggers = idle
			o.Target.WatchReason = targets.ReasonWatchNotSynced
		}), serve},
		{"grace over, called off without a ready endpoint: keep holding", base(PhaseScalingDown, func(o *Observed) {
			o.Grace.StartedAt = now.Add(-3 * time.Second)
			o.Triggers = active
		}), Plan{Slices: SliceEnsure, Mode: elastiv1alpha1.ModeProxy, Active: contract.ReasonWaking}},
		{"grace over, target already at zero: finish the scale-down", base(PhaseScalingDown, func(o *Observed) {
			o.Grace.StartedAt = now.Add(-3 * time.Second)
			o.Target.Replicas = 0
		}), Plan{Slices: SliceEnsure, Mode: elastiv1alpha1.ModeProxy, Active: contract.ReasonScaledToZero, Sleep: true}},
		{"resolvers gone during the grace: fail open", base(PhaseScalingDown, func(o *Observed) { o.Resolvers = 0 }),
			Plan{FailOpen: true, Slices: SliceDelete, Mode: elastiv1alpha1.ModeServe, Active: contract.ReasonWaking, RequeueAfter: 30 * time.Second}},
		{"asleep stays asleep", base(PhaseProxy, func(o *Observed) { o.Target.Replicas = 0 }),
			Plan{Slices: SliceEnsure, Mode: elastiv1alpha1.ModeProxy, Active: contract.ReasonScaledToZero}},
		{"asleep with a pre-warm schedule comes back at its next firing", base(PhaseProxy, func(o *Observed) { o.Target.Replicas = 0; o.Demand.PreWarmNext = now.Add(2 * time.Hour) }),
			Plan{Slices: SliceEnsure, Mode: elastiv1alpha1.ModeProxy, Active: contract.ReasonScaledToZero, RequeueAfter: 2 * time.Hour}},
		{"serving polls before a later firing", base(PhaseServe, func(o *Observed) { o.Triggers = active; o.Demand.PreWarmNext = now.Add(2 * time.Hour) }), serve},
		{"serving comes back at a firing before the next poll", base(PhaseServe, func(o *Observed) { o.Triggers = active; o.Demand.PreWarmNext = now.Add(10 * time.Second) }),
			Plan{Slices: SliceDelete, Mode: elastiv1alpha1.ModeServe, Active: contract.ReasonServing, RequeueAfter: 10 * time.Second}},
		{"asleep ignores a stale ready endpoint", base(PhaseProxy, func(o *Observed) { o.Target.Replicas = 0; o.OwnReady = true }),
			Plan{Slices: SliceEnsure, Mode: elastiv1alpha1.ModeProxy, Active: contract.ReasonScaledToZero}},
		{"activation wakes", base(PhaseProxy, func(o *Observed) { o.Target.Replicas = 0; o.Demand.Wake = true }),
			Plan{Wake: true, Slices: SliceEnsure, Mode: elastiv1alpha1.ModeProxy, Active: contract.ReasonWaking}},
		{"resolvers gone while asleep: wake and fail open", base(PhaseProxy, func(o *Observed) { o.Target.Replicas = 0; o.Resolvers = 0 }),
			Plan{Wake: true, FailOpen: true, Slices: SliceDelete, Mode: elastiv1alpha1.ModeServe, Active: contract.ReasonWaking, RequeueAfter: 30 * time.Second}},
		{"waking without endpoints keeps proxying", base(PhaseWaking, nil),
			Plan{Slices: SliceEnsure, Mode: elastiv1alpha1.ModeProxy, Active: contract.ReasonWaking}},
		{"first ready endpoint: back to serve", base(PhaseWaking, func(o *Observed) { o.OwnReady = true }), serve},
		{"Service gone: out of the data path", base(PhaseProxy, func(o *Observed) { o.Service.Found = false; o.Target.Replicas = 0 }),
			Plan{Slices: SliceDelete, Mode: elastiv1alpha1.ModeServe, Active: contract.ReasonServing, RequeueAfter: 30 * time.Second}},
		{"target gone: no wake", base(PhaseProxy, func(o *Observed) { o.Target.Found = false; o.Demand.Wake = true }),
			Plan{Slices: SliceDelete, Mode: elastiv1alpha1.ModeServe, Active: contract.ReasonServing, RequeueAfter: 30 * time.Second}},

		// An HPA in custody (package hpacustody) joins the triggers: all must say idle.
		{"HPA in custody reads zero, triggers idle: scale-down", base(PhaseServe, func(o *Observed) {
			o.Triggers = idle
			o.HPA = hpacustody.Observed{Custody: true, Metrics: idle}
		}), scaleDown},
		{"HPA in custody reads nonzero, triggers idle: stays up", base(PhaseServe, func(o *Observed) {
			o.Triggers = idle
			o.HPA = hpacustody.Observed{Custody: true, Metrics: active}
		}), serve},
		{"HPA in custody reads zero, a trigger active: stays up", base(PhaseServe, func(o *Observed) {
			o.Triggers = active
			o.HPA = hpacustody.Observed{Custody: true, Metrics: idle}
		}), serve},
		{"HPA in custody without readings: stays up", base(PhaseServe, func(o *Observed) {
			o.Triggers = idle
			o.HPA = hpacustody.Observed{Custody: true, Metrics: unhealthy}
		}), serve},
		{"HPA in custody not read: stays up", base(PhaseServe, func(o *Observed) {
			o.Triggers = idle
			o.HPA = hpacustody.Observed{Custody: true}
		}), serve},
		{"no triggers, HPA in custody reads zero: it decides alone", base(PhaseServe, func(o *Observed) {
			o.NoTriggers = true
			o.HPA = hpacustody.Observed{Custody: true, Metrics: idle}
		}), scaleDown},
		{"no triggers, HPA in custody reads nonzero: stays up", base(PhaseServe, func(o *Observed) {
			o.NoTriggers = true
			o.HPA = hpacustody.Observed{Custody: true, Metrics: active}
		}), serve},
		{"no triggers, no HPA in custody: never sleeps", base(PhaseServe, func(o *Observed) {
			o.NoTriggers = true
			o.Triggers = idle // whatever a stray evaluation said
		}), serve},
		{"HPA that could take the last step itself: kept awake", base(PhaseServe, func(o *Observed) {
			o.Triggers = idle
			o.HPA = hpacustody.Observed{Exposed: true}
		}), serve},
		{"grace over, HPA in custody still reads zero: sleep", base(PhaseScalingDown, func(o *Observed) {
			o.Grace.StartedAt = now.Add(-3 * time.Second)
			o.OwnReady = true
			o.NoTriggers = true
			o.HPA = hpacustody.Observed{Custody: true, Metrics: idle}
		}), Plan{Slices: SliceEnsure, Mode: elastiv1alpha1.ModeProxy, Active: contract.ReasonScaledToZero, Sleep: true}},
		{"grace over, HPA in custody reads nonzero again: called off", base(PhaseScalingDown, func(o *Observed) {
			o.Grace.StartedAt = now.Add(-3 * time.Second)
			o.OwnReady = true
			o.NoTriggers = true
			o.HPA = hpacustody.Observed{Custody: true, Metrics: active}
		}), serve},
		{"grace over, the HPA floor was lost meanwhile: called off", base(PhaseScalingDown, func(o *Observed) {
			o.Grace.StartedAt = now.Add(-3 * time.Second)
			o.OwnReady = true
			o.Triggers = idle
			o.HPA = hpacustody.Observed{Exposed: true}
		}), serve},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Decide(tc.o)); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// TestNeedsTriggers: observe evaluates the triggers in serve and once the
// grace period is over, never in the middle of it.
func TestNeedsTriggers(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	open := sleepgate.Verdict{Reason: sleepgate.ReasonOpen, Polls: true}
	base := func(ph Phase, mut func(*Observed)) Observed {
		o := Observed{Now: now, Phase: ph, Sleep: open, Target: TargetObserved{Found: true, Replicas: 1}, Grace: GraceObserved{Period: 2 * time.Second}}
		if mut != nil {
			mut(&o)
		}
		return o
	}
	for _, tc := range []struct {
		name string
		o    Observed
		want bool
	}{
		{"serve", base(PhaseServe, nil), true},
		{"serve, wake requested", base(PhaseServe, func(o *Observed) { o.Demand.Wake = true }), false},
		{"serve, in cooldown", base(PhaseServe, func(o *Observed) { o.Sleep = sleepgate.Verdict{Reason: sleepgate.ReasonInCooldown, Polls: true} }), false},
		{"serve, target at zero", base(PhaseServe, func(o *Observed) { o.Target.Replicas = 0 }), false},
		{"serve, target missing", base(PhaseServe, func(o *Observed) { o.Target.Found = false }), false},
		{"grace just started", base(PhaseScalingDown, func(o *Observed) { o.Grace.StartedAt = now }), false},
		{"grace running", base(PhaseScalingDown, func(o *Observed) { o.Grace.StartedAt = now.Add(-1999 * time.Millisecond) }), false},
		{"grace over to the nanosecond", base(PhaseScalingDown, func(o *Observed) { o.Grace.StartedAt = now.Add(-2 * time.Second) }), true},
		{"grace long over", base(PhaseScalingDown, func(o *Observed) { o.Grace.StartedAt = now.Add(-time.Minute) }), true},
		{"grace start unknown (new leader)", base(PhaseScalingDown, nil), false},
		{"grace over, wake requested", base(PhaseScalingDown, func(o *Observed) {
			o.Grace.StartedAt = now.Add(-time.Minute)
			o.Demand.Wake = true
		}), false},
		{"grace over, keep-awake", base(PhaseScalingDown, func(o *Observed) {
			o.Grace.StartedAt = now.Add(-time.Minute)
			o.Sleep = sleepgate.Verdict{Reason: sleepgate.ReasonKeepAwake}
		}), false},
		{"grace over, target at zero", base(PhaseScalingDown, func(o *Observed) {
			o.Grace.StartedAt = now.Add(-time.Minute)
			o.Target.Replicas = 0
		}), false},
		{"proxy", base(PhaseProxy, func(o *Observed) { o.Target.Replicas = 0 }), false},
		{"dozing: its Ready pods take traffic past the resolvers", base(PhaseProxy, func(o *Observed) { o.Doze.Dozing = true }), true},
		{"dozing, wake requested", base(PhaseProxy, func(o *Observed) { o.Doze.Dozing, o.Demand.Wake = true, true }), false},
		{"waking", base(PhaseWaking, nil), false},
	} {
		if got := tc.o.NeedsTriggers(); got != tc.want {
			t.Errorf("%s: needsTriggers() = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestMeasuresRate(t *testing.T) {
	open := sleepgate.Verdict{Reason: sleepgate.ReasonOpen, Polls: true}
	cooldown := sleepgate.Verdict{Reason: sleepgate.ReasonInCooldown, Polls: true, Wait: time.Hour}
	base := func(ph Phase, mut func(*Observed)) Observed {
		o := Observed{Phase: ph, Sleep: cooldown, RateWanted: true, Target: TargetObserved{Found: true, Replicas: 1}}
		if mut != nil {
			mut(&o)
		}
		return o
	}
	for _, tc := range []struct {
		name string
		o    Observed
		want bool
	}{
		{"serve, in cooldown", base(PhaseServe, nil), true},
		{"serve, keep-awake", base(PhaseServe, func(o *Observed) { o.Sleep = sleepgate.Verdict{Reason: sleepgate.ReasonKeepAwake} }), true},
		{"serve, wake requested", base(PhaseServe, func(o *Observed) { o.Demand.Wake = true }), true},
		{"serve, rate not served", base(PhaseServe, func(o *Observed) { o.RateWanted = false }), false},
		// The evaluation the decision needs gives the rate anyway.
		{"serve, gates open", base(PhaseServe, func(o *Observed) { o.Sleep = open }), false},
		{"serve, target at zero", base(PhaseServe, func(o *Observed) { o.Target.Replicas = 0 }), false},
		{"serve, target missing", base(PhaseServe, func(o *Observed) { o.Target.Found = false }), false},
		{"serve, Service refused", base(PhaseServe, func(o *Observed) { o.Service.Refusal = refusals.Refusal{Reason: "Test"} }), false},
		// The resolvers' counts are the rate in proxy mode.
		{"grace running", base(PhaseScalingDown, nil), false},
		{"proxy", base(PhaseProxy, func(o *Observed) { o.Target.Replicas = 0 }), false},
	} {
		if got := tc.o.MeasuresRate(); got != tc.want {
			t.Errorf("%s: MeasuresRate() = %v, want %v", tc.name, got, tc.want)
		}
	}
}
