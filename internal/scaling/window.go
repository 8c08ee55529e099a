package scaling

import (
	"fmt"
	"time"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// Window is a parsed enabledPeriod: a cron schedule in its time zone and how
// long each window lasts.
type Window struct {
	schedule Schedule
	duration time.Duration
}

// ParseWindow parses an enabledPeriod. The schedule is read in its
// timeZone, UTC when that is empty.
func ParseWindow(p elastiv1alpha1.EnabledPeriod) (Window, error) {
	loc, err := LoadTimeZone(p.TimeZone)
	if err != nil {
		return Window{}, fmt.Errorf("enabledPeriod.timeZone %q: %w", p.TimeZone, err)
	}
	sched, err := ParseSchedule(p.Schedule, loc)
	if err != nil {
		return Window{}, fmt.Errorf("parse enabledPeriod.schedule %q: %w", p.Schedule, err)
	}
	d, err := time.ParseDuration(p.Duration)
	if err != nil {
		return Window{}, fmt.Errorf("parse enabledPeriod.duration %q: %w", p.Duration, err)
	}
	if d <= 0 {
		return Window{}, fmt.Errorf("enabledPeriod.duration %q must be positive", p.Duration)
	}
	return Window{schedule: sched, duration: d}, nil
}

// Contains reports whether now falls inside a window [start, start+duration)
// for some activation start of the schedule. The duration is elapsed time:
// a window that spans a daylight-saving change closes at start+duration
// on the clock of the world, one wall-clock hour later (spring forward) or
// earlier (fall back) than the same window on another night.
func (w Window) Contains(now time.Time) bool {
	// The schedule's first activation strictly after now-duration is the
	// only one whose window can still be open at now.
	start := w.schedule.Next(now.Add(-w.duration))
	return !start.IsZero() && !start.After(now)
}

// NextOpen returns when the next window opens after now, or the zero time if
// the schedule never fires again.
func (w Window) NextOpen(now time.Time) time.Time {
	return w.schedule.Next(now)
}
