//go:build integration

package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/scaling"
)

// tomorrowAt is hour:minute tomorrow on the wall clock of zone.
func tomorrowAt(t *testing.T, zone string, hour, minute int) time.Time {
	t.Helper()
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	d := time.Now().In(loc).AddDate(0, 0, 1)
	return time.Date(d.Year(), d.Month(), d.Day(), hour, minute, 0, 0, loc)
}

// poke changes an annotation nothing reads, so that the ElastiService is
// reconciled now: the work queue's own requeues run on the real clock, not
// on the test's fake one.
func poke(t *testing.T, ns, name string) {
	t.Helper()
	patchAnnotation(t, ns, name, "test.elasti.dev/poke", time.Now().Format(time.RFC3339Nano))
}

// TestEnabledPeriodTimeZone: a window read in America/New_York keeps the
// target awake at an hour that is inside the same window read in UTC, and
// lets it sleep inside its New York hours.
func TestEnabledPeriodTimeZone(t *testing.T) {
	open := tomorrowAt(t, "America/New_York", 9, 0)
	// 09:30 UTC: inside "0 9 * * *" for 1h in UTC, 04:30 or 05:30 in New York.
	utcInside := time.Date(open.Year(), open.Month(), open.Day(), 9, 30, 0, 0, time.UTC)
	fake := clocktesting.NewFakeClock(utcInside)
	op := startOperator(t, operatorOptions{
		triggers: newFakeTriggers(scaling.StateIdle),
		cfg:      func(c *Config) { c.Clock = fake },
	})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	createDeployment(t, op.ns, "ny", 1)
	createService(t, op.ns, "ny")
	createES(t, op.ns, "ny", "ny", "ny", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.EnabledPeriod = &elastiv1alpha1.EnabledPeriod{Schedule: "0 9 * * *", Duration: "1h", TimeZone: "America/New_York"}
	})
	eventually(t, wait, "reconciled", wantMode(op.ns, "ny", elastiv1alpha1.ModeServe))
	never(t, 2*time.Second, "outside the New York window (inside it in UTC)", wantReplicas(op.ns, "ny", 1))
	fake.SetTime(open.Add(30 * time.Second))
	passGrace(t, fake, op.ns, "ny")
	eventually(t, wait, "asleep inside the New York window", wantReplicas(op.ns, "ny", 0))
}

// TestPreWarmWakesOnce: a pre-warm firing wakes a sleeping target as an
// activation does, records the firing and announces it; the firing is never
// acted on again, a firing 6 minutes late is dropped and one 4 minutes late
// is honoured.
func TestPreWarmWakesOnce(t *testing.T) {
	firing := tomorrowAt(t, "Europe/Berlin", 8, 55)
	// Close to the firing, so that the sleeping target's requeue for it
	// (real time, the fake clock's distance) comes back every few seconds.
	fake := clocktesting.NewFakeClock(firing.Add(-3 * time.Second))
	op := startOperator(t, operatorOptions{
		triggers: newFakeTriggers(scaling.StateIdle),
		cfg:      func(c *Config) { c.Clock = fake },
	})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	createDeployment(t, op.ns, "pw", 1)
	createService(t, op.ns, "pw")
	createES(t, op.ns, "pw", "pw", "pw", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.PreWarm = &elastiv1alpha1.PreWarm{Schedule: "55 8 * * *", TimeZone: "Europe/Berlin"}
	})
	passGrace(t, fake, op.ns, "pw")
	eventually(t, wait, "asleep before the firing", wantReplicas(op.ns, "pw", 0))
	eventually(t, wait, "proxy", wantMode(op.ns, "pw", elastiv1alpha1.ModeProxy))

	// The firing: no request, no annotation; the requeue alone wakes it.
	woke := firing.Add(30 * time.Second)
	fake.SetTime(woke)
	eventually(t, wait, "pre-warmed", wantReplicas(op.ns, "pw", 1))
	eventually(t, wait, "firing recorded", wantPreWarm(op.ns, "pw", firing))
	eventually(t, wait, "PreWarmed Event", wantEvent(op.ns, "pw", EventPreWarmed))
	if es := getES(t, op.ns, "pw"); es.Status.LastScaledUpTime == nil || !es.Status.LastScaledUpTime.Time.Equal(woke) {
		t.Fatalf("lastScaledUpTime %v, want the wake at %s", es.Status.LastScaledUpTime, woke)
	}

	// Asleep again a few seconds after the same firing: it is not acted
	// on twice.
	setOwnSlice(t, op.ns, "pw", true)
	eventually(t, wait, "serve", wantMode(op.ns, "pw", elastiv1alpha1.ModeServe))
	fake.Step(2 * time.Second)
	passGrace(t, fake, op.ns, "pw")
	eventually(t, wait, "asleep again", wantReplicas(op.ns, "pw", 0))
	poke(t, op.ns, "pw")
	never(t, 3*time.Second, "the handled firing does not wake it again", wantReplicas(op.ns, "pw", 0))
	if n := len(eventsOf(t, op.ns, "pw", EventPreWarmed)); n != 1 {
		t.Fatalf("%d PreWarmed Events, want 1", n)
	}

	// The next day's firing, 6 minutes late (say the operator was down): dropped.
	next := firing.AddDate(0, 0, 1)
	fake.SetTime(next.Add(6 * time.Minute))
	poke(t, op.ns, "pw")
	never(t, 3*time.Second, "a firing 6 minutes late is dropped", wantReplicas(op.ns, "pw", 0))
	if err := wantPreWarm(op.ns, "pw", firing)(); err != nil {
		t.Fatal(err)
	}

	// The day after, 4 minutes late: honoured.
	after := firing.AddDate(0, 0, 2)
	fake.SetTime(after.Add(4 * time.Minute))
	poke(t, op.ns, "pw")
	eventually(t, wait, "a firing 4 minutes late wakes it", wantReplicas(op.ns, "pw", 1))
	eventually(t, wait, "that firing recorded", wantPreWarm(op.ns, "pw", after))
}

