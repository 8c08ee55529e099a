//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/controller"
)

// TestEnabledPeriodTimeZone: an enabledPeriod read in Asia/Tokyo. A window
// open now in UTC but not in Tokyo keeps an idle target awake; one open now
// in Tokyo but not in UTC lets it sleep. (Tokyo is UTC+9 all year, so the
// two readings never overlap.)
func TestEnabledPeriodTimeZone(t *testing.T) {
	t.Parallel()
	e := Get(t)
	ns, _ := demoApp(t, e)
	now := time.Now()
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	if err != nil {
		t.Fatal(err)
	}
	// Each window opens at the start of the current hour on one clock and
	// lasts two hours.
	openInUTC := fmt.Sprintf("0 %d * * *", now.UTC().Hour())
	openInTokyo := fmt.Sprintf("0 %d * * *", now.In(tokyo).Hour())
	es := e.ElastiServiceFor(ns, "demoapp", IdleQuery)
	es.Spec.EnabledPeriod = &elastiv1alpha1.EnabledPeriod{Schedule: openInUTC, Duration: "2h", TimeZone: "Asia/Tokyo"}
	e.Create(t, es)

	e.WaitAwake(t, ns, "demoapp", time.Minute) // reconciled: serve mode
	// Three cooldowns with idle triggers: it would have slept in UTC.
	ctx := context.Background()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if err := e.Awake(ctx, ns, "demoapp"); err != nil {
			t.Fatalf("window %q read in Asia/Tokyo is closed now, yet: %v", openInUTC, err)
		}
		time.Sleep(time.Second)
	}
	t.Logf("schedule %q in Asia/Tokyo (closed now): awake after 15 s with idle triggers", openInUTC)

	e.UpdateElastiService(t, ns, "demoapp", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.EnabledPeriod.Schedule = openInTokyo
	})
	e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)
	t.Logf("schedule %q in Asia/Tokyo (open now): asleep", openInTokyo)
}

// TestPreWarmWakesOnSchedule: a sleeping target with a preWarm schedule in
// Asia/Kolkata (UTC+5:30, so even the minute differs from a UTC reading) is
// woken at the firing without any request, once: a PreWarmed Event, the
// firing in status.lastPreWarmTime, and after it sleeps again no second wake
// for the same firing.
func TestPreWarmWakesOnSchedule(t *testing.T) {
	t.Parallel()
	e := Get(t)
	ns, _ := demoApp(t, e)
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	if err != nil {
		t.Fatal(err)
	}
	// The first whole minute at least 90 s ahead: time to create the
	// ElastiService and let it sleep, also on a machine busy with the other
	// tests (a whole minute two minutes ahead could be only 61 s away).
	firing := time.Now().In(kolkata).Add(90 * time.Second).Truncate(time.Minute).Add(time.Minute)
	es := e.ElastiServiceFor(ns, "demoapp", IdleQuery)
	es.Spec.PreWarm = &elastiv1alpha1.PreWarm{
		Schedule: fmt.Sprintf("%d %d %d %d *", firing.Minute(), firing.Hour(), firing.Day(), int(firing.Month())),
		TimeZone: "Asia/Kolkata",
	}
	e.Create(t, es)
	e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)
	if time.Now().After(firing) {
		t.Fatalf("the target fell asleep only after the firing at %s", firing.UTC().Format(time.TimeOnly))
	}
	t.Logf("asleep; pre-warm due at %s Asia/Kolkata (%s UTC), schedule %q", firing.Format("15:04"), firing.UTC().Format("15:04"), es.Spec.PreWarm.Schedule)

	ctx := context.Background()
	// Nothing calls it: it wakes at the firing, not before.
	for time.Now().Before(firing.Add(-2 * time.Second)) {
		if n, _, err := e.Replicas(ctx, ns, "demoapp"); err != nil || n != 0 {
			t.Fatalf("%s before the firing the target has %d replicas (%v), want 0", time.Until(firing).Round(time.Second), n, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	var woke time.Time
	Eventually(t, 90*time.Second, 200*time.Millisecond, func(ctx context.Context) error {
		n, _, err := e.Replicas(ctx, ns, "demoapp")
		if err == nil && n == 0 {
			err = fmt.Errorf("not woken yet")
		}
		return err
	})
	woke = time.Now()
	t.Logf("woken %s after the firing", woke.Sub(firing).Round(100*time.Millisecond))
	if late := woke.Sub(firing); late < 0 || late > 60*time.Second {
		t.Errorf("woken %s after the firing, want within a minute", late)
	}
	Eventually(t, 30*time.Second, 250*time.Millisecond, func(ctx context.Context) error {
		got, err := e.GetElastiService(ctx, ns, "demoapp")
		if err != nil {
			return err
		}
		if got.Status.LastPreWarmTime == nil || !got.Status.LastPreWarmTime.Time.Equal(firing) {
			return fmt.Errorf("status.lastPreWarmTime %v, want the firing %s", got.Status.LastPreWarmTime, firing)
		}
		n, err := e.EventCount(ctx, ns, "demoapp", controller.EventPreWarmed)
		if err == nil && n != 1 {
			err = fmt.Errorf("%d %s Events, want 1", n, controller.EventPreWarmed)
		}
		return err
	})
	// Idle, it sleeps again after its cooldown, and the same firing does
	// not wake it a second time.
	e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if n, _, err := e.Replicas(ctx, ns, "demoapp"); err != nil || n != 0 {
			t.Fatalf("asleep again after the pre-warm, the target has %d replicas (%v): the firing woke it twice", n, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if n, err := e.EventCount(ctx, ns, "demoapp", controller.EventPreWarmed); err != nil || n != 1 {
		t.Errorf("%d %s Events (%v), want 1", n, controller.EventPreWarmed, err)
	}
}
