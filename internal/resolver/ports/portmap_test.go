package ports

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/resolver/resolvertest"
)

// waitTimeout bounds every wait in these tests; the waits are event-driven
// and end as soon as the condition holds.
const waitTimeout = 60 * time.Second

func TestPortMapUpdates(t *testing.T) {
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	b := types.NamespacedName{Namespace: "ns", Name: "b"}
	pp := func(port int32) elastiv1alpha1.ProxyPort {
		return elastiv1alpha1.ProxyPort{Name: "http", Port: 80, ResolverPort: port}
	}
	tests := []struct {
		name   string
		events func(m *PortMap)
		want   map[int32]types.NamespacedName // port -> owner
	}{
		{
			name:   "set maps every port",
			events: func(m *PortMap) { m.Set(resolvertest.ElastiService("ns", "a", "sa", nil, pp(1), pp(2))) },
			want:   map[int32]types.NamespacedName{1: a, 2: a},
		},
		{
			name: "an update replaces earlier ports",
			events: func(m *PortMap) {
				m.Set(resolvertest.ElastiService("ns", "a", "sa", nil, pp(1), pp(2)))
				m.Set(resolvertest.ElastiService("ns", "a", "sa", nil, pp(3)))
			},
			want: map[int32]types.NamespacedName{3: a},
		},
		{
			name: "delete forgets",
			events: func(m *PortMap) {
				m.Set(resolvertest.ElastiService("ns", "a", "sa", nil, pp(1)))
				m.Set(resolvertest.ElastiService("ns", "b", "sb", nil, pp(2)))
				m.Delete(a)
			},
			want: map[int32]types.NamespacedName{2: b},
		},
		{
			name: "a port claimed twice is unmapped until one claim goes",
			events: func(m *PortMap) {
				m.Set(resolvertest.ElastiService("ns", "a", "sa", nil, pp(1), pp(5)))
				m.Set(resolvertest.ElastiService("ns", "b", "sb", nil, pp(5)))
			},
			want: map[int32]types.NamespacedName{1: a},
		},
		{
			name: "a serve-mode ElastiService claims nothing, so it is no conflict",
			events: func(m *PortMap) {
				m.Set(resolvertest.ElastiService("ns", "a", "sa", nil, pp(5)))
				m.Set(resolvertest.InMode(resolvertest.ElastiService("ns", "b", "sb", nil, pp(5), pp(6)), elastiv1alpha1.ModeServe))
			},
			want: map[int32]types.NamespacedName{5: a},
		},
		{
			name: "going to serve mode unmaps (no linger here)",
			events: func(m *PortMap) {
				m.Set(resolvertest.ElastiService("ns", "a", "sa", nil, pp(1)))
				m.Set(resolvertest.InMode(resolvertest.ElastiService("ns", "a", "sa", nil, pp(1)), elastiv1alpha1.ModeServe))
			},
			want: map[int32]types.NamespacedName{},
		},
		{
			name: "the remaining claim wins once the other moves",
			events: func(m *PortMap) {
				m.Set(resolvertest.ElastiService("ns", "a", "sa", nil, pp(5)))
				m.Set(resolvertest.ElastiService("ns", "b", "sb", nil, pp(5)))
				m.Set(resolvertest.ElastiService("ns", "a", "sa", nil, pp(6)))
			},
			want: map[int32]types.NamespacedName{5: b, 6: a},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewPortMap()
			tt.events(m)
			got := map[int32]types.NamespacedName{}
			for port := range int32(10) {
				if target, ok := m.Lookup(context.Background(), port, 0, nil); ok {
					got[port] = target.ElastiService
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("mappings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPortMapLookupWaitsForMapping(t *testing.T) {
	m := NewPortMap()
	got := make(chan bool, 1)
	go func() {
		_, ok := m.Lookup(context.Background(), 7, time.Minute, time.After)
		got <- ok
	}()
	// An unrelated update wakes the waiter without satisfying it.
	m.Set(resolvertest.ElastiService("ns", "other", "svc", nil, elastiv1alpha1.ProxyPort{Port: 80, ResolverPort: 8}))
	m.Set(resolvertest.ElastiService("ns", "a", "svc", nil, elastiv1alpha1.ProxyPort{Port: 80, ResolverPort: 7}))
	select {
	case ok := <-got:
		if !ok {
			t.Fatal("Lookup gave up although the mapping arrived")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Lookup did not return after the mapping arrived")
	}
}

func TestPortMapLookupGivesUp(t *testing.T) {
	m := NewPortMap()
	expire := make(chan time.Time)
	got := make(chan bool, 1)
	go func() {
		_, ok := m.Lookup(context.Background(), 7, time.Second, func(time.Duration) <-chan time.Time { return expire })
		got <- ok
	}()
	expire <- time.Now()
	if <-got {
		t.Fatal("Lookup found a mapping that never arrived")
	}
	if _, ok := m.Lookup(context.Background(), 7, 0, time.After); ok {
		t.Fatal("Lookup without wait found a mapping")
	}
}

func BenchmarkPortMapLookup(b *testing.B) {
	m := NewPortMap()
	for i := range 1000 {
		m.Set(resolvertest.ElastiService("ns", "es-"+strconv.Itoa(i), "svc", nil,
			elastiv1alpha1.ProxyPort{Name: "http", Port: 80, ResolverPort: int32(20000 + i)}))
	}
	ctx := context.Background()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, ok := m.Lookup(ctx, int32(20000+i%1000), time.Second, time.After); !ok {
				b.Fatal("mapping missing")
			}
			i++
		}
	})
}

// TestReleasedPortLingers: a port whose ElastiService is deleted keeps its
// Target for the linger period, so connections routed by a kube-proxy that
// has not caught up are served; then it is unmapped. Its own ElastiService
// takes a lingering port back at once; another one's claim on it counts only
// once the linger is over, and until then the port is unmapped: a data
// plane that still routes the old Service's clients there must not reach
// the new Service.
func TestReleasedPortLingers(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	m := NewPortMap()
	m.SetLinger(30*time.Second, clk)
	a := lingerES("a", "svc-a", 20001)
	m.Set(a)
	m.Delete(types.NamespacedName{Namespace: "ns", Name: "a"})
	if tg, ok, _ := m.get(20001); !ok || tg.Service.Name != "svc-a" {
		t.Fatalf("right after the delete: %+v %v, want svc-a's Target", tg, ok)
	}
	clk.SetTime(clk.Now().Add(29 * time.Second))
	if _, ok, _ := m.get(20001); !ok {
		t.Fatal("unmapped before the linger ended")
	}
	clk.SetTime(clk.Now().Add(time.Second))
	if tg, ok, _ := m.get(20001); ok {
		t.Fatalf("still mapped to %+v after the linger", tg)
	}

	// A port dropped from a status lingers too; its own ElastiService
	// takes it back at once.
	m.Set(lingerES("b", "svc-b", 20002))
	m.Set(lingerES("b", "svc-b"))
	if tg, ok, _ := m.get(20002); !ok || tg.Service.Name != "svc-b" {
		t.Fatalf("dropped port: %+v %v, want svc-b's Target lingering", tg, ok)
	}
	m.Set(lingerES("b", "svc-b", 20002))
	if tg, ok, _ := m.get(20002); !ok || tg.Service.Name != "svc-b" {
		t.Fatalf("taken back: %+v %v, want svc-b's Target", tg, ok)
	}

	// Another claim inside the linger: unmapped until the linger ends.
	m.Set(lingerES("b", "svc-b"))
	clk.SetTime(clk.Now().Add(10 * time.Second))
	m.Set(lingerES("c", "svc-c", 20002))
	if tg, ok, _ := m.get(20002); ok {
		t.Fatalf("claimed inside svc-b's linger: mapped to %+v, want unmapped", tg)
	}
	// c's claim goes inside the linger: b's clients still get no one
	// else's Service.
	m.Set(lingerES("c", "svc-c"))
	if tg, ok, _ := m.get(20002); ok {
		t.Fatalf("a contested port's claim went: mapped to %+v, want unmapped", tg)
	}
	m.Set(lingerES("c", "svc-c", 20002))
	clk.SetTime(clk.Now().Add(20 * time.Second))
	if tg, ok, _ := m.get(20002); ok {
		t.Fatalf("svc-b's linger is over, but the contested linger that c's drop started is not: mapped to %+v", tg)
	}
	clk.SetTime(clk.Now().Add(10 * time.Second))
	if tg, ok, _ := m.get(20002); !ok || tg.Service.Name != "svc-c" {
		t.Fatalf("after both lingers: %+v %v, want svc-c's Target", tg, ok)
	}

	// Without a linger (NewPortMap's default) a released port is unmapped
	// at once.
	m = NewPortMap()
	m.Set(lingerES("a", "svc-a", 20001))
	m.Delete(types.NamespacedName{Namespace: "ns", Name: "a"})
	if _, ok, _ := m.get(20001); ok {
		t.Fatal("mapped after the delete with no linger")
	}
}

func lingerES(name, svc string, ports ...int32) *elastiv1alpha1.ElastiService {
	es := &elastiv1alpha1.ElastiService{}
	es.Namespace, es.Name, es.Spec.Service = "ns", name, svc
	es.Status.Mode = elastiv1alpha1.ModeProxy
	for _, p := range ports {
		es.Status.ProxyPorts = append(es.Status.ProxyPorts, elastiv1alpha1.ProxyPort{Name: "http", Port: 80, Protocol: "TCP", ResolverPort: p})
	}
	return es
}

// TestLingerEndIsAnEvent: the end of a linger closes the PortMap's change
// channel, so whoever follows the mapped Services (the EndpointSlice
// watches) learns of it without a timer of its own.
func TestLingerEndIsAnEvent(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	m := NewPortMap()
	m.SetLinger(30*time.Second, clk)
	m.Set(lingerES("a", "svc-a", 20001))
	m.Set(resolvertest.InMode(lingerES("a", "svc-a", 20001), elastiv1alpha1.ModeServe))
	svcs, changed := m.Services()
	if diff := cmp.Diff(map[types.NamespacedName]struct{}{{Namespace: "ns", Name: "svc-a"}: {}}, svcs); diff != "" {
		t.Fatalf("services while lingering (-want +got):\n%s", diff)
	}
	clk.Step(30 * time.Second)
	select {
	case <-changed:
	case <-time.After(waitTimeout):
		t.Fatal("the end of the linger was not announced")
	}
	if svcs, _ := m.Services(); len(svcs) != 0 {
		t.Errorf("services after the linger = %v, want none", svcs)
	}
}

// TestPortMapForgetsDeletedElastiServices: the forget hook (the metric
// series' deletion) runs for a deleted ElastiService once none of its ports
// lingers, at once when none did, and never for one that is only back in
// serve mode or was created again under the same name.
func TestPortMapForgetsDeletedElastiServices(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	m := NewPortMap()
	m.SetLinger(30*time.Second, clk)
	forgotten := make(chan types.NamespacedName, 10)
	m.SetForget(func(k types.NamespacedName) { forgotten <- k })
	none := func(when string) {
		t.Helper()
		select {
		case k := <-forgotten:
			t.Fatalf("%s: %s forgotten", when, k)
		default:
		}
	}
	next := func(want string) {
		t.Helper()
		select {
		case k := <-forgotten:
			if k != (types.NamespacedName{Namespace: "ns", Name: want}) {
				t.Fatalf("forgot %s, want ns/%s", k, want)
			}
		case <-time.After(waitTimeout):
			t.Fatalf("ns/%s never forgotten", want)
		}
	}

	// Deleted in proxy mode: its port lingers, then it is forgotten.
	m.Set(lingerES("a", "svc-a", 20001))
	m.Delete(types.NamespacedName{Namespace: "ns", Name: "a"})
	none("while the port lingers")
	clk.Step(30 * time.Second)
	next("a")

	// Deleted in serve mode, nothing lingering: forgotten at once.
	m.Set(resolvertest.InMode(lingerES("b", "svc-b", 20002), elastiv1alpha1.ModeServe))
	m.Delete(types.NamespacedName{Namespace: "ns", Name: "b"})
	next("b")

	// Back in serve mode only, or deleted and created again: kept.
	m.Set(lingerES("c", "svc-c", 20003))
	m.Set(resolvertest.InMode(lingerES("c", "svc-c", 20003), elastiv1alpha1.ModeServe))
	m.Set(lingerES("d", "svc-d", 20004))
	m.Delete(types.NamespacedName{Namespace: "ns", Name: "d"})
	m.Set(lingerES("d", "svc-d", 20004))
	_, changed := m.Services()
	clk.Step(30 * time.Second)
	select {
	case <-changed: // c's linger ended
	case <-time.After(waitTimeout):
		t.Fatal("c's linger end was not announced")
	}
	m.mu.RLock()
	deleted := len(m.deleted)
	m.mu.RUnlock()
	if deleted != 0 {
		t.Errorf("%d ElastiServices still awaiting forget, want 0", deleted)
	}
	none("after serve mode and re-creation")
}
