package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/hpacustody"
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
		want     phase
	}{
		{"new object", elastiv1alpha1.ElastiServiceStatus{}, 1, phaseServe},
		{"serve at zero is still serve", elastiv1alpha1.ElastiServiceStatus{Mode: elastiv1alpha1.ModeServe}, 0, phaseServe},
		{"grace period", elastiv1alpha1.ElastiServiceStatus{Mode: elastiv1alpha1.ModeProxy, Conditions: scalingDown}, 1, phaseScalingDown},
		{"asleep", elastiv1alpha1.ElastiServiceStatus{Mode: elastiv1alpha1.ModeProxy}, 0, phaseProxy},
		{"woken", elastiv1alpha1.ElastiServiceStatus{Mode: elastiv1alpha1.ModeProxy}, 2, phaseWaking},
	} {
		if got := currentPhase(tc.st, tc.replicas); got != tc.want {
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
	base := func(ph phase, mut func(*observed)) observed {
		o := observed{
			now:          now,
			phase:        ph,
			resolvers:    2,
			sleep:        open,
			pollInterval: 30 * time.Second,
			service:      serviceObserved{found: true, ports: ports},
			target:       targetObserved{found: true, replicas: 1},
			grace:        graceObserved{period: 2 * time.Second},
		}
		if mut != nil {
			mut(&o)
		}
		return o
	}
	serve := plan{slices: sliceDelete, mode: elastiv1alpha1.ModeServe, active: contract.ReasonServing, requeueAfter: 30 * time.Second}
	scaleDown := plan{slices: sliceEnsure, mode: elastiv1alpha1.ModeProxy, active: contract.ReasonScalingDown, startGrace: true, requeueAfter: 2 * time.Second}
	for _, tc := range []struct {
		name string
		o    observed
		want plan
	}{
		{"active triggers keep serving and poll", base(phaseServe, func(o *observed) { o.triggers = active }), serve},
		{"unhealthy triggers never scale down", base(phaseServe, func(o *observed) { o.triggers = unhealthy }), serve},
		{"idle starts the scale-down with the proxy slice", base(phaseServe, func(o *observed) { o.triggers = idle }),
			plan{slices: sliceEnsure, mode: elastiv1alpha1.ModeProxy, active: contract.ReasonScalingDown, startGrace: true, requeueAfter: 2 * time.Second}},
		{"idle but no resolvers stays up", base(phaseServe, func(o *observed) { o.triggers = idle; o.resolvers = 0 }), serve},
		{"idle but no ports stays up", base(phaseServe, func(o *observed) { o.triggers = idle; o.service.ports = nil }), serve},
		{"cooldown: poll when it ends", base(phaseServe, func(o *observed) {
			o.sleep = sleepgate.Verdict{Reason: sleepgate.ReasonInCooldown, Polls: true, Wait: 5 * time.Second}
		}),
			plan{slices: sliceDelete, mode: elastiv1alpha1.ModeServe, active: contract.ReasonServing, requeueAfter: 5 * time.Second}},
		{"no triggers: no polling", base(phaseServe, func(o *observed) { o.sleep = sleepgate.Verdict{Reason: sleepgate.ReasonNoTriggers} }),
			plan{slices: sliceDelete, mode: elastiv1alpha1.ModeServe, active: contract.ReasonServing}},
		{"wake in serve", base(phaseServe, func(o *observed) { o.demand.wake = true; o.triggers = nil }),
			plan{wake: true, slices: sliceDelete, mode: elastiv1alpha1.ModeServe, active: contract.ReasonServing, requeueAfter: 30 * time.Second}},
		{"target put to zero by someone else is proxied", base(phaseServe, func(o *observed) { o.target.replicas = 0 }),
			plan{slices: sliceEnsure, mode: elastiv1alpha1.ModeProxy, active: contract.ReasonScaledToZero}},
		{"keep-awake wakes a sleeping target", base(phaseProxy, func(o *observed) { o.target.replicas = 0; o.demand.keepAwake = true }),
			plan{wake: true, slices: sliceEnsure, mode: elastiv1alpha1.ModeProxy, active: contract.ReasonWaking}},
		{"grace running", base(phaseScalingDown, func(o *observed) { o.grace.startedAt = now.Add(-time.Second) }),
			plan{slices: sliceEnsure, mode: elastiv1alpha1.ModeProxy, active: contract.ReasonScalingDown, requeueAfter: time.Second}},
		{"new leader restarts the grace", base(phaseScalingDown, nil),
			plan{slices: sliceEnsure, mode: elastiv1alpha1.ModeProxy, active: contract.ReasonScalingDown, startGrace: true, requeueAfter: 2 * time.Second}},
		// What production sees when a request arrives in the grace period:
		// the target is still up with ready endpoints, so the resolver
		// forwards the request at once and reports it with an activation
		// call; observe does not evaluate the triggers for a wake.
		{"request during the grace calls the scale-down off", base(phaseScalingDown, func(o *observed) {
			o.grace.startedAt = now.Add(-time.Second)
			o.ownReady = true
			o.demand.wake = true
		}), plan{wake: true, slices: sliceDelete, mode: elastiv1alpha1.ModeServe, active: contract.ReasonServing, requeueAfter: 30 * time.Second}},
		{"request as the grace ends still calls the scale-down off", base(phaseScalingDown, func(o *observed) {
			o.grace.startedAt = now.Add(-3 * time.Second)
			o.ownReady = true
			o.demand.wake = true
		}), plan{wake: true, slices: sliceDelete, mode: elastiv1alpha1.ModeServe, active: contract.ReasonServing, requeueAfter: 30 * time.Second}},
		// Traffic is what the grace period waits for: an activation call
		// (handed to the leader, or forwarded by a follower) cancels the
		// sleep, and says so; any other wake only calls it off.
		{"traffic during the grace cancels the sleep", base(phaseScalingDown, func(o *observed) {
			o.grace.startedAt = now.Add(-time.Second)
			o.ownReady = true
			o.demand.wake, o.demand.traffic = true, true
		}), plan{wake: true, sleepCancelled: true, slices: sliceDelete, mode: elastiv1alpha1.ModeServe, active: contract.ReasonServing, requeueAfter: 30 * time.Second}},
		{"traffic during the grace without a ready endpoint cancels it too", base(phaseScalingDown, func(o *observed) {
			o.grace.startedAt = now.Add(-time.Second)
			o.demand.wake, o.demand.traffic = true, true
		}), plan{wake: true, sleepCancelled: true, slices: sliceEnsure, mode: elastiv1alpha1.ModeProxy, active: contract.ReasonWaking}},
		{"traffic in the grace period of a target already at zero wakes it", base(phaseScalingDown, func(o *observed) {
			o.grace.startedAt = now.Add(-time.Second)
			o.target.replicas = 0
			o.demand.wake, o.demand.traffic = true, true
		}), plan{wake: true, slices: sliceEnsure, mode: elastiv1alpha1.ModeProxy, active: contract.ReasonWaking}},
		{"keep-awake during the grace calls it off, not traffic", base(phaseScalingDown, func(o *observed) {
			o.grace.startedAt = now.Add(-time.Second)
			o.ownReady = true
			o.demand.keepAwake = true
		}), plan{wake: true, slices: sliceDelete, mode: elastiv1alpha1.ModeServe, active: contract.ReasonServing, requeueAfter: 30 * time.Second}},
		{"traffic in serve is a wake, no cancelled sleep", base(phaseServe, func(o *observed) {
			o.ownReady = true
			o.demand.wake, o.demand.traffic = true, true
		}), plan{wake: true, slices: sliceDelete, mode: elastiv1alpha1.ModeServe, active: contract.ReasonServing, requeueAfter: 30 * time.Second}},
		{"traffic while asleep is a wake, no cancelled sleep", base(phaseProxy, func(o *observed) {
			o.target.replicas = 0
			o.demand.wake, o.demand.traffic = true, true
		}), plan{wake: true, slices: sliceEnsure, mode: elastiv1alpha1.ModeProxy, active: contract.ReasonWaking}},
		// A longer grace period (spec.scaleDownGracePeriod) keeps waiting
		// where the operator's default would be over.
		{"a 30s grace period is not over after 3s", base(phaseScalingDown, func(o *observed) {
			o.grace.period = 30 * time.Second
			o.grace.startedAt = now.Add(-3 * time.Second)
			o.ownReady = true
			o.triggers = idle
		}), plan{slices: sliceEnsure, mode: elastiv1alpha1.ModeProxy, active: contract.ReasonScalingDown, requeueAfter: 27 * time.Second}},
		{"a 0s grace period is over at once", base(phaseScalingDown, func(o *observed) {
			o.grace.period = 0
			o.grace.startedAt = now
			o.ownReady = true
			o.triggers = idle
		}), plan{slices: sliceEnsure, mode: elastiv1alpha1.ModeProxy, active: contract.ReasonScaledToZero, sleep: true}},
		// At the end of the grace period the triggers are evaluated again.
		{"grace over, triggers still idle: sleep", base(phaseScalingDown, func(o *observed) {
			o.grace.startedAt = now.Add(-3 * time.Second)
			o.ownReady = true
			o.triggers = idle
		}), plan{slices: sliceEnsure, mode: elastiv1alpha1.ModeProxy, active: contract.ReasonScaledToZero, sleep: true}},
		{"grace over, triggers busy: called off, target untouched", base(phaseScalingDown, func(o *observed) {
			o.grace.startedAt = now.Add(-3 * time.Second)
			o.ownReady = true
			o.triggers = active
		}), serve},
		{"grace over, a trigger fails: not put to sleep", base(phaseScalingDown, func(o *observed) {
			o.grace.startedAt = now.Add(-3 * time.Second)
			o.ownReady = true
			o.triggers = unhealthy
		}), serve},
		{"grace over, triggers not evaluated: not put to sleep", base(phaseScalingDown, func(o *observed) {
			o.grace.startedAt = now.Add(-3 * time.Second)
			o.ownReady = true
		}), serve},
		{"grace over, the enabledPeriod closed meanwhile: called off", base(phaseScalingDown, func(o *observed) {
			o.grace.startedAt = now.Add(-3 * time.Second)
			o.ownReady = true
			o.triggers = idle
			o.sleep = sleepgate.Verdict{Reason: sleepgate.ReasonOutsideEnabledPeriod, Polls: true, Wait: time.Hour}
		}), serve},
		{"grace over, target kind no longer watched: called off", base(phaseScalingDown, func(o *observed) {
			o.grace.startedAt = now.Add(-3 * time.Second)
			o.ownReady = true
			o.triggers = idle
			o.target.watchReason = targets.ReasonWatchNotSynced
		}), serve},
		{"grace over, called off without a ready endpoint: keep holding", base(phaseScalingDown, func(o *observed) {
			o.grace.startedAt = now.Add(-3 * time.Second)
			o.triggers = active
		}), plan{slices: sliceEnsure, mode: elastiv1alpha1.ModeProxy, active: contract.ReasonWaking}},
		{"grace over, target already at zero: finish the scale-down", base(phaseScalingDown, func(o *observed) {
			o.grace.startedAt = now.Add(-3 * time.Second)
			o.target.replicas = 0
		}), plan{slices: sliceEnsure, mode: elastiv1alpha1.ModeProxy, active: contract.ReasonScaledToZero, sleep: true}},
		{"resolvers gone during the grace: fail open", base(phaseScalingDown, func(o *observed) { o.resolvers = 0 }),
			plan{failOpen: true, slices: sliceDelete, mode: elastiv1alpha1.ModeServe, active: contract.ReasonWaking, requeueAfter: 30 * time.Second}},
		{"asleep stays asleep", base(phaseProxy, func(o *observed) { o.target.replicas = 0 }),
			plan{slices: sliceEnsure, mode: elastiv1alpha1.ModeProxy, active: contract.ReasonScaledToZero}},
		{"asleep with a pre-warm schedule comes back at its next firing", base(phaseProxy, func(o *observed) { o.target.replicas = 0; o.demand.preWarmNext = now.Add(2 * time.Hour) }),
			plan{slices: sliceEnsure, mode: elastiv1alpha1.ModeProxy, active: contract.ReasonScaledToZero, requeueAfter: 2 * time.Hour}},
		{"serving polls before a later firing", base(phaseServe, func(o *observed) { o.triggers = active; o.demand.preWarmNext = now.Add(2 * time.Hour) }), serve},
		{"serving comes back at a firing before the next poll", base(phaseServe, func(o *observed) { o.triggers = active; o.demand.preWarmNext = now.Add(10 * time.Second) }),
			plan{slices: sliceDelete, mode: elastiv1alpha1.ModeServe, active: contract.ReasonServing, requeueAfter: 10 * time.Second}},
		{"asleep ignores a stale ready endpoint", base(phaseProxy, func(o *observed) { o.target.replicas = 0; o.ownReady = true }),
			plan{slices: sliceEnsure, mode: elastiv1alpha1.ModeProxy, active: contract.ReasonScaledToZero}},
		{"activation wakes", base(phaseProxy, func(o *observed) { o.target.replicas = 0; o.demand.wake = true }),
			plan{wake: true, slices: sliceEnsure, mode: elastiv1alpha1.ModeProxy, active: contract.ReasonWaking}},
		{"resolvers gone while asleep: wake and fail open", base(phaseProxy, func(o *observed) { o.target.replicas = 0; o.resolvers = 0 }),
			plan{wake: true, failOpen: true, slices: sliceDelete, mode: elastiv1alpha1.ModeServe, active: contract.ReasonWaking, requeueAfter: 30 * time.Second}},
		{"waking without endpoints keeps proxying", base(phaseWaking, nil),
			plan{slices: sliceEnsure, mode: elastiv1alpha1.ModeProxy, active: contract.ReasonWaking}},
		{"first ready endpoint: back to serve", base(phaseWaking, func(o *observed) { o.ownReady = true }), serve},
		{"Service gone: out of the data path", base(phaseProxy, func(o *observed) { o.service.found = false; o.target.replicas = 0 }),
			plan{slices: sliceDelete, mode: elastiv1alpha1.ModeServe, active: contract.ReasonServing, requeueAfter: 30 * time.Second}},
		{"target gone: no wake", base(phaseProxy, func(o *observed) { o.target.found = false; o.demand.wake = true }),
			plan{slices: sliceDelete, mode: elastiv1alpha1.ModeServe, active: contract.ReasonServing, requeueAfter: 30 * time.Second}},

		// An HPA in custody (package hpacustody) joins the triggers: all must say idle.
		{"HPA in custody reads zero, triggers idle: scale-down", base(phaseServe, func(o *observed) {
			o.triggers = idle
			o.hpa = hpacustody.Observed{Custody: true, Metrics: idle}
		}), scaleDown},
		{"HPA in custody reads nonzero, triggers idle: stays up", base(phaseServe, func(o *observed) {
			o.triggers = idle
			o.hpa = hpacustody.Observed{Custody: true, Metrics: active}
		}), serve},
		{"HPA in custody reads zero, a trigger active: stays up", base(phaseServe, func(o *observed) {
			o.triggers = active
			o.hpa = hpacustody.Observed{Custody: true, Metrics: idle}
		}), serve},
		{"HPA in custody without readings: stays up", base(phaseServe, func(o *observed) {
			o.triggers = idle
			o.hpa = hpacustody.Observed{Custody: true, Metrics: unhealthy}
		}), serve},
		{"HPA in custody not read: stays up", base(phaseServe, func(o *observed) {
			o.triggers = idle
			o.hpa = hpacustody.Observed{Custody: true}
		}), serve},
		{"no triggers, HPA in custody reads zero: it decides alone", base(phaseServe, func(o *observed) {
			o.noTriggers = true
			o.hpa = hpacustody.Observed{Custody: true, Metrics: idle}
		}), scaleDown},
		{"no triggers, HPA in custody reads nonzero: stays up", base(phaseServe, func(o *observed) {
			o.noTriggers = true
			o.hpa = hpacustody.Observed{Custody: true, Metrics: active}
		}), serve},
		{"no triggers, no HPA in custody: never sleeps", base(phaseServe, func(o *observed) {
			o.noTriggers = true
			o.triggers = idle // whatever a stray evaluation said
		}), serve},
		{"HPA that could take the last step itself: kept awake", base(phaseServe, func(o *observed) {
			o.triggers = idle
			o.hpa = hpacustody.Observed{Exposed: true}
		}), serve},
		{"grace over, HPA in custody still reads zero: sleep", base(phaseScalingDown, func(o *observed) {
			o.grace.startedAt = now.Add(-3 * time.Second)
			o.ownReady = true
			o.noTriggers = true
			o.hpa = hpacustody.Observed{Custody: true, Metrics: idle}
		}), plan{slices: sliceEnsure, mode: elastiv1alpha1.ModeProxy, active: contract.ReasonScaledToZero, sleep: true}},
		{"grace over, HPA in custody reads nonzero again: called off", base(phaseScalingDown, func(o *observed) {
			o.grace.startedAt = now.Add(-3 * time.Second)
			o.ownReady = true
			o.noTriggers = true
			o.hpa = hpacustody.Observed{Custody: true, Metrics: active}
		}), serve},
		{"grace over, the HPA floor was lost meanwhile: called off", base(phaseScalingDown, func(o *observed) {
			o.grace.startedAt = now.Add(-3 * time.Second)
			o.ownReady = true
			o.triggers = idle
			o.hpa = hpacustody.Observed{Exposed: true}
		}), serve},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, decide(tc.o), cmp.AllowUnexported(plan{})); diff != "" {
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
	base := func(ph phase, mut func(*observed)) observed {
		o := observed{now: now, phase: ph, sleep: open, target: targetObserved{found: true, replicas: 1}, grace: graceObserved{period: 2 * time.Second}}
		if mut != nil {
			mut(&o)
		}
		return o
	}
	for _, tc := range []struct {
		name string
		o    observed
		want bool
	}{
		{"serve", base(phaseServe, nil), true},
		{"serve, wake requested", base(phaseServe, func(o *observed) { o.demand.wake = true }), false},
		{"serve, in cooldown", base(phaseServe, func(o *observed) { o.sleep = sleepgate.Verdict{Reason: sleepgate.ReasonInCooldown, Polls: true} }), false},
		{"serve, target at zero", base(phaseServe, func(o *observed) { o.target.replicas = 0 }), false},
		{"serve, target missing", base(phaseServe, func(o *observed) { o.target.found = false }), false},
		{"grace just started", base(phaseScalingDown, func(o *observed) { o.grace.startedAt = now }), false},
		{"grace running", base(phaseScalingDown, func(o *observed) { o.grace.startedAt = now.Add(-1999 * time.Millisecond) }), false},
		{"grace over to the nanosecond", base(phaseScalingDown, func(o *observed) { o.grace.startedAt = now.Add(-2 * time.Second) }), true},
		{"grace long over", base(phaseScalingDown, func(o *observed) { o.grace.startedAt = now.Add(-time.Minute) }), true},
		{"grace start unknown (new leader)", base(phaseScalingDown, nil), false},
		{"grace over, wake requested", base(phaseScalingDown, func(o *observed) {
			o.grace.startedAt = now.Add(-time.Minute)
			o.demand.wake = true
		}), false},
		{"grace over, keep-awake", base(phaseScalingDown, func(o *observed) {
			o.grace.startedAt = now.Add(-time.Minute)
			o.sleep = sleepgate.Verdict{Reason: sleepgate.ReasonKeepAwake}
		}), false},
		{"grace over, target at zero", base(phaseScalingDown, func(o *observed) {
			o.grace.startedAt = now.Add(-time.Minute)
			o.target.replicas = 0
		}), false},
		{"proxy", base(phaseProxy, func(o *observed) { o.target.replicas = 0 }), false},
		{"waking", base(phaseWaking, nil), false},
	} {
		if got := tc.o.needsTriggers(); got != tc.want {
			t.Errorf("%s: needsTriggers() = %v, want %v", tc.name, got, tc.want)
		}
	}
}
