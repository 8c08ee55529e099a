package plan

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
	wokenOpen := Plan{Wake: true, FailOpen: true, Slices: SliceDelete, Mode: elastiv1alpha1.ModeServe,
		Active: contract.ReasonWaking, RequeueAfter: 30 * time.Second}
	for _, tc := range []struct {
		name  string
		phase Phase
		grace time.Time
	}{
		{"status still ScalingDown, grace over", PhaseScalingDown, now.Add(-time.Minute)},
		{"status still ScalingDown, new leader", PhaseScalingDown, time.Time{}},
		{"status still serve", PhaseServe, time.Time{}},
		{"status proxy", PhaseProxy, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Observed{
				Now:          now,
				Phase:        tc.phase,
				Resolvers:    0,
				Sleep:        open,
				PollInterval: 30 * time.Second,
				Service:      ServiceObserved{Found: true, Ports: ports},
				Target:       TargetObserved{Found: true, Replicas: 0},
				Grace:        GraceObserved{StartedAt: tc.grace, Period: 2 * time.Second},
			}
			if diff := cmp.Diff(wokenOpen, Decide(o)); diff != "" {
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
	for _, ph := range []Phase{PhaseServe, PhaseScalingDown, PhaseProxy, PhaseWaking} {
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
								o := Observed{
									Now:          now,
									Phase:        ph,
									Resolvers:    1,
									OwnReady:     ready,
									Sleep:        gate,
									Triggers:     trig,
									NoTriggers:   noTriggers,
									HPA:          hpa,
									PollInterval: 30 * time.Second,
									Service:      ServiceObserved{Found: true, Ports: ports},
									Target:       TargetObserved{Found: true, Replicas: 1},
									Demand:       Demand{Wake: wake, KeepAwake: keep},
									Grace:        GraceObserved{StartedAt: started, Period: grace},
								}
								p := Decide(o)
								name := fmt.Sprintf("%s, grace %s, triggers %s (none configured %v), HPA %s, gate %s, wake %v, keep-awake %v, ready %v",
									ph, graceName, trigName, noTriggers, hpaName, gate.Reason, wake, keep, ready)
								idle := trigName == "idle" && !noTriggers && (hpaName == "none" || hpaName == "held, zero") ||
									noTriggers && hpaName == "held, zero"
								confirmed := ph == PhaseScalingDown && graceName == "over" && idle &&
									gate.Allowed() && !wake && !keep
								if p.Sleep != confirmed {
									t.Errorf("%s: sleep = %v, want %v", name, p.Sleep, confirmed)
								}
								if ph == PhaseScalingDown && graceName == "over" && !p.Sleep && p.Active == contract.ReasonScalingDown {
									t.Errorf("%s: the grace period is over but the scale-down neither completed nor was called off", name)
								}
								if p.Sleep && p.Wake {
									t.Errorf("%s: plan both wakes and sleeps", name)
								}
								// (A new leader that finds a scale-down in flight
								// waits a grace period of its own, whatever the
								// triggers say: the end of it checks again.)
								if ph == PhaseServe && p.StartGrace && (!idle || !gate.Allowed()) {
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
