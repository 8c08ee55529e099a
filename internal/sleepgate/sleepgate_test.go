package sleepgate

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
)

func TestEvaluate(t *testing.T) {
	created := time.Date(2030, 1, 6, 8, 0, 0, 0, time.UTC) // a Sunday
	es := func(muts ...func(*elastiv1alpha1.ElastiService)) *elastiv1alpha1.ElastiService {
		e := &elastiv1alpha1.ElastiService{
			ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)},
			Spec:       elastiv1alpha1.ElastiServiceSpec{CooldownPeriod: 600, Triggers: []elastiv1alpha1.ScaleTrigger{{Type: elastiv1alpha1.TriggerTypePrometheus}}},
		}
		for _, mut := range muts {
			mut(e)
		}
		return e
	}
	noTriggers := func(e *elastiv1alpha1.ElastiService) { e.Spec.Triggers = nil }
	keepAwake := func(value string) func(*elastiv1alpha1.ElastiService) {
		return func(e *elastiv1alpha1.ElastiService) {
			e.Annotations = map[string]string{contract.AnnotationKeepAwake: value}
		}
	}
	woke := func(at time.Time) func(*elastiv1alpha1.ElastiService) {
		return func(e *elastiv1alpha1.ElastiService) { e.Status.LastScaledUpTime = &metav1.Time{Time: at} }
	}
	window := func(schedule, d string) func(*elastiv1alpha1.ElastiService) {
		return func(e *elastiv1alpha1.ElastiService) {
			e.Spec.EnabledPeriod = &elastiv1alpha1.EnabledPeriod{Schedule: schedule, Duration: d}
		}
	}
	workdays := window("0 9 * * 1-5", "8h")
	berlinWorkdays := func(e *elastiv1alpha1.ElastiService) {
		e.Spec.EnabledPeriod = &elastiv1alpha1.EnabledPeriod{Schedule: "0 9 * * 1-5", Duration: "8h", TimeZone: "Europe/Berlin"}
		e.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	}
	monday := time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)
	open := Verdict{Reason: ReasonOpen, Polls: true, Message: "no gate holds the target; its triggers decide"}
	for _, tc := range []struct {
		name string
		es   *elastiv1alpha1.ElastiService
		now  time.Time
		want Verdict
	}{
		{"no triggers", es(noTriggers), created.Add(time.Hour),
			Verdict{Reason: ReasonNoTriggers, Message: "it has no triggers, so it never sleeps on its own"}},
		{"keep-awake", es(keepAwake("true")), created.Add(time.Hour),
			Verdict{Reason: ReasonKeepAwake, Message: "elasti.dev/keep-awake=true pins it awake"}},
		{"keep-awake with another value is ignored", es(keepAwake("yes"), woke(created)), created.Add(time.Hour), open},
		{"cooldown from creation", es(), created.Add(4 * time.Minute),
			Verdict{Reason: ReasonInCooldown, Polls: true, Wait: 6 * time.Minute,
				Message: "in cooldown for another 6m (cooldownPeriod 600s, counted from creation 4m ago)"}},
		{"cooldown from the last wake", es(woke(created.Add(time.Hour))), created.Add(time.Hour + 9*time.Minute),
			Verdict{Reason: ReasonInCooldown, Polls: true, Wait: time.Minute,
				Message: "in cooldown for another 60s (cooldownPeriod 600s, counted from the last wake 9m ago)"}},
		{"cooldown over", es(woke(created)), created.Add(10 * time.Minute), open},
		{"before the window", es(workdays), monday.Add(8 * time.Hour),
			Verdict{Reason: ReasonOutsideEnabledPeriod, Polls: true, Wait: time.Hour,
				Message: `outside the enabledPeriod ("0 9 * * 1-5" for 8h, UTC); the next window opens in 60m`}},
		{"inside the window", es(workdays), monday.Add(9 * time.Hour), open},
		{"end of the window is outside", es(workdays), monday.Add(17 * time.Hour),
			Verdict{Reason: ReasonOutsideEnabledPeriod, Polls: true, Wait: 16 * time.Hour,
				Message: `outside the enabledPeriod ("0 9 * * 1-5" for 8h, UTC); the next window opens in 16h`}},
		{"weekend", es(workdays), monday.Add(-12 * time.Hour),
			Verdict{Reason: ReasonOutsideEnabledPeriod, Polls: true, Wait: 21 * time.Hour,
				Message: `outside the enabledPeriod ("0 9 * * 1-5" for 8h, UTC); the next window opens in 21h`}},
		// Europe/Berlin: 09:00 is 08:00Z before the clocks spring forward
		// on 29 March 2026 and 07:00Z after.
		{"before a window in Europe/Berlin (CET)", es(berlinWorkdays), time.Date(2026, 3, 27, 7, 30, 0, 0, time.UTC),
			Verdict{Reason: ReasonOutsideEnabledPeriod, Polls: true, Wait: 30 * time.Minute,
				Message: `outside the enabledPeriod ("0 9 * * 1-5" for 8h, Europe/Berlin); the next window opens in 30m`}},
		{"inside a window in Europe/Berlin (CET)", es(berlinWorkdays), time.Date(2026, 3, 27, 8, 0, 0, 0, time.UTC), open},
		{"inside a window in Europe/Berlin (CEST)", es(berlinWorkdays), time.Date(2026, 3, 30, 7, 0, 0, 0, time.UTC), open},
		{"after a window in Europe/Berlin (CEST)", es(berlinWorkdays), time.Date(2026, 3, 30, 15, 0, 0, 0, time.UTC),
			Verdict{Reason: ReasonOutsideEnabledPeriod, Polls: true, Wait: 16 * time.Hour,
				Message: `outside the enabledPeriod ("0 9 * * 1-5" for 8h, Europe/Berlin); the next window opens in 16h`}},
		{"unknown time zone", es(func(e *elastiv1alpha1.ElastiService) {
			e.Spec.EnabledPeriod = &elastiv1alpha1.EnabledPeriod{Schedule: "@daily", Duration: "1h", TimeZone: "Europe/Bärlin"}
		}), created.Add(time.Hour),
			Verdict{Reason: ReasonInvalidEnabledPeriod,
				Message: `the enabledPeriod is invalid: enabledPeriod.timeZone "Europe/Bärlin": load time zone: unknown time zone Europe/Bärlin`}},
		{"bad schedule", es(window("61 * * * *", "1h")), created.Add(time.Hour),
			Verdict{Reason: ReasonInvalidEnabledPeriod,
				Message: `the enabledPeriod is invalid: parse enabledPeriod.schedule "61 * * * *": end of range (61) above maximum (59): 61`}},
		{"bad duration", es(window("0 14 * * *", "soon")), created.Add(time.Hour),
			Verdict{Reason: ReasonInvalidEnabledPeriod,
				Message: `the enabledPeriod is invalid: parse enabledPeriod.duration "soon": time: invalid duration "soon"`}},
		// The order of the chain: the first gate that holds decides.
		{"no triggers before keep-awake", es(noTriggers, keepAwake("true")), created, Verdict{Reason: ReasonNoTriggers,
			Message: "it has no triggers, so it never sleeps on its own"}},
		{"keep-awake before the cooldown", es(keepAwake("true")), created, Verdict{Reason: ReasonKeepAwake,
			Message: "elasti.dev/keep-awake=true pins it awake"}},
		{"the cooldown before the window", es(workdays, woke(monday.Add(8*time.Hour+55*time.Minute))), monday.Add(8*time.Hour + 58*time.Minute),
			Verdict{Reason: ReasonInCooldown, Polls: true, Wait: 7 * time.Minute,
				Message: "in cooldown for another 7m (cooldownPeriod 600s, counted from the last wake 3m ago)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Evaluate(tc.es, tc.now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
			if got.Allowed() != (tc.want.Reason == ReasonOpen) {
				t.Errorf("Allowed() = %v for reason %s", got.Allowed(), got.Reason)
			}
		})
	}
}

