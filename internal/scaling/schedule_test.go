package scaling

import (
	"testing"
	"time"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// The 2026 daylight-saving changes these tests cross:
//   - Europe/Berlin: spring forward Sun 29 March 02:00 CET -> 03:00 CEST
//     (01:00Z); fall back Sun 25 October 03:00 CEST -> 02:00 CET (01:00Z);
//   - America/New_York: spring forward Sun 8 March 02:00 EST -> 03:00 EDT
//     (07:00Z); fall back Sun 1 November 02:00 EDT -> 01:00 EST (06:00Z).
func utc(month time.Month, day, hour, minute int) time.Time {
	return time.Date(2026, month, day, hour, minute, 0, 0, time.UTC)
}

func TestLoadTimeZone(t *testing.T) {
	for _, tc := range []struct {
		name    string
		want    string
		wantErr bool
	}{
		{"", "UTC", false},
		{"UTC", "UTC", false},
		{"Europe/Berlin", "Europe/Berlin", false},
		{"America/Argentina/Buenos_Aires", "America/Argentina/Buenos_Aires", false},
		{"Local", "", true},
		{"Europe/Bärlin", "", true},
		{"Mars/Olympus_Mons", "", true},
	} {
		loc, err := LoadTimeZone(tc.name)
		if (err != nil) != tc.wantErr {
			t.Errorf("LoadTimeZone(%q) error %v, want error %v", tc.name, err, tc.wantErr)
			continue
		}
		if err == nil && loc.String() != tc.want {
			t.Errorf("LoadTimeZone(%q) = %s, want %s", tc.name, loc, tc.want)
		}
	}
}

// TestScheduleAcrossDST: the firings of schedules read in a zone, across
// both of 2026's changes in two zones.
func TestScheduleAcrossDST(t *testing.T) {
	for _, tc := range []struct {
		name, zone, expr string
		from             time.Time
		want             []time.Time
	}{
		{"Berlin weekdays 08:55 across spring forward", "Europe/Berlin", "55 8 * * 1-5", utc(time.March, 27, 0, 0),
			[]time.Time{utc(time.March, 27, 7, 55), utc(time.March, 30, 6, 55), utc(time.March, 31, 6, 55)}},
		{"Berlin weekdays 08:55 across fall back", "Europe/Berlin", "55 8 * * 1-5", utc(time.October, 23, 0, 0),
			[]time.Time{utc(time.October, 23, 6, 55), utc(time.October, 26, 7, 55)}},
		{"New York weekdays 08:55 across spring forward", "America/New_York", "55 8 * * 1-5", utc(time.March, 6, 0, 0),
			[]time.Time{utc(time.March, 6, 13, 55), utc(time.March, 9, 12, 55)}},
		{"New York weekdays 08:55 across fall back", "America/New_York", "55 8 * * 1-5", utc(time.October, 30, 0, 0),
			[]time.Time{utc(time.October, 30, 12, 55), utc(time.November, 2, 13, 55)}},
		// 02:30 does not exist on the spring-forward night: no firing that day.
		{"Berlin 02:30 skipped when the clocks spring forward", "Europe/Berlin", "30 2 * * *", utc(time.March, 28, 0, 0),
			[]time.Time{utc(time.March, 28, 1, 30), utc(time.March, 30, 0, 30)}},
		{"New York 02:30 skipped when the clocks spring forward", "America/New_York", "30 2 * * *", utc(time.March, 7, 0, 0),
			[]time.Time{utc(time.March, 7, 7, 30), utc(time.March, 9, 6, 30)}},
		// 02:30 (Berlin) and 01:30 (New York) happen twice on the fall-back
		// night: one firing, at the first.
		{"Berlin 02:30 once when the clocks fall back", "Europe/Berlin", "30 2 * * *", utc(time.October, 24, 12, 0),
			[]time.Time{utc(time.October, 25, 0, 30), utc(time.October, 26, 1, 30)}},
		{"New York 01:30 once when the clocks fall back", "America/New_York", "30 1 * * *", utc(time.October, 31, 12, 0),
			[]time.Time{utc(time.November, 1, 5, 30), utc(time.November, 2, 6, 30)}},
		{"an hourly schedule does not fire again in the repeated hour", "Europe/Berlin", "0 * * * *", utc(time.October, 24, 23, 30),
			[]time.Time{utc(time.October, 25, 0, 0), utc(time.October, 25, 2, 0)}},
		{"UTC by default", "", "0 9 * * *", utc(time.March, 29, 0, 0),
			[]time.Time{utc(time.March, 29, 9, 0), utc(time.March, 30, 9, 0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loc, err := LoadTimeZone(tc.zone)
			if err != nil {
				t.Fatal(err)
			}
			s, err := ParseSchedule(tc.expr, loc)
			if err != nil {
				t.Fatal(err)
			}
			at := tc.from
			for i, want := range tc.want {
				at = s.Next(at)
				if !at.Equal(want) {
					t.Fatalf("firing %d: got %s (%s), want %s", i, at.UTC(), at, want)
				}
			}
		})
	}
}

// TestWindowTimeZone: windows read in a zone keep their wall-clock hours on
// both sides of a daylight-saving change, and a window that spans the
// change lasts its duration in elapsed time.
func TestWindowTimeZone(t *testing.T) {
	type probe struct {
		at   time.Time
		want bool
	}
	for _, tc := range []struct {
		name   string
		period elastiv1alpha1.EnabledPeriod
		probes []probe
	}{
		{"Berlin weekdays 08:00-19:00 across spring forward",
			elastiv1alpha1.EnabledPeriod{Schedule: "0 8 * * 1-5", Duration: "11h", TimeZone: "Europe/Berlin"},
			[]probe{
				// Friday 27 March, CET (UTC+1).
				{utc(time.March, 27, 6, 59), false}, {utc(time.March, 27, 7, 0), true},
				{utc(time.March, 27, 17, 59), true}, {utc(time.March, 27, 18, 0), false},
				// The weekend.
				{utc(time.March, 29, 10, 0), false},
				// Monday 30 March, CEST (UTC+2): the same wall-clock hours.
				{utc(time.March, 30, 5, 59), false}, {utc(time.March, 30, 6, 0), true},
				{utc(time.March, 30, 16, 59), true}, {utc(time.March, 30, 17, 0), false},
			}},
		{"Berlin weekdays 08:00-19:00 across fall back",
			elastiv1alpha1.EnabledPeriod{Schedule: "0 8 * * 1-5", Duration: "11h", TimeZone: "Europe/Berlin"},
			[]probe{
				{utc(time.October, 23, 5, 59), false}, {utc(time.October, 23, 6, 0), true}, {utc(time.October, 23, 17, 0), false},
				{utc(time.October, 26, 6, 59), false}, {utc(time.October, 26, 7, 0), true},
				{utc(time.October, 26, 17, 59), true}, {utc(time.October, 26, 18, 0), false},
			}},
		{"New York weekdays 08:00-19:00 across spring forward",
			elastiv1alpha1.EnabledPeriod{Schedule: "0 8 * * 1-5", Duration: "11h", TimeZone: "America/New_York"},
			[]probe{
				{utc(time.March, 6, 12, 59), false}, {utc(time.March, 6, 13, 0), true}, {utc(time.March, 7, 0, 0), false},
				{utc(time.March, 9, 11, 59), false}, {utc(time.March, 9, 12, 0), true},
				{utc(time.March, 9, 22, 59), true}, {utc(time.March, 9, 23, 0), false},
			}},
		{"New York weekdays 08:00-19:00 across fall back",
			elastiv1alpha1.EnabledPeriod{Schedule: "0 8 * * 1-5", Duration: "11h", TimeZone: "America/New_York"},
			[]probe{
				{utc(time.October, 30, 11, 59), false}, {utc(time.October, 30, 12, 0), true}, {utc(time.October, 30, 23, 0), false},
				{utc(time.November, 2, 12, 59), false}, {utc(time.November, 2, 13, 0), true},
				{utc(time.November, 2, 23, 59), true}, {utc(time.November, 3, 0, 0), false},
			}},
		// Saturday 22:00 for 10h spans the change: it ends 10 elapsed hours
		// later, 09:00 CEST after spring forward, 07:00 CET after fall back.
		{"Berlin night window spanning spring forward",
			elastiv1alpha1.EnabledPeriod{Schedule: "0 22 * * 6", Duration: "10h", TimeZone: "Europe/Berlin"},
			[]probe{{utc(time.March, 28, 20, 59), false}, {utc(time.March, 28, 21, 0), true}, {utc(time.March, 29, 6, 59), true}, {utc(time.March, 29, 7, 0), false}}},
		{"Berlin night window spanning fall back",
			elastiv1alpha1.EnabledPeriod{Schedule: "0 22 * * 6", Duration: "10h", TimeZone: "Europe/Berlin"},
			[]probe{{utc(time.October, 24, 19, 59), false}, {utc(time.October, 24, 20, 0), true}, {utc(time.October, 25, 5, 59), true}, {utc(time.October, 25, 6, 0), false}}},
		{"New York night window spanning spring forward",
			elastiv1alpha1.EnabledPeriod{Schedule: "0 22 * * 6", Duration: "10h", TimeZone: "America/New_York"},
			[]probe{{utc(time.March, 8, 2, 59), false}, {utc(time.March, 8, 3, 0), true}, {utc(time.March, 8, 12, 59), true}, {utc(time.March, 8, 13, 0), false}}},
		{"New York night window spanning fall back",
			elastiv1alpha1.EnabledPeriod{Schedule: "0 22 * * 6", Duration: "10h", TimeZone: "America/New_York"},
			[]probe{{utc(time.November, 1, 1, 59), false}, {utc(time.November, 1, 2, 0), true}, {utc(time.November, 1, 11, 59), true}, {utc(time.November, 1, 12, 0), false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := ParseWindow(tc.period)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range tc.probes {
				if got := w.Contains(p.at); got != p.want {
					t.Errorf("Contains(%s) = %v, want %v", p.at.Format(time.RFC3339), got, p.want)
				}
			}
		})
	}

	w, err := ParseWindow(elastiv1alpha1.EnabledPeriod{Schedule: "0 8 * * 1-5", Duration: "11h", TimeZone: "Europe/Berlin"})
	if err != nil {
		t.Fatal(err)
	}
	if next := w.NextOpen(utc(time.March, 28, 12, 0)); !next.Equal(utc(time.March, 30, 6, 0)) {
		t.Errorf("next window after Saturday opens %s, want Monday 06:00Z (08:00 CEST)", next.UTC())
	}
	for _, zone := range []string{"Europe/Bärlin", "Local"} {
		if _, err := ParseWindow(elastiv1alpha1.EnabledPeriod{Schedule: "@daily", Duration: "1h", TimeZone: zone}); err == nil {
			t.Errorf("time zone %q parsed", zone)
		}
	}
}

// TestPreWarmDue: which firing is acted on, and when the next one comes.
func TestPreWarmDue(t *testing.T) {
	berlin := elastiv1alpha1.PreWarm{Schedule: "55 8 * * 1-5", TimeZone: "Europe/Berlin"}
	monday := utc(time.March, 30, 6, 55) // 08:55 CEST, the first weekday after spring forward
	for _, tc := range []struct {
		name              string
		preWarm           elastiv1alpha1.PreWarm
		now, handled      time.Time
		wantDue, wantNext time.Time
	}{
		{"before the firing", berlin, monday.Add(-time.Second), time.Time{}, time.Time{}, monday},
		{"at the firing", berlin, monday, time.Time{}, monday, utc(time.March, 31, 6, 55)},
		{"late but less than 5 minutes", berlin, monday.Add(4*time.Minute + 59*time.Second), time.Time{}, monday, utc(time.March, 31, 6, 55)},
		{"5 minutes late is dropped", berlin, monday.Add(5 * time.Minute), time.Time{}, time.Time{}, utc(time.March, 31, 6, 55)},
		{"already handled", berlin, monday.Add(time.Minute), monday, time.Time{}, utc(time.March, 31, 6, 55)},
		{"an older firing handled", berlin, monday.Add(time.Minute), utc(time.March, 27, 7, 55), monday, utc(time.March, 31, 6, 55)},
		{"Friday's firing in CET, then Monday's in CEST", berlin, utc(time.March, 27, 7, 55), time.Time{}, utc(time.March, 27, 7, 55), monday},
		{"New York: Friday in EDT, then Monday in EST", elastiv1alpha1.PreWarm{Schedule: "55 8 * * 1-5", TimeZone: "America/New_York"},
			utc(time.October, 30, 12, 56), time.Time{}, utc(time.October, 30, 12, 55), utc(time.November, 2, 13, 55)},
		{"every minute: only the latest missed firing", elastiv1alpha1.PreWarm{Schedule: "* * * * *"},
			utc(time.March, 30, 10, 3).Add(30 * time.Second), utc(time.March, 30, 10, 0), utc(time.March, 30, 10, 3), utc(time.March, 30, 10, 4)},
		{"the repeated 02:30 of a fall-back night does not fire again", elastiv1alpha1.PreWarm{Schedule: "30 2 * * *", TimeZone: "Europe/Berlin"},
			utc(time.October, 25, 1, 31), utc(time.October, 25, 0, 30), time.Time{}, utc(time.October, 26, 1, 30)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePreWarm(tc.preWarm)
			if err != nil {
				t.Fatal(err)
			}
			due, next := p.Due(tc.now, tc.handled)
			if !due.Equal(tc.wantDue) || !next.Equal(tc.wantNext) {
				t.Errorf("Due(%s, %s) = (%s, %s), want (%s, %s)", tc.now.UTC(), tc.handled.UTC(), due.UTC(), next.UTC(), tc.wantDue, tc.wantNext)
			}
			if n := p.Next(tc.now); !n.Equal(tc.wantNext) {
				t.Errorf("Next = %s, want %s", n.UTC(), tc.wantNext)
			}
		})
	}
	for _, bad := range []elastiv1alpha1.PreWarm{{Schedule: "61 * * * *"}, {Schedule: "@daily", TimeZone: "Nowhere/Town"}} {
		if _, err := ParsePreWarm(bad); err == nil {
			t.Errorf("%+v parsed", bad)
		}
	}
}