// TestPreWarmWhileAwakeRestartsCooldown: a firing that finds the target up
// leaves its replicas alone, and the cooldown counts from the firing's wake,
// so idle triggers do not put it to sleep right after the firing.
func TestPreWarmWhileAwakeRestartsCooldown(t *testing.T) {
	firing := tomorrowAt(t, "Europe/Berlin", 8, 55)
	fake := clocktesting.NewFakeClock(firing.Add(-time.Minute))
	trig := newFakeTriggers(scaling.StateActive)
	op := startOperator(t, operatorOptions{
		triggers: trig,
		cfg:      func(c *Config) { c.Clock = fake },
	})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	createDeployment(t, op.ns, "up", 2)
	createService(t, op.ns, "up")
	setOwnSlice(t, op.ns, "up", true)
	createES(t, op.ns, "up", "up", "up", func(es *elastiv1alpha1.ElastiService) {
		es.Spec.CooldownPeriod = 600
		es.Spec.PreWarm = &elastiv1alpha1.PreWarm{Schedule: "55 8 * * *", TimeZone: "Europe/Berlin"}
	})
	eventually(t, wait, "reconciled", wantMode(op.ns, "up", elastiv1alpha1.ModeServe))
	fake.SetTime(firing.Add(10 * time.Second))
	eventually(t, wait, "firing recorded", wantPreWarm(op.ns, "up", firing))
	eventually(t, wait, "PreWarmed Event", wantEvent(op.ns, "up", EventPreWarmed))
	if got := deploymentReplicas(t, op.ns, "up"); got != 2 {
		t.Fatalf("replicas %d after the firing, want the 2 it had", got)
	}

	// The cooldown since creation is long over; only the firing's wake
	// keeps it up.
	trig.set(scaling.StateIdle)
	never(t, 2*time.Second, "cooldown restarted at the firing", wantReplicas(op.ns, "up", 2))
	fake.SetTime(firing.Add(10*time.Second + 10*time.Minute + time.Second))
	passGrace(t, fake, op.ns, "up")
	eventually(t, wait, "asleep after the cooldown", wantReplicas(op.ns, "up", 0))
}

func wantPreWarm(ns, name string, firing time.Time) func() error {
	return func() error {
		es := &elastiv1alpha1.ElastiService{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, es); err != nil {
			return err
		}
		if got := es.Status.LastPreWarmTime; got == nil || !got.Time.Equal(firing) {
			return fmt.Errorf("lastPreWarmTime %v, want %s", got, firing.UTC())
		}
		return nil
	}
}
