package ports

import (
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// fakeCache stands in for the ElastiService cache the allocator reads: who
// records which resolver port in its status. Tests change it by hand, so
// they decide exactly how far it lags behind the allocator.
type fakeCache map[int32][]elastiv1alpha1.ElastiService

func (c fakeCache) holders(_ context.Context, p int32) ([]elastiv1alpha1.ElastiService, error) {
	return c[p], nil
}

func (c fakeCache) inUse(context.Context) ([]int32, error) {
	var out []int32
	for p, list := range c {
		if len(list) > 0 {
			out = append(out, p)
		}
	}
	return out, nil
}

// record writes es's status as the cache would show it.
func (c fakeCache) record(es *elastiv1alpha1.ElastiService, ports []elastiv1alpha1.ProxyPort) {
	c.forget(keyOf(es))
	es.Status.ProxyPorts = ports
	for _, p := range ports {
		c[p.ResolverPort] = append(c[p.ResolverPort], *es.DeepCopy())
	}
}

// forget drops key from the cache, as a deletion does.
func (c fakeCache) forget(key types.NamespacedName) {
	for p, list := range c {
		var keep []elastiv1alpha1.ElastiService
		for _, o := range list {
			if o.Namespace != key.Namespace || o.Name != key.Name {
				keep = append(keep, o)
			}
		}
		c[p] = keep
	}
}

func keyOf(es *elastiv1alpha1.ElastiService) types.NamespacedName {
	return types.NamespacedName{Namespace: es.Namespace, Name: es.Name}
}

func portsES(name string, created time.Time) *elastiv1alpha1.ElastiService {
	return &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(created)}}
}

func portsSvc(names ...string) *corev1.Service {
	s := &corev1.Service{}
	for i, n := range names {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: n, Port: int32(80 + i)})
	}
	return s
}

// woken drains the allocator's events and returns the names it enqueued.
func woken(a *Allocator) []string {
	var out []string
	for {
		select {
		case e := <-a.events:
			out = append(out, e.Object.GetNamespace()+"/"+e.Object.GetName())
		default:
			sort.Strings(out)
			return out
		}
	}
}

// allocate allocates es's ports and, on success, records them in the cache
// as the status write would.
func allocate(t *testing.T, a *Allocator, c fakeCache, es *elastiv1alpha1.ElastiService, svc *corev1.Service) ([]int32, error) {
	t.Helper()
	got, err := a.Allocate(context.Background(), es, svc)
	if err != nil {
		return nil, err
	}
	c.record(es, got)
	var out []int32
	for _, p := range got {
		out = append(out, p.ResolverPort)
	}
	return out, nil
}

// The waiter tests below use newPortAllocator, which has no quarantine: they
// are about how a released port reaches a waiter, and a quarantine only
// delays that (TestQuarantineEndWakesWaiter covers the delayed wake). Before
// the quarantine, every allocator reused a port at once.

// TestPortWaiterWokenOnRelease: an ElastiService the range has no room for
// is enqueued as soon as another one releases its port, and then gets it,
// with no timer involved. Before the fix nothing told the waiter: it got
// the port only if a periodic requeue or its own backoff came round.
func TestPortWaiterWokenOnRelease(t *testing.T) {
	t0 := time.Unix(100, 0)
	c := fakeCache{}
	a := newPortAllocator(20000, 20001, c.holders)
	es1, es2, es3 := portsES("a", t0), portsES("b", t0.Add(time.Second)), portsES("c", t0.Add(2*time.Second))
	for _, es := range []*elastiv1alpha1.ElastiService{es1, es2} {
		if _, err := allocate(t, a, c, es, portsSvc("http")); err != nil {
			t.Fatalf("allocate %s: %v", es.Name, err)
		}
	}
	if _, err := allocate(t, a, c, es3, portsSvc("http")); !errors.Is(err, ErrPortsExhausted) {
		t.Fatalf("third allocation: %v, want ErrPortsExhausted", err)
	}
	if got := woken(a); len(got) != 0 {
		t.Fatalf("woken %v before any port was freed", got)
	}

	// b is deleted: its finalizer released it, the cache still has it.
	a.Release(keyOf(es2))
	if diff := cmp.Diff([]string{"ns/c"}, woken(a)); diff != "" {
		t.Fatalf("woken on release (-want +got)\n%s", diff)
	}
	// The reconcile this enqueues still sees b in the cache: c waits on.
	if _, err := allocate(t, a, c, es3, portsSvc("http")); !errors.Is(err, ErrPortsExhausted) {
		t.Fatalf("allocation against the stale cache: %v, want ErrPortsExhausted", err)
	}
	// The cache drops b; the reconcile of the deleted key releases it again.
	c.forget(keyOf(es2))
	a.Release(keyOf(es2))
	if diff := cmp.Diff([]string{"ns/c"}, woken(a)); diff != "" {
		t.Fatalf("woken once b left the cache (-want +got)\n%s", diff)
	}
	got, err := allocate(t, a, c, es3, portsSvc("http"))
	if err != nil || cmp.Diff([]int32{20001}, got) != "" {
		t.Fatalf("c after the release: %v %v, want [20001]", got, err)
	}
	// c waits no more.
	a.Release(keyOf(es1))
	if got := woken(a); len(got) != 0 {
		t.Fatalf("woken %v with nobody waiting", got)
	}
}

