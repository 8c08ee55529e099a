package endpoints

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/resolver/resolvertest"
)

func TestEndpointsReady(t *testing.T) {
	svc := types.NamespacedName{Namespace: "ns", Name: "web"}
	proxySlice := resolvertest.Slice("ns", "web-elasti", "web", "http", 20001, resolvertest.ReadyEP("10.0.0.99"))
	proxySlice.Labels[contract.LabelManagedBy] = contract.ManagedBy
	tests := []struct {
		name     string
		slices   []*discoveryv1.EndpointSlice
		deletes  []string
		portName string
		want     []string
		// otherReady: another port of the Service has ready endpoints.
		otherReady bool
	}{
		{
			name:     "ready endpoints with the slice's target port",
			slices:   []*discoveryv1.EndpointSlice{resolvertest.Slice("ns", "web-1", "web", "http", 8080, resolvertest.ReadyEP("10.0.0.2"), resolvertest.ReadyEP("10.0.0.1"))},
			portName: "http",
			want:     []string{"10.0.0.1:8080", "10.0.0.2:8080"},
		},
		{
			name: "not ready, absent ready and terminating endpoints are skipped",
			slices: []*discoveryv1.EndpointSlice{resolvertest.Slice("ns", "web-1", "web", "http", 8080,
				resolvertest.Endpoint{IP: "10.0.0.1", Ready: ptr.To(false)},
				resolvertest.Endpoint{IP: "10.0.0.2"},
				resolvertest.Endpoint{IP: "10.0.0.3", Ready: ptr.To(true), Terminating: ptr.To(true)},
				resolvertest.ReadyEP("10.0.0.4"))},
			portName: "http",
			want:     []string{"10.0.0.4:8080"},
		},
		{
			name: "slices merge; each uses its own port number",
			slices: []*discoveryv1.EndpointSlice{
				resolvertest.Slice("ns", "web-1", "web", "http", 8080, resolvertest.ReadyEP("10.0.0.1")),
				resolvertest.Slice("ns", "web-2", "web", "http", 9090, resolvertest.ReadyEP("10.0.0.2")),
			},
			portName: "http",
			want:     []string{"10.0.0.1:8080", "10.0.0.2:9090"},
		},
		{
			name:     "Elasti's own proxy slice is ignored",
			slices:   []*discoveryv1.EndpointSlice{proxySlice},
			portName: "http",
			want:     nil,
		},
		{
			name:       "another port name does not match",
			slices:     []*discoveryv1.EndpointSlice{resolvertest.Slice("ns", "web-1", "web", "metrics", 9100, resolvertest.ReadyEP("10.0.0.1"))},
			portName:   "http",
			want:       nil,
			otherReady: true,
		},
		{
			name:     "another Service's slice does not count",
			slices:   []*discoveryv1.EndpointSlice{resolvertest.Slice("ns", "api-1", "api", "http", 8080, resolvertest.ReadyEP("10.0.0.1"))},
			portName: "http",
			want:     nil,
		},
		{
			name: "deleting a slice removes its endpoints",
			slices: []*discoveryv1.EndpointSlice{
				resolvertest.Slice("ns", "web-1", "web", "http", 8080, resolvertest.ReadyEP("10.0.0.1")),
				resolvertest.Slice("ns", "web-2", "web", "http", 8080, resolvertest.ReadyEP("10.0.0.2")),
			},
			deletes:  []string{"web-1"},
			portName: "http",
			want:     []string{"10.0.0.2:8080"},
		},
		{
			name: "an update replaces the slice's endpoints",
			slices: []*discoveryv1.EndpointSlice{
				resolvertest.Slice("ns", "web-1", "web", "http", 8080, resolvertest.ReadyEP("10.0.0.1")),
				resolvertest.Slice("ns", "web-1", "web", "http", 8080, resolvertest.Endpoint{IP: "10.0.0.1", Ready: ptr.To(true), Terminating: ptr.To(true)}),
			},
			portName: "http",
			want:     nil,
		},
		{
			name:     "unnamed single port",
			slices:   []*discoveryv1.EndpointSlice{resolvertest.Slice("ns", "web-1", "web", "", 8080, resolvertest.ReadyEP("10.0.0.1"))},
			portName: "",
			want:     []string{"10.0.0.1:8080"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := New()
			for _, s := range tt.slices {
				e.Update(s)
			}
			for _, d := range tt.deletes {
				e.Delete("ns", d)
			}
			if diff := cmp.Diff(tt.want, e.Ready(svc, tt.portName)); diff != "" {
				t.Errorf("Ready (-want +got):\n%s", diff)
			}
			if got, want := e.AnyReady(svc), len(tt.want) > 0 || tt.otherReady; got != want {
				t.Errorf("AnyReady = %v, want %v", got, want)
			}
		})
	}
}

