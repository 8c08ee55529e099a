package scaling

import (
	"fmt"
	"time"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// PreWarmLateness is how late a pre-warm firing may be acted on: a firing
// the operator could not act on at its time (it was down, or changing
// leader) still wakes the target while it is less than this late, and is
// dropped after.
const PreWarmLateness = 5 * time.Minute

// PreWarm is a parsed spec.preWarm.
type PreWarm struct {
	schedule Schedule
}

// ParsePreWarm parses a preWarm. The schedule is read in its timeZone, UTC
// when that is empty.
func ParsePreWarm(p elastiv1alpha1.PreWarm) (PreWarm, error) {
	loc, err := LoadTimeZone(p.TimeZone)
	if err != nil {
		return PreWarm{}, fmt.Errorf("preWarm.timeZone %q: %w", p.TimeZone, err)
	}
	sched, err := ParseSchedule(p.Schedule, loc)
	if err != nil {
		return PreWarm{}, fmt.Errorf("parse preWarm.schedule %q: %w", p.Schedule, err)
	}
	return PreWarm{schedule: sched}, nil
}

// Due returns the firing to act on at now: the latest one at or before now
// that is less than PreWarmLateness late and later than handled (the last
// firing acted on), or the zero time when there is none. It also returns
// the first firing after now, zero if the schedule never fires again.
func (p PreWarm) Due(now, handled time.Time) (due, next time.Time) {
	from := now.Add(-PreWarmLateness)
	if handled.After(from) {
		from = handled
	}
	for f := p.schedule.Next(from); !f.IsZero() && !f.After(now); f = p.schedule.Next(f) {
		due = f
	}
	return due, p.schedule.Next(now)
}

// Next returns the first firing after now, zero if there is none.
func (p PreWarm) Next(now time.Time) time.Time {
	return p.schedule.Next(now)
}

// Location is the zone the schedule is read in.
func (p PreWarm) Location() *time.Location { return p.schedule.Location() }
