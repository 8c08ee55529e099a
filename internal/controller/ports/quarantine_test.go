package ports

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	toolscache "k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

const testQuarantine = time.Minute

// quarantinedAllocator is an allocator with a quarantine on a fake clock,
// reading the fake cache; its cursor starts deterministically.
func quarantinedAllocator(start, end int32, c fakeCache) (*Allocator, *clocktesting.FakeClock) {
	fake := clocktesting.NewFakeClock(time.Unix(1000, 0))
	return NewAllocator(start, end, c.holders, ReusePolicy{Quarantine: testQuarantine, Clock: fake, InUse: c.inUse}), fake
}

// wokenWithin waits up to a few seconds for one waiter's event: the wake at
// the end of a quarantine comes from a timer goroutine.
func wokenWithin(t *testing.T, a *Allocator) string {
	t.Helper()
	select {
	case e := <-a.events:
		return e.Object.GetNamespace() + "/" + e.Object.GetName()
	case <-time.After(5 * time.Second):
		t.Fatal("no waiter woken")
		return ""
	}
}

func wantExhausted(t *testing.T, err error, quarantined bool) {
	t.Helper()
	if !errors.Is(err, ErrPortsExhausted) {
		t.Fatalf("allocation: %v, want ErrPortsExhausted", err)
	}
	if got := strings.Contains(err.Error(), "quarantine"); got != quarantined {
		t.Fatalf("error %q: mentions the quarantine %v, want %v", err, got, quarantined)
	}
}

// TestFreedPortQuarantined: a released port is not handed out for the whole
// quarantine, even when it is the only free one, and is handed out once the
// quarantine is over. Before the fix the next ElastiService got it at once.
func TestFreedPortQuarantined(t *testing.T) {
	c := fakeCache{}
	a, fake := quarantinedAllocator(20000, 20002, c)
	t0 := time.Unix(100, 0)
	es := map[string]*elastiv1alpha1.ElastiService{}
	for i, name := range []string{"a", "b", "c", "d"} {
		es[name] = portsES(name, t0.Add(time.Duration(i)*time.Second))
	}
	for _, name := range []string{"a", "b", "c"} {
		if _, err := allocate(t, a, c, es[name], portsSvc("http")); err != nil {
			t.Fatalf("allocate %s: %v", name, err)
		}
	}
	freed := es["a"].Status.ProxyPorts[0].ResolverPort
	a.Release(keyOf(es["a"]))
	c.forget(keyOf(es["a"]))

	_, err := allocate(t, a, c, es["d"], portsSvc("http"))
	wantExhausted(t, err, true)
	fake.Step(testQuarantine - time.Nanosecond)
	_, err = allocate(t, a, c, es["d"], portsSvc("http"))
	wantExhausted(t, err, true)
	fake.Step(time.Nanosecond)
	got, err := allocate(t, a, c, es["d"], portsSvc("http"))
	if err != nil || cmp.Diff([]int32{freed}, got) != "" {
		t.Fatalf("d after the quarantine: %v %v, want [%d]", got, err, freed)
	}
}

// TestPortDroppedByAServiceQuarantined: a port an ElastiService stops
// needing (its Service lost the port) is quarantined like a deleted one's.
func TestPortDroppedByAServiceQuarantined(t *testing.T) {
	c := fakeCache{}
	a, fake := quarantinedAllocator(20000, 20001, c)
	es1, es2 := portsES("a", time.Unix(100, 0)), portsES("b", time.Unix(101, 0))
	if got, err := allocate(t, a, c, es1, portsSvc("http", "grpc")); err != nil || cmp.Diff([]int32{20000, 20001}, got) != "" {
		t.Fatalf("a: %v %v", got, err)
	}
	if got, err := allocate(t, a, c, es1, portsSvc("http")); err != nil || cmp.Diff([]int32{20000}, got) != "" {
		t.Fatalf("a shrinks: %v %v", got, err)
	}
	_, err := allocate(t, a, c, es2, portsSvc("http"))
	wantExhausted(t, err, true)
	fake.Step(testQuarantine)
	if name := wokenWithin(t, a); name != "ns/b" {
		t.Fatalf("woken %s, want ns/b", name)
	}
	if got, err := allocate(t, a, c, es2, portsSvc("http")); err != nil || cmp.Diff([]int32{20001}, got) != "" {
		t.Fatalf("b: %v %v, want [20001]", got, err)
	}
}