// TestEndpointsOnlyThePodsOfTheService: the resolver dials only what
// Kubernetes' EndpointSlice controllers wrote, and of that only Pods of the
// Service's own namespace: whoever may write an EndpointSlice, or a
// selectorless Service's Endpoints, cannot point the shared resolver
// elsewhere.
func TestEndpointsOnlyThePodsOfTheService(t *testing.T) {
	svc := types.NamespacedName{Namespace: "ns", Name: "web"}
	good := resolvertest.Slice("ns", "web-good", "web", "http", 8080, resolvertest.ReadyEP("10.0.0.1"))
	relabel := func(name, writer string) *discoveryv1.EndpointSlice {
		s := resolvertest.Slice("ns", name, "web", "http", 8080, resolvertest.ReadyEP("10.0.0.9"))
		if writer == "" {
			delete(s.Labels, contract.LabelManagedBy)
		} else {
			s.Labels[contract.LabelManagedBy] = writer
		}
		return s
	}
	retarget := func(name string, ref *corev1.ObjectReference) *discoveryv1.EndpointSlice {
		s := resolvertest.Slice("ns", name, "web", "http", 8080, resolvertest.ReadyEP("10.0.0.9"))
		s.Endpoints[0].TargetRef = ref
		return s
	}
	// Mirrored from Endpoints written by hand, with a Pod reference that
	// nothing checks.
	mirrored := relabel("web-mirrored", "endpointslicemirroring-controller.k8s.io")
	mirrored.Endpoints[0].TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "web-abc"}
	e := New()
	for _, s := range []*discoveryv1.EndpointSlice{
		good,
		mirrored,
		relabel("web-by-hand", "someone"),
		relabel("web-unlabelled", ""),
		retarget("web-no-ref", nil),
		retarget("web-other-ns", &corev1.ObjectReference{Kind: "Pod", Namespace: "other", Name: "p"}),
		retarget("web-a-node", &corev1.ObjectReference{Kind: "Node", Name: "node-1"}),
	} {
		e.Update(s)
	}
	if diff := cmp.Diff([]string{"10.0.0.1:8080"}, e.Ready(svc, "http")); diff != "" {
		t.Errorf("Ready (-want +got):\n%s", diff)
	}
}

func TestEndpointsCandidatesRotate(t *testing.T) {
	svc := types.NamespacedName{Namespace: "ns", Name: "web"}
	e := New()
	e.Update(resolvertest.Slice("ns", "web-1", "web", "http", 80, resolvertest.ReadyEP("10.0.0.1"), resolvertest.ReadyEP("10.0.0.2"), resolvertest.ReadyEP("10.0.0.3")))
	firsts := map[string]int{}
	for range 300 {
		c := e.Candidates(svc, "http", "")
		if len(c) != 3 {
			t.Fatalf("Candidates = %v, want all three", c)
		}
		firsts[c[0]]++
	}
	want := map[string]int{"10.0.0.1:80": 100, "10.0.0.2:80": 100, "10.0.0.3:80": 100}
	if diff := cmp.Diff(want, firsts); diff != "" {
		t.Errorf("first candidates (-want +got):\n%s", diff)
	}
	if c := e.Candidates(svc, "grpc", ""); len(c) != 0 {
		t.Errorf("Candidates for a port with no endpoint = %v, want none", c)
	}
}