// TestPortWaiterWokenByNewLeader: a new leader has reserved nothing, but a
// deleted ElastiService's status held a port: its release still wakes the
// waiters.
func TestPortWaiterWokenByNewLeader(t *testing.T) {
	t0 := time.Unix(100, 0)
	c := fakeCache{}
	es1, es2, es3 := portsES("a", t0), portsES("b", t0.Add(time.Second)), portsES("c", t0.Add(2*time.Second))
	c.record(es1, []elastiv1alpha1.ProxyPort{{Name: "http", Port: 80, Protocol: "TCP", ResolverPort: 20000}})
	c.record(es2, []elastiv1alpha1.ProxyPort{{Name: "http", Port: 80, Protocol: "TCP", ResolverPort: 20001}})
	a := newPortAllocator(20000, 20001, c.holders)
	if _, err := allocate(t, a, c, es3, portsSvc("http")); !errors.Is(err, ErrPortsExhausted) {
		t.Fatalf("allocation: %v, want ErrPortsExhausted", err)
	}
	c.forget(keyOf(es1))
	a.Release(keyOf(es1))
	if diff := cmp.Diff([]string{"ns/c"}, woken(a)); diff != "" {
		t.Fatalf("woken (-want +got)\n%s", diff)
	}
	if got, err := allocate(t, a, c, es3, portsSvc("http")); err != nil || cmp.Diff([]int32{20000}, got) != "" {
		t.Fatalf("c: %v %v, want [20000]", got, err)
	}
}

// TestPortWaiterWokenWhenPortsShrink: an ElastiService whose Service loses a
// port frees its resolver port at once, before its status write reaches the
// cache, and the waiter gets it.
func TestPortWaiterWokenWhenPortsShrink(t *testing.T) {
	t0 := time.Unix(100, 0)
	c := fakeCache{}
	a := newPortAllocator(20000, 20001, c.holders)
	es1, es2 := portsES("a", t0), portsES("b", t0.Add(time.Second))
	if got, err := allocate(t, a, c, es1, portsSvc("http", "grpc")); err != nil || cmp.Diff([]int32{20000, 20001}, got) != "" {
		t.Fatalf("a: %v %v", got, err)
	}
	if _, err := allocate(t, a, c, es2, portsSvc("http")); !errors.Is(err, ErrPortsExhausted) {
		t.Fatalf("b: %v, want ErrPortsExhausted", err)
	}
	// a's Service drops grpc. Allocate directly: the cache keeps a's old
	// status for now.
	got, err := a.Allocate(context.Background(), es1, portsSvc("http"))
	if err != nil || len(got) != 1 || got[0].ResolverPort != 20000 {
		t.Fatalf("a shrinks: %v %v", got, err)
	}
	if diff := cmp.Diff([]string{"ns/b"}, woken(a)); diff != "" {
		t.Fatalf("woken (-want +got)\n%s", diff)
	}
	if got, err := allocate(t, a, c, es2, portsSvc("http")); err != nil || cmp.Diff([]int32{20001}, got) != "" {
		t.Fatalf("b: %v %v, want [20001]", got, err)
	}
	// Keeping the same ports wakes nobody.
	if _, err := allocate(t, a, c, es1, portsSvc("http")); err != nil {
		t.Fatal(err)
	}
	if got := woken(a); len(got) != 0 {
		t.Fatalf("woken %v though no port was freed", got)
	}
}