// TestPortCursor: new ports come from a cursor that moves on through the
// range and wraps round, not from the lowest free port, so a port freed
// just now is not the next one handed out even without a quarantine.
func TestPortCursor(t *testing.T) {
	c := fakeCache{}
	a := newPortAllocator(20000, 20004, c.holders)
	t0 := time.Unix(100, 0)
	var order []int32
	first := portsES("a", t0)
	for i, name := range []string{"a", "b", "c", "d", "e", "f"} {
		es := first
		if i > 0 {
			es = portsES(name, t0.Add(time.Duration(i)*time.Second))
		}
		got, err := allocate(t, a, c, es, portsSvc("http"))
		if err != nil {
			t.Fatalf("allocate %s: %v", name, err)
		}
		order = append(order, got...)
		if name == "b" {
			// a goes: lowest first would give its port to c.
			a.Release(keyOf(first))
			c.forget(keyOf(first))
		}
	}
	if diff := cmp.Diff([]int32{20000, 20001, 20002, 20003, 20004, 20000}, order); diff != "" {
		t.Fatalf("allocation order (-want +got)\n%s", diff)
	}
}

// TestPortCursorStartsAwayFromUsedPorts: a process that has allocated
// nothing yet (a restart, a new leader) does not know what was freed before
// it started. Its cursor starts in the longest run of unused ports, so a
// port freed among those still in use comes round after the whole run.
func TestPortCursorStartsAwayFromUsedPorts(t *testing.T) {
	c := fakeCache{}
	t0 := time.Unix(100, 0)
	// 20001 was freed just before the restart.
	c.record(portsES("a", t0), []elastiv1alpha1.ProxyPort{{Name: "http", ResolverPort: 20000}})
	c.record(portsES("c", t0), []elastiv1alpha1.ProxyPort{{Name: "http", ResolverPort: 20002}})
	for _, tt := range []struct {
		name  string
		randN func(int) int
		want  []int32
	}{
		{"run start", nil, []int32{20003, 20004, 20005, 20001}},
		{"random offset in the run", func(n int) int {
			if n != 3 {
				t.Errorf("randN(%d), want the run's length 3", n)
			}
			return 2
		}, []int32{20005, 20001, 20003, 20004}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cc := fakeCache{}
			for p, l := range c {
				cc[p] = append(cc[p], l...)
			}
			a := NewAllocator(20000, 20005, cc.holders, ReusePolicy{Clock: clocktesting.NewFakeClock(t0), InUse: cc.inUse, RandN: tt.randN})
			var got []int32
			for i := range tt.want {
				ports, err := allocate(t, a, cc, portsES(string(rune('p'+i)), t0), portsSvc("http"))
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, ports...)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("order (-want +got)\n%s", diff)
			}
		})
	}
}