// TestEndpointsNextIsCandidatesFirst: Next takes the same turn of the
// rotation as Candidates, so HTTP/2 requests spread like new connections.
func TestEndpointsNextIsCandidatesFirst(t *testing.T) {
	svc := types.NamespacedName{Namespace: "ns", Name: "web"}
	e := New()
	e.Update(resolvertest.Slice("ns", "web-1", "web", "http", 80, resolvertest.ReadyEP("10.0.0.1"), resolvertest.ReadyEP("10.0.0.2"), resolvertest.ReadyEP("10.0.0.3")))
	firsts := map[string]int{}
	for i := range 300 {
		var first string
		if i%2 == 0 {
			addr, ok := e.Next(svc, "http")
			if !ok {
				t.Fatal("Next found no ready endpoint")
			}
			first = addr
		} else {
			first = e.Candidates(svc, "http", "")[0]
		}
		firsts[first]++
	}
	want := map[string]int{"10.0.0.1:80": 100, "10.0.0.2:80": 100, "10.0.0.3:80": 100}
	if diff := cmp.Diff(want, firsts); diff != "" {
		t.Errorf("first addresses (-want +got):\n%s", diff)
	}
	if addr, ok := e.Next(svc, "grpc"); ok {
		t.Errorf("Next for a port with no endpoint = %q, want none", addr)
	}
}

// TestNextThenDialKeepsRotating: an HTTP/2 request picks its endpoint with
// Next and its pool then dials it, preferring that endpoint. The dial must
// not advance the rotation too, or every request that dials would land on
// the same endpoint (each taking two steps of a two-endpoint rotation).
func TestNextThenDialKeepsRotating(t *testing.T) {
	svc := types.NamespacedName{Namespace: "ns", Name: "grpcsvc"}
	e := New()
	e.Update(resolvertest.Slice("ns", "grpcsvc-a", "grpcsvc", "grpc", 9090, resolvertest.ReadyEP("10.0.0.1")))
	e.Update(resolvertest.Slice("ns", "grpcsvc-b", "grpcsvc", "grpc", 9090, resolvertest.ReadyEP("10.0.0.2")))
	picked := map[string]int{}
	for range 20 {
		addr, ok := e.Next(svc, "grpc")
		if !ok {
			t.Fatal("Next found no ready endpoint")
		}
		c := e.Candidates(svc, "grpc", addr)
		if len(c) != 2 || c[0] != addr {
			t.Fatalf("candidates preferring %s = %v, want it first of both", addr, c)
		}
		picked[addr]++
	}
	if diff := cmp.Diff(map[string]int{"10.0.0.1:9090": 10, "10.0.0.2:9090": 10}, picked); diff != "" {
		t.Errorf("endpoints picked (-want +got):\n%s", diff)
	}
	// A preference that is not a ready endpoint (an HTTP/1.1 pool's
	// Service key) rotates as before.
	first := e.Candidates(svc, "grpc", "grpcsvc:grpc")[0]
	if second := e.Candidates(svc, "grpc", "grpcsvc:grpc")[0]; first == second {
		t.Errorf("two dials without a ready preference both start at %s", first)
	}
}

func TestEndpointsChangedFires(t *testing.T) {
	svc := types.NamespacedName{Namespace: "ns", Name: "web"}
	e := New()
	ch := e.Changed(svc)
	e.Update(resolvertest.Slice("ns", "other", "other", "http", 80, resolvertest.ReadyEP("10.0.0.9")))
	select {
	case <-ch:
		t.Fatal("a change to another Service fired this Service's channel")
	default:
	}
	e.Update(resolvertest.Slice("ns", "web-1", "web", "http", 80, resolvertest.ReadyEP("10.0.0.1")))
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("Changed did not fire on an update")
	}
	ch = e.Changed(svc)
	e.Delete("ns", "web-1")
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("Changed did not fire on a delete")
	}
	// A slice relabelled to another Service leaves this one.
	e.Update(resolvertest.Slice("ns", "moving", "web", "http", 80, resolvertest.ReadyEP("10.0.0.5")))
	e.Update(resolvertest.Slice("ns", "moving", "api", "http", 80, resolvertest.ReadyEP("10.0.0.5")))
	if got := e.Ready(svc, "http"); len(got) != 0 {
		t.Errorf("relabelled slice still counts for its old Service: %v", got)
	}
}

