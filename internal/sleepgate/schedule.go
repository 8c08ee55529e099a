package sleepgate

import (
	"errors"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/scaling"
)

// scheduleProbeDuration is a valid window length that ParseSchedule pairs
// with the schedule under test, so that only the schedule can fail.
const scheduleProbeDuration = "1h"

// ParseSchedule reports whether the enabledPeriod gate can read schedule,
// and if not, the cron parser's own error ("end of range (61) above maximum
// (59): 61"). It parses through scaling.ParseWindow, the function the gate
// calls, so that admission refuses exactly the schedules the gate would
// hold awake as ReasonInvalidEnabledPeriod: one parser, one set of options.
func ParseSchedule(schedule string) error {
	_, err := scaling.ParseWindow(elastiv1alpha1.EnabledPeriod{Schedule: schedule, Duration: scheduleProbeDuration})
	if err == nil {
		return nil
	}
	// ParseWindow names the field and the value; the caller words both.
	if inner := errors.Unwrap(err); inner != nil {
		return inner
	}
	return err
}
