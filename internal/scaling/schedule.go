package scaling

import (
	"errors"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

// cronParser accepts the five standard fields and descriptors such as @daily,
// the same language the CRD's validation admits.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// errLocalTimeZone refuses "Local", which time.LoadLocation reads as the
// operator's own zone: one the ElastiService's author neither sees nor sets.
var errLocalTimeZone = errors.New(`"Local" is the operator's own time zone, not a zone name`)

// LoadTimeZone returns the IANA time zone name names, such as Europe/Berlin,
// from the time zone database (the operator embeds one, so it works in an
// image without /usr/share/zoneinfo). The empty name is UTC.
func LoadTimeZone(name string) (*time.Location, error) {
	switch name {
	case "":
		return time.UTC, nil
	case "Local":
		return nil, errLocalTimeZone
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("load time zone: %w", err)
	}
	return loc, nil
}

// Schedule is a cron schedule whose fields are read on the wall clock of one
// time zone.
type Schedule struct {
	spec cron.Schedule
	loc  *time.Location
}

// ParseSchedule parses a five-field cron expression or a descriptor, to be
// read in loc. It returns the cron parser's own error.
func ParseSchedule(expr string, loc *time.Location) (Schedule, error) {
	spec, err := cronParser.Parse(expr)
	if err != nil {
		return Schedule{}, err
	}
	return Schedule{spec: spec, loc: loc}, nil
}

// Location is the zone the schedule is read in.
func (s Schedule) Location() *time.Location { return s.loc }

// Next returns the schedule's first activation strictly after t, in the
// schedule's zone, or the zero time if it never fires again. Across
// daylight-saving changes the wall clock decides:
//   - a time the clocks skip (02:30 on a spring-forward night in
//     Europe/Berlin) does not occur that day, so the schedule does not fire
//     for it that day;
//   - a time the clocks pass twice (02:30 on a fall-back night in
//     Europe/Berlin) fires once, at its first occurrence.
func (s Schedule) Next(t time.Time) time.Time {
	for {
		n := s.spec.Next(t.In(s.loc))
		if n.IsZero() || !repeatedWallClock(n) {
			return n
		}
		t = n
	}
}

// repeatedWallClock reports whether t's wall-clock reading already occurred
// earlier, because the clocks fell back in between: t is then the second
// occurrence of that reading.
func repeatedWallClock(t time.Time) bool {
	_, after := t.Zone()
	_, before := t.Add(-24 * time.Hour).Zone()
	shift := time.Duration(before-after) * time.Second
	if shift <= 0 {
		return false
	}
	earlier := t.Add(-shift)
	return earlier.Day() == t.Day() && earlier.Hour() == t.Hour() && earlier.Minute() == t.Minute()
}

// ZoneName is how a timeZone field reads: its name, or UTC when empty.
func ZoneName(name string) string {
	if name == "" {
		return "UTC"
	}
	return name
}