// TestEndpointsFeedGate: a Service fed by an informer has no ready endpoint
// before the informer's first full list is in, the end of that list wakes
// waiters, a stopped or replaced feed changes nothing, and stopping forgets
// the Service's slices.
func TestEndpointsFeedGate(t *testing.T) {
	svc := types.NamespacedName{Namespace: "ns", Name: "web"}
	fired := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	e := New()
	f := e.StartFeed(svc)
	if !e.Feeding(svc) {
		t.Fatal("no feed after startFeed")
	}
	f.Update(resolvertest.Slice("ns", "web-1", "web", "http", 80, resolvertest.ReadyEP("10.0.0.1")))
	if got := e.Ready(svc, "http"); len(got) != 0 {
		t.Fatalf("Ready before the feed synced = %v, want none", got)
	}
	if e.AnyReady(svc) || len(e.Candidates(svc, "http", "")) != 0 {
		t.Fatal("AnyReady or Candidates see endpoints before the feed synced")
	}
	if _, ok := e.Next(svc, "http"); ok {
		t.Fatal("Next found an endpoint before the feed synced")
	}
	changed := e.Changed(svc)
	f.Synced()
	if !fired(changed) {
		t.Fatal("the end of the first list did not wake waiters")
	}
	if diff := cmp.Diff([]string{"10.0.0.1:80"}, e.Ready(svc, "http")); diff != "" {
		t.Errorf("Ready after sync (-want +got):\n%s", diff)
	}

	// A slice of another Service is not this feed's to record.
	f.Update(resolvertest.Slice("ns", "api-1", "api", "http", 80, resolvertest.ReadyEP("10.0.0.9")))
	if got := e.Ready(types.NamespacedName{Namespace: "ns", Name: "api"}, "http"); len(got) != 0 {
		t.Errorf("web's feed recorded api's slice: %v", got)
	}

	// A newer feed replaces this one: the old one's events are ignored.
	g := e.StartFeed(svc)
	f.Update(resolvertest.Slice("ns", "web-2", "web", "http", 80, resolvertest.ReadyEP("10.0.0.2")))
	f.Delete("ns", "web-1")
	f.Synced()
	if got := e.Ready(svc, "http"); len(got) != 0 {
		t.Errorf("Ready with a new unsynced feed = %v, want none", got)
	}
	g.Synced()
	if diff := cmp.Diff([]string{"10.0.0.1:80"}, e.Ready(svc, "http")); diff != "" {
		t.Errorf("Ready after the stale feed's events (-want +got):\n%s", diff)
	}

	// Stopping forgets the slices and wakes waiters; late events change
	// nothing.
	changed = e.Changed(svc)
	f.Stop() // not current: no effect
	if e.Ready(svc, "http") == nil {
		t.Fatal("stopping a replaced feed forgot the current one's slices")
	}
	g.Stop()
	if !fired(changed) {
		t.Error("stopping the feed did not wake waiters")
	}
	g.Update(resolvertest.Slice("ns", "web-3", "web", "http", 80, resolvertest.ReadyEP("10.0.0.3")))
	if got := e.Ready(svc, "http"); len(got) != 0 || e.Feeding(svc) {
		t.Errorf("after stop: Ready %v, feeding %v; want nothing", got, e.Feeding(svc))
	}
	if len(e.services) != 0 || len(e.sliceOwner) != 0 {
		t.Errorf("state left after stop: %d services, %d slices", len(e.services), len(e.sliceOwner))
	}
}