// TestPortWaiterForgottenOnRelease: a waiter that is deleted is not woken.
func TestPortWaiterForgottenOnRelease(t *testing.T) {
	c := fakeCache{}
	a := newPortAllocator(20000, 20000, c.holders)
	es1, es2 := portsES("a", time.Unix(100, 0)), portsES("b", time.Unix(101, 0))
	if _, err := allocate(t, a, c, es1, portsSvc("http")); err != nil {
		t.Fatal(err)
	}
	if _, err := allocate(t, a, c, es2, portsSvc("http")); !errors.Is(err, ErrPortsExhausted) {
		t.Fatalf("b: %v, want ErrPortsExhausted", err)
	}
	a.Release(keyOf(es2))
	if got := woken(a); len(got) != 0 {
		t.Fatalf("woken %v: b itself is gone", got)
	}
	a.Release(keyOf(es1))
	if got := woken(a); len(got) != 0 {
		t.Fatalf("woken %v with nobody waiting", got)
	}
}

func TestPortAllocator(t *testing.T) {
	ctx := context.Background()
	older := time.Unix(100, 0)
	// holdersDB simulates the cache: who records which port.
	db := map[int32][]elastiv1alpha1.ElastiService{}
	a := newPortAllocator(20000, 20003, func(_ context.Context, p int32) ([]elastiv1alpha1.ElastiService, error) { return db[p], nil })
	svc := func(names ...string) *corev1.Service {
		s := &corev1.Service{}
		for i, n := range names {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: n, Port: int32(80 + i)})
		}
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "udp", Port: 53, Protocol: corev1.ProtocolUDP})
		return s
	}
	es := func(name string, created time.Time, ports ...elastiv1alpha1.ProxyPort) *elastiv1alpha1.ElastiService {
		return &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: metav1.NewTime(created)},
			Status: elastiv1alpha1.ElastiServiceStatus{ProxyPorts: ports}}
	}
	record := func(e *elastiv1alpha1.ElastiService, ports []elastiv1alpha1.ProxyPort) {
		e.Status.ProxyPorts = ports
		for _, p := range ports {
			db[p.ResolverPort] = append(db[p.ResolverPort], *e)
		}
	}
	resolverPorts := func(pp []elastiv1alpha1.ProxyPort) []int32 {
		var out []int32
		for _, p := range pp {
			out = append(out, p.ResolverPort)
		}
		return out
	}

	a1 := es("a", older)
	got, err := a.Allocate(ctx, a1, svc("http", "grpc"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int32{20000, 20001}, resolverPorts(got)); diff != "" {
		t.Fatalf("first allocation (-want +got)\n%s", diff)
	}
	// b allocates before a's status reached the cache: the reservation
	// keeps them apart.
	b := es("b", older.Add(time.Second))
	gotB, err := a.Allocate(ctx, b, svc("http"))
	if err != nil || resolverPorts(gotB)[0] != 20002 {
		t.Fatalf("b got %v %v", gotB, err)
	}
	record(a1, got)
	record(b, gotB)

	// Stable: a keeps its ports, and a port added later gets a new one.
	again, err := a.Allocate(ctx, a1, svc("http", "grpc", "admin"))
	if err != nil || cmp.Diff([]int32{20000, 20001, 20003}, resolverPorts(again)) != "" {
		t.Fatalf("a again: %v %v", again, err)
	}
	// Exhausted.
	c := es("c", older.Add(2*time.Second))
	if _, err := a.Allocate(ctx, c, svc("http")); err == nil {
		t.Fatal("allocation beyond the range succeeded")
	}
	// Released ports are reused.
	a.Release(types.NamespacedName{Namespace: "ns", Name: "b"})
	delete(db, 20002)
	gotC, err := a.Allocate(ctx, c, svc("http"))
	if err != nil || resolverPorts(gotC)[0] != 20002 {
		t.Fatalf("c after release: %v %v", gotC, err)
	}

	// A collision recorded by two objects (say, from two leaders): the
	// older keeps the port, the younger moves.
	fresh := newPortAllocator(20000, 20009, func(_ context.Context, p int32) ([]elastiv1alpha1.ElastiService, error) { return db[p], nil })
	db = map[int32][]elastiv1alpha1.ElastiService{}
	clash := []elastiv1alpha1.ProxyPort{{Name: "http", Port: 80, ResolverPort: 20005}}
	old, young := es("old", older, clash...), es("young", older.Add(time.Hour), clash...)
	db[20005] = []elastiv1alpha1.ElastiService{*old, *young}
	gotOld, _ := fresh.Allocate(ctx, old, svc("http"))
	gotYoung, _ := fresh.Allocate(ctx, young, svc("http"))
	if resolverPorts(gotOld)[0] != 20005 || resolverPorts(gotYoung)[0] == 20005 {
		t.Fatalf("collision: old %v young %v", gotOld, gotYoung)
	}
}