// TestQuarantineEndWakesWaiter: when every free port is quarantined the
// allocation fails as an exhausted range does, the ElastiService waits, and
// the end of the quarantine wakes it through an event, not a poll. The
// release itself wakes nobody: the port is not usable yet.
func TestQuarantineEndWakesWaiter(t *testing.T) {
	c := fakeCache{}
	a, fake := quarantinedAllocator(20000, 20000, c)
	es1, es2 := portsES("a", time.Unix(100, 0)), portsES("b", time.Unix(101, 0))
	if _, err := allocate(t, a, c, es1, portsSvc("http")); err != nil {
		t.Fatal(err)
	}
	_, err := allocate(t, a, c, es2, portsSvc("http"))
	wantExhausted(t, err, false)
	a.Release(keyOf(es1))
	c.forget(keyOf(es1))
	if got := woken(a); len(got) != 0 {
		t.Fatalf("woken %v while the port is in quarantine", got)
	}
	_, err = allocate(t, a, c, es2, portsSvc("http"))
	wantExhausted(t, err, true)
	if !fake.HasWaiters() {
		t.Fatal("no timer set for the end of the quarantine")
	}
	fake.Step(testQuarantine)
	if name := wokenWithin(t, a); name != "ns/b" {
		t.Fatalf("woken %s, want ns/b", name)
	}
	if got, err := allocate(t, a, c, es2, portsSvc("http")); err != nil || cmp.Diff([]int32{20000}, got) != "" {
		t.Fatalf("b: %v %v, want [20000]", got, err)
	}
}

// TestQuarantineFromStatusNotifications: a process that never allocated an
// ElastiService's ports (a follower, or a leader that only finalized it)
// learns of their release from the informer. Between the cache dropping a
// deleted ElastiService and the delete notification, its port is still
// taken; after the notification it is quarantined; a tombstone counts too.
func TestQuarantineFromStatusNotifications(t *testing.T) {
	for _, tombstone := range []bool{false, true} {
		c := fakeCache{}
		a, fake := quarantinedAllocator(20000, 20000, c)
		h := a.StatusHandler()
		gone := portsES("gone", time.Unix(100, 0))
		c.record(gone, []elastiv1alpha1.ProxyPort{{Name: "http", ResolverPort: 20000}})
		h.OnAdd(gone, true)

		b := portsES("b", time.Unix(101, 0))
		c.forget(keyOf(gone)) // the cache has dropped it, the handler not yet
		_, err := allocate(t, a, c, b, portsSvc("http"))
		wantExhausted(t, err, false)

		var obj any = gone
		if tombstone {
			obj = toolscache.DeletedFinalStateUnknown{Key: "ns/gone", Obj: gone}
		}
		h.OnDelete(obj)
		_, err = allocate(t, a, c, b, portsSvc("http"))
		wantExhausted(t, err, true)
		fake.Step(testQuarantine)
		if name := wokenWithin(t, a); name != "ns/b" {
			t.Fatalf("tombstone %v: woken %s, want ns/b", tombstone, name)
		}
		if got, err := allocate(t, a, c, b, portsSvc("http")); err != nil || cmp.Diff([]int32{20000}, got) != "" {
			t.Fatalf("tombstone %v: b %v %v, want [20000]", tombstone, got, err)
		}
	}
}

// TestQuarantineFromStatusUpdate: a port that leaves a status on an update
// (another process dropped it) is quarantined too.
func TestQuarantineFromStatusUpdate(t *testing.T) {
	c := fakeCache{}
	a, fake := quarantinedAllocator(20000, 20001, c)
	h := a.StatusHandler()
	old := portsES("a", time.Unix(100, 0))
	c.record(old, []elastiv1alpha1.ProxyPort{{Name: "http", ResolverPort: 20000}, {Name: "grpc", ResolverPort: 20001}})
	h.OnAdd(old.DeepCopy(), true)
	shrunk := old.DeepCopy()
	c.record(shrunk, shrunk.Status.ProxyPorts[:1])
	h.OnUpdate(old, shrunk)

	b := portsES("b", time.Unix(101, 0))
	_, err := allocate(t, a, c, b, portsSvc("http"))
	wantExhausted(t, err, true)
	fake.Step(testQuarantine)
	if got, err := allocate(t, a, c, b, portsSvc("http")); err != nil || cmp.Diff([]int32{20001}, got) != "" {
		t.Fatalf("b: %v %v, want [20001]", got, err)
	}
}
