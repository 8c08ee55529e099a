package fallback

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"elasti.dev/elasti/internal/controller/wakeprogress"
)

func TestFallbackVerdict(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	base := Observed{After: 30 * time.Second, Service: "web-static", Waking: true, WokeAt: now.Add(-10 * time.Second), ServiceFound: true, Ready: true}
	with := func(mut func(*Observed)) Observed {
		f := base
		mut(&f)
		return f
	}
	for _, tc := range []struct {
		name        string
		in          Observed
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantRecheck time.Duration
		wantOK      bool
	}{
		{"no fallback", Observed{}, "", "", 0, false},
		{"not waking", with(func(f *Observed) { f.Waking = false }), metav1.ConditionFalse, ReasonNotNeeded, 0, true},
		{"within after: back at the deadline or the pod check", base, metav1.ConditionFalse, ReasonNotNeeded, recheckInterval, true},
		{"deadline near", with(func(f *Observed) { f.WokeAt = now.Add(-28 * time.Second) }), metav1.ConditionFalse, ReasonNotNeeded, 2 * time.Second, true},
		{"deadline passed", with(func(f *Observed) { f.WokeAt = now.Add(-31 * time.Second) }), metav1.ConditionTrue, ReasonDeadlinePassed, recheckInterval, true},
		{"unschedulable", with(func(f *Observed) { f.Unschedulable = "pod a: 0/3 nodes are available" }), metav1.ConditionTrue, ReasonPodsUnschedulable, recheckInterval, true},
		{"scale refused", with(func(f *Observed) { f.Refused = "forbidden" }), metav1.ConditionTrue, ReasonScaleRefused, recheckInterval, true},
		{"fallback missing", with(func(f *Observed) { f.Unschedulable = "x"; f.ServiceFound, f.Ready = false, false }), metav1.ConditionFalse, ReasonUnavailable, recheckInterval, true},
		{"fallback without endpoint", with(func(f *Observed) { f.Unschedulable = "x"; f.Ready = false }), metav1.ConditionFalse, ReasonUnavailable, recheckInterval, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, reason, msg, recheck, ok := verdict(tc.in, now)
			if status != tc.wantStatus || reason != tc.wantReason || recheck != tc.wantRecheck || ok != tc.wantOK {
				t.Fatalf("got %s %s recheck %s ok %v (%q); want %s %s recheck %s ok %v", status, reason, recheck, ok, msg, tc.wantStatus, tc.wantReason, tc.wantRecheck, tc.wantOK)
			}
		})
	}
}

// TestFallbackVerdictPodsNotCreated: pods the workload controller cannot
// create turn the fallback on at once, quoting the controller; the earliest
// failed step of the wake names the cause when several hold.
func TestFallbackVerdictPodsNotCreated(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	base := Observed{After: 30 * time.Second, Service: "web-static", Waking: true, WokeAt: now.Add(-2 * time.Second), ServiceFound: true, Ready: true, NotCreated: quotaMsg}
	with := func(mut func(*Observed)) Observed {
		f := base
		mut(&f)
		return f
	}
	for _, tc := range []struct {
		name       string
		in         Observed
		wantStatus metav1.ConditionStatus
		wantReason string
		wantMsg    string
	}{
		{"pods not created", base, metav1.ConditionTrue, ReasonPodsNotCreated, wakeprogress.MsgPodsNotCreated + quotaMsg + "; requests go to fallback Service web-static"},
		{"scale refused first", with(func(f *Observed) { f.Refused = "forbidden" }), metav1.ConditionTrue, ReasonScaleRefused, "forbidden"},
		{"before unschedulable", with(func(f *Observed) { f.Unschedulable = "pod a: 0/3 nodes" }), metav1.ConditionTrue, ReasonPodsNotCreated, quotaMsg},
		{"before the deadline", with(func(f *Observed) { f.WokeAt = now.Add(-time.Minute) }), metav1.ConditionTrue, ReasonPodsNotCreated, quotaMsg},
		{"fallback without endpoint", with(func(f *Observed) { f.Ready = false }), metav1.ConditionFalse, ReasonUnavailable, wakeprogress.MsgPodsNotCreated + quotaMsg + "; fallback Service web-static has no ready endpoint"},
		{"not waking", with(func(f *Observed) { f.Waking = false }), metav1.ConditionFalse, ReasonNotNeeded, "not waking"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, reason, msg, recheck, ok := verdict(tc.in, now)
			if !ok || status != tc.wantStatus || reason != tc.wantReason || !strings.Contains(msg, tc.wantMsg) {
				t.Fatalf("got %s %s ok %v (%q); want %s %s with %q", status, reason, ok, msg, tc.wantStatus, tc.wantReason, tc.wantMsg)
			}
			if status == metav1.ConditionTrue && recheck != recheckInterval {
				t.Errorf("recheck %s, want %s", recheck, recheckInterval)
			}
		})
	}
}
