package scaling

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// cronParser accepts the five standard fields and descriptors such as @daily,
// the same language the CRD's validation admits.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Window is a parsed enabledPeriod: a cron schedule and how long each window
// lasts.
type Window struct {
	schedule cron.Schedule
	duration time.Duration
}

// ParseWindow parses an enabledPeriod. Schedules are read in UTC.
func ParseWindow(p elastiv1alpha1.EnabledPeriod) (Window, error) {
	sched, err := cronParser.Parse(p.Schedule)
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
// for some activation start of the schedule.
func (w Window) Contains(now time.Time) bool {
	now = now.UTC()
	// The schedule's first activation strictly after now-duration is the
	// only one whose window can still be open at now.
	start := w.schedule.Next(now.Add(-w.duration))
	return !start.IsZero() && !start.After(now)
}

// NextOpen returns when the next window opens after now, or the zero time if
// the schedule never fires again.
func (w Window) NextOpen(now time.Time) time.Time {
	return w.schedule.Next(now.UTC())
}
