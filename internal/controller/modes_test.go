package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/scaling"
)

func TestCurrentPhase(t *testing.T) {
	scalingDown := []metav1.Condition{{Type: elastiv1alpha1.ConditionActive, Status: metav1.ConditionTrue, Reason: ReasonScalingDown}}
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
	open := sleepGate{allowed: true, polls: true}
	base := func(ph phase, mut func(*observed)) observed {
		o := observed{now: now, phase: ph, serviceFound: true, targetFound: true, replicas: 1, ports: ports,
			resolvers: 2, sleep: open, gracePeriod: 2 * time.Second, pollInterval: 30 * time.Second}
		if mut != nil {
			mut(&o)
		}
		return o
	}
	serve := plan{slices: sliceDelete, mode: elastiv1alpha1.ModeServe, active: ReasonServing, requeueAfter: 30 * time.Second}
	for _, tc := range []struct {
		name string
		o    observed
		want plan
	}{
		{"active triggers keep serving and poll", base(phaseServe, func(o *observed) { o.triggers = active }), serve},
		{"unhealthy triggers never scale down", base(phaseServe, func(o *observed) { o.triggers = unhealthy }), serve},
		{"idle starts the scale-down with the proxy slice", base(phaseServe, func(o *observed) { o.triggers = idle }),
			plan{slices: sliceEnsure, mode: elastiv1alpha1.ModeProxy, active: ReasonScalingDown, startGrace: true, requeueAfter: 2 * time.Second}},
		{"idle but no resolvers stays up", base(phaseServe, func(o *observed) { o.triggers = idle; o.resolvers = 0 }), serve},
		{"idle but no ports stays up", base(phaseServe, func(o *observed) { o.triggers = idle; o.ports = nil }), serve},
		{"cooldown: poll when it ends", base(phaseServe, func(o *observed) { o.sleep = sleepGate{polls: true, wait: 5 * time.Second} }),
			plan{slices: sliceDelete, mode: elastiv1alpha1.ModeServe, active: ReasonServing, requeueAfter: 5 * time.Second}},
		{"no triggers: no polling", base(phaseServe, func(o *observed) { o.sleep = sleepGate{} }),
			plan{slices: sliceDelete, mode: elastiv1alpha1.ModeServe, active: ReasonServing}},
		{"wake in serve", base(phaseServe, func(o *observed) { o.wakeRequested = true; o.triggers = nil }),
			plan{wake: true, slices: sliceDelete, mode: elastiv1alpha1.ModeServe, active: ReasonServing, requeueAfter: 30 * time.Second}},
		{"target put to zero by someone else is proxied", base(phaseServe, func(o *observed) { o.replicas = 0 }),
			plan{slices: sliceEnsure, mode: elastiv1alpha1.ModeProxy, active: ReasonScaledToZero}},
		{"keep-awake wakes a sleeping target", base(phaseProxy, func(o *observed) { o.replicas = 0; o.keepAwake = true }),
			plan{wake: true, slices: sliceEnsure, mode: elastiv1alpha1.ModeProxy, active: ReasonWaking}},
		{"grace running", base(phaseScalingDown, func(o *observed) { o.graceStartedAt = now.Add(-time.Second) }),
			plan{slices: sliceEnsure, mode: elastiv1alpha1.ModeProxy, active: ReasonScalingDown, requeueAfter: time.Second}},
		{"grace over: sleep", base(phaseScalingDown, func(o *observed) { o.graceStartedAt = now.Add(-3 * time.Second) }),
			plan{slices: sliceEnsure, mode: elastiv1alpha1.ModeProxy, active: ReasonScaledToZero, sleep: true}},
		{"new leader restarts the grace", base(phaseScalingDown, nil),
			plan{slices: sliceEnsure, mode: elastiv1alpha1.ModeProxy, active: ReasonScalingDown, startGrace: true, requeueAfter: 2 * time.Second}},
		{"request during the grace calls the scale-down off", base(phaseScalingDown, func(o *observed) { o.wakeRequested = true; o.ownReady = true }),
			plan{wake: true, slices: sliceDelete, mode: elastiv1alpha1.ModeServe, active: ReasonServing, requeueAfter: 30 * time.Second}},
		{"resolvers gone during the grace: fail open", base(phaseScalingDown, func(o *observed) { o.resolvers = 0 }),
			plan{failOpen: true, slices: sliceDelete, mode: elastiv1alpha1.ModeServe, active: ReasonWaking, requeueAfter: 30 * time.Second}},
		{"asleep stays asleep", base(phaseProxy, func(o *observed) { o.replicas = 0 }),
			plan{slices: sliceEnsure, mode: elastiv1alpha1.ModeProxy, active: ReasonScaledToZero}},
		{"asleep ignores a stale ready endpoint", base(phaseProxy, func(o *observed) { o.replicas = 0; o.ownReady = true }),
			plan{slices: sliceEnsure, mode: elastiv1alpha1.ModeProxy, active: ReasonScaledToZero}},
		{"activation wakes", base(phaseProxy, func(o *observed) { o.replicas = 0; o.wakeRequested = true }),
			plan{wake: true, slices: sliceEnsure, mode: elastiv1alpha1.ModeProxy, active: ReasonWaking}},
		{"resolvers gone while asleep: wake and fail open", base(phaseProxy, func(o *observed) { o.replicas = 0; o.resolvers = 0 }),
			plan{wake: true, failOpen: true, slices: sliceDelete, mode: elastiv1alpha1.ModeServe, active: ReasonWaking, requeueAfter: 30 * time.Second}},
		{"waking without endpoints keeps proxying", base(phaseWaking, nil),
			plan{slices: sliceEnsure, mode: elastiv1alpha1.ModeProxy, active: ReasonWaking}},
		{"first ready endpoint: back to serve", base(phaseWaking, func(o *observed) { o.ownReady = true }), serve},
		{"Service gone: out of the data path", base(phaseProxy, func(o *observed) { o.serviceFound = false; o.replicas = 0 }),
			plan{slices: sliceDelete, mode: elastiv1alpha1.ModeServe, active: ReasonServing, requeueAfter: 30 * time.Second}},
		{"target gone: no wake", base(phaseProxy, func(o *observed) { o.targetFound = false; o.wakeRequested = true }),
			plan{slices: sliceDelete, mode: elastiv1alpha1.ModeServe, active: ReasonServing, requeueAfter: 30 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, decide(tc.o), cmp.AllowUnexported(plan{})); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

func TestSleepGate(t *testing.T) {
	created := time.Date(2030, 1, 6, 8, 0, 0, 0, time.UTC) // a Sunday
	es := func(mut func(*elastiv1alpha1.ElastiService)) *elastiv1alpha1.ElastiService {
		e := &elastiv1alpha1.ElastiService{
			ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)},
			Spec:       elastiv1alpha1.ElastiServiceSpec{CooldownPeriod: 600, Triggers: []elastiv1alpha1.ScaleTrigger{{Type: "prometheus"}}},
		}
		if mut != nil {
			mut(e)
		}
		return e
	}
	woke := func(at time.Time) func(*elastiv1alpha1.ElastiService) {
		return func(e *elastiv1alpha1.ElastiService) { e.Status.LastScaledUpTime = &metav1.Time{Time: at} }
	}
	window := func(e *elastiv1alpha1.ElastiService) {
		e.Spec.EnabledPeriod = &elastiv1alpha1.EnabledPeriod{Schedule: "0 9 * * 1-5", Duration: "8h"}
	}
	monday := time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		es   *elastiv1alpha1.ElastiService
		now  time.Time
		want sleepGate
	}{
		{"no triggers", es(func(e *elastiv1alpha1.ElastiService) { e.Spec.Triggers = nil }), created.Add(time.Hour), sleepGate{reason: gateNoTriggers}},
		{"keep-awake", es(func(e *elastiv1alpha1.ElastiService) {
			e.Annotations = map[string]string{"elasti.dev/keep-awake": "true"}
		}), created.Add(time.Hour), sleepGate{reason: gateKeepAwake}},
		{"cooldown from creation", es(nil), created.Add(4 * time.Minute), sleepGate{polls: true, wait: 6 * time.Minute, reason: gateCooldown}},
		{"cooldown from the last wake", es(woke(created.Add(time.Hour))), created.Add(time.Hour + 9*time.Minute), sleepGate{polls: true, wait: time.Minute, reason: gateCooldown}},
		{"cooldown over", es(woke(created)), created.Add(10 * time.Minute), sleepGate{allowed: true, polls: true, reason: gateOpen}},
		{"before the window", es(window), monday.Add(8 * time.Hour), sleepGate{polls: true, wait: time.Hour, reason: gateOutsideWin}},
		{"inside the window", es(window), monday.Add(9 * time.Hour), sleepGate{allowed: true, polls: true, reason: gateOpen}},
		{"end of the window is outside", es(window), monday.Add(17 * time.Hour), sleepGate{polls: true, wait: 16 * time.Hour, reason: gateOutsideWin}},
		{"weekend", es(window), monday.Add(-12 * time.Hour), sleepGate{polls: true, wait: 21 * time.Hour, reason: gateOutsideWin}},
		{"bad window", es(func(e *elastiv1alpha1.ElastiService) {
			e.Spec.EnabledPeriod = &elastiv1alpha1.EnabledPeriod{Schedule: "61 * * * *", Duration: "1h"}
		}), created.Add(time.Hour), sleepGate{reason: gateInvalidWin}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := sleepGateFor(tc.es, tc.now)
			got.message = ""
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(sleepGate{})); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}