// TestParseSchedule: ParseSchedule refuses exactly what the enabledPeriod gate
// holds as invalid, and returns the parser's words without the gate's wrapping.
func TestParseSchedule(t *testing.T) {
	for _, tc := range []struct {
		schedule string
		wantErr  string
	}{
		{"0 9 * * 1-5", ""},
		{"@daily", ""},
		{"*/15 8-18 * * MON-FRI", ""},
		{"61 * * * *", "end of range (61) above maximum (59): 61"},
		{"5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"},
		{"0 9 * *", "expected exactly 5 fields, found 4: [0 9 * *]"},
		{"@fortnightly", "unrecognized descriptor: @fortnightly"},
		// Seconds are not a field here: six fields are refused.
		{"0 0 9 * * 1-5", "expected exactly 5 fields, found 6: [0 0 9 * * 1-5]"},
	} {
		t.Run(tc.schedule, func(t *testing.T) {
			err := ParseSchedule(tc.schedule)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.wantErr {
				t.Errorf("ParseSchedule(%q) = %q, want %q", tc.schedule, got, tc.wantErr)
			}
			gate := Evaluate(&elastiv1alpha1.ElastiService{Spec: elastiv1alpha1.ElastiServiceSpec{
				Triggers:      []elastiv1alpha1.ScaleTrigger{{Type: elastiv1alpha1.TriggerTypePrometheus}},
				EnabledPeriod: &elastiv1alpha1.EnabledPeriod{Schedule: tc.schedule, Duration: "1h"},
			}}, time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC))
			if invalid := gate.Reason == ReasonInvalidEnabledPeriod; invalid != (tc.wantErr != "") {
				t.Errorf("the gate says %s (%s) for %q, ParseSchedule says %q", gate.Reason, gate.Message, tc.schedule, got)
			}
		})
	}
}
