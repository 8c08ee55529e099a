package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/hpacustody"
	"elasti.dev/elasti/internal/scaling"
	"elasti.dev/elasti/internal/sleepgate"
)

// TestDecideNeverLeavesATargetAtZeroUnheld: a target at zero with no ready
// resolver is woken whatever the status records. The case that showed it: the
// scale to zero succeeded, the status write after it failed (the status
// still says ScalingDown), then the resolvers vanished.
func TestDecideNeverLeavesATargetAtZeroUnheld(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	ports := []elastiv1alpha1.ProxyPort{{Name: "http", Port: 80, ResolverPort: 20000}}
	open := sleepgate.Verdict{Reason: sleepgate.ReasonOpen, Polls: true}
	wokenOpen := plan{wake: true, failOpen: true, slices: sliceDelete, mode: elastiv1alpha1.ModeServe,
		active: contract.ReasonWaking, requeueAfter: 30 * time.Second}
	for _, tc := range []struct {
		name  string
		phase phase
		grace time.Time
	}{
		{"status still ScalingDown, grace over", phaseScalingDown, now.Add(-time.Minute)},
		{"status still ScalingDown, new leader", phaseScalingDown, time.Time{}},
		{"status still serve", phaseServe, time.Time{}},
		{"status proxy", phaseProxy, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := observed{
				now:          now,
				phase:        tc.phase,
				resolvers:    0,
				sleep:        open,
				pollInterval: 30 * time.Second,
				service:      serviceObserved{found: true, ports: ports},
				target:       targetObserved{found: true, replicas: 0},
				grace:        graceObserved{startedAt: tc.grace, period: 2 * time.Second},
			}
			if diff := cmp.Diff(wokenOpen, decide(o), cmp.AllowUnexported(plan{})); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// TestDecideSleepsOnlyOnConfirmedIdle: over every combination of what a
// reconcile can observe about an awake target, decide puts it to sleep only
// at the end of a grace period, with the triggers evaluated again and still
// idle (or, without triggers, an HPA in custody alone), the readings of an
// HPA in custody evaluated again and zero, no HPA that could take the last
// step itself, every gate open and no wake asked for; and a grace period
// that is over never goes on: the scale-down either completes or is called
// off.
func TestDecideSleepsOnlyOnConfirmedIdle(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	ports := []elastiv1alpha1.ProxyPort{{Name: "http", Port: 80, ResolverPort: 20000}}
	const grace = 2 * time.Second
	graces := map[string]time.Time{"unknown": {}, "running": now.Add(-grace / 2), "over": now.Add(-grace)}
	triggers := map[string]*scaling.Result{
		"not evaluated": nil,
		"idle":          {State: scaling.StateIdle},
		"active":        {State: scaling.StateActive},
		"unhealthy":     {State: scaling.StateUnhealthy, Reason: scaling.ReasonQueryFailed},
	}
	gates := []sleepgate.Verdict{
		{Reason: sleepgate.ReasonOpen, Polls: true},
		{Reason: sleepgate.ReasonInCooldown, Polls: true, Wait: time.Minute},
		{Reason: sleepgate.ReasonOutsideEnabledPeriod, Polls: true, Wait: time.Hour},
		{Reason: sleepgate.ReasonKeepAwake},
	}
	// What the HPA spec.autoscaler names can say; "none" is no HPA, or one
	// Elasti does not hold (minReplicas 1 or more, or CPU metrics).
	hpas := map[string]hpacustody.Observed{
		"none":               {},
		"held, zero":         {Custody: true, Metrics: triggers["idle"]},
		"held, nonzero":      {Custody: true, Metrics: triggers["active"]},
		"held, no readings":  {Custody: true, Metrics: triggers["unhealthy"]},
		"held, not read":     {Custody: true},
		"floor not raisable": {Exposed: true},
	}
	for _, ph := range []phase{phaseServe, phaseScalingDown, phaseProxy, phaseWaking} {
		for graceName, started := range graces {
			for trigName, trig := range triggers {
				for hpaName, hpa := range hpas {
					for _, noTriggers := range []bool{false, true} {
						for _, gate := range gates {
							for _, flags := range [][3]bool{
								{false, false, false}, {true, false, false}, {false, true, false}, {false, false, true},
								{true, false, true}, {false, true, true}, {true, true, true},
							} {
								wake, keep, ready := flags[0], flags[1], flags[2]
								o := observed{
									now:          now,
									phase:        ph,
									resolvers:    1,
									ownReady:     ready,
									sleep:        gate,
									triggers:     trig,
									noTriggers:   noTriggers,
									hpa:          hpa,
									pollInterval: 30 * time.Second,
									service:      serviceObserved{found: true, ports: ports},
									target:       targetObserved{found: true, replicas: 1},
									demand:       demand{wake: wake, keepAwake: keep},
									grace:        graceObserved{startedAt: started, period: grace},
								}
								p := decide(o)
								name := fmt.Sprintf("%s, grace %s, triggers %s (none configured %v), HPA %s, gate %s, wake %v, keep-awake %v, ready %v",
									ph, graceName, trigName, noTriggers, hpaName, gate.Reason, wake, keep, ready)
								idle := trigName == "idle" && !noTriggers && (hpaName == "none" || hpaName == "held, zero") ||
									noTriggers && hpaName == "held, zero"
								confirmed := ph == phaseScalingDown && graceName == "over" && idle &&
									gate.Allowed() && !wake && !keep
								if p.sleep != confirmed {
									t.Errorf("%s: sleep = %v, want %v", name, p.sleep, confirmed)
								}
								if ph == phaseScalingDown && graceName == "over" && !p.sleep && p.active == contract.ReasonScalingDown {
									t.Errorf("%s: the grace period is over but the scale-down neither completed nor was called off", name)
								}
								if p.sleep && p.wake {
									t.Errorf("%s: plan both wakes and sleeps", name)
								}
								// (A new leader that finds a scale-down in flight
								// waits a grace period of its own, whatever the
								// triggers say: the end of it checks again.)
								if ph == phaseServe && p.startGrace && (!idle || !gate.Allowed()) {
									t.Errorf("%s: a scale-down started without every voice saying idle", name)
								}
							}
						}
					}
				}
			}
		}
	}
}
