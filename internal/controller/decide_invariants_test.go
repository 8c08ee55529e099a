package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
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
			o := observed{now: now, phase: tc.phase, serviceFound: true, targetFound: true, replicas: 0, ports: ports,
				resolvers: 0, sleep: open, graceStartedAt: tc.grace, gracePeriod: 2 * time.Second, pollInterval: 30 * time.Second}
			if diff := cmp.Diff(wokenOpen, decide(o), cmp.AllowUnexported(plan{})); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}
