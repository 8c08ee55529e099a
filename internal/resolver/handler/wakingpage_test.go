package handler

import (
	"testing"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/resolver/route"
)

func TestNewWakingPageBounds(t *testing.T) {
	for in, want := range map[int32]int{0: 2, -3: 1, 1: 1, 30: 30, 60: 60, 600: 60} {
		if got := route.NewWakingPage(&elastiv1alpha1.WakingPage{RefreshSeconds: in}).Refresh; got != want {
			t.Errorf("refreshSeconds %d: refresh %d, want %d", in, got, want)
		}
	}
	if route.NewWakingPage(nil) != nil {
		t.Error("no wakingPage must give no page")
	}
	if got := knownPhase("Hibernating"); got != elastiv1alpha1.WakePhaseScaling {
		t.Errorf("an unknown phase shows as %q, want Scaling", got)
	}
}
