package sleepgate

import (
	"time"

	"elasti.dev/elasti/internal/scaling"
)

// ParseSchedule reports whether the operator can read schedule, and if not,
// the cron parser's own error ("end of range (61) above maximum (59): 61").
// It calls scaling.ParseSchedule, the parser behind both the enabledPeriod
// gate (scaling.ParseWindow) and the pre-warm schedule
// (scaling.ParsePreWarm), so that admission refuses exactly the schedules
// the gate would hold awake as ReasonInvalidEnabledPeriod and the pre-warm
// could not read: one parser, one set of options. The time zone does not
// change what parses.
func ParseSchedule(schedule string) error {
	_, err := scaling.ParseSchedule(schedule, time.UTC)
	return err
}
