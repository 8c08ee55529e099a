package ports

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/resolver/endpoints"
	"elasti.dev/elasti/internal/resolver/resolvertest"
)

// fakeSource stands in for the one EndpointSlice watch: a store the test
// writes through events, delivered to the sliceWatches' handler in order,
// and a first full list the test completes.
type fakeSource struct {
	mu      sync.Mutex
	store   map[types.NamespacedName]*discoveryv1.EndpointSlice
	synced  chan struct{}
	handler toolscache.ResourceEventHandler
}

func newFakeSource() *fakeSource {
	return &fakeSource{store: map[types.NamespacedName]*discoveryv1.EndpointSlice{}, synced: make(chan struct{})}
}

func (f *fakeSource) Slices(svc types.NamespacedName) []*discoveryv1.EndpointSlice {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*discoveryv1.EndpointSlice
	for _, s := range f.store {
		if serviceKey(s) == svc {
			out = append(out, s)
		}
	}
	return out
}

func (f *fakeSource) Synced() toolscache.DoneChecker { return doneChecker(f.synced) }

type doneChecker chan struct{}

func (d doneChecker) Name() string          { return "fake" }
func (d doneChecker) Done() <-chan struct{} { return d }

// put stores s and delivers its event, as an informer does: the store
// first, then the handler.
func (f *fakeSource) put(s *discoveryv1.EndpointSlice) {
	key := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	f.mu.Lock()
	old, had := f.store[key]
	f.store[key] = s
	f.mu.Unlock()
	if had {
		f.handler.OnUpdate(old, s)
	} else {
		f.handler.OnAdd(s, false)
	}
}

func (f *fakeSource) del(s *discoveryv1.EndpointSlice) {
	f.mu.Lock()
	delete(f.store, types.NamespacedName{Namespace: s.Namespace, Name: s.Name})
	f.mu.Unlock()
	f.handler.OnDelete(toolscache.DeletedFinalStateUnknown{Key: s.Namespace + "/" + s.Name, Obj: s})
}

// TestSliceWatchesFollowMappedServices: a Service's slices are followed
// from the moment its ElastiService is in proxy mode until its last port has
// stopped lingering, and never for a Service in serve mode; all of them
// through one watch, whose store fills a feed that starts late, and whose
// first full list must be in before any Service has a ready endpoint.
func TestSliceWatchesFollowMappedServices(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	ports, eps := NewPortMap(), endpoints.New()
	ports.SetLinger(30*time.Second, clk)
	src := newFakeSource()
	w := newSliceWatches(ports, eps, src)
	src.handler = w.handler()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		w.run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	svcA := types.NamespacedName{Namespace: "ns", Name: "svc-a"}
	svcB := types.NamespacedName{Namespace: "ns", Name: "svc-b"}
	svcC := types.NamespacedName{Namespace: "ns", Name: "svc-c"}
	all := []types.NamespacedName{svcA, svcB, svcC}
	pp := func(port int32) elastiv1alpha1.ProxyPort {
		return elastiv1alpha1.ProxyPort{Name: "http", Port: 80, ResolverPort: port}
	}
	for i, svc := range all {
		src.put(resolvertest.Slice("ns", svc.Name+"-own", svc.Name, "http", 8080, resolvertest.ReadyEP(fmt.Sprintf("10.0.0.%d", i+1))))
	}
	// waitFor waits until exactly want is followed, by sliceWatches and the
	// Endpoints feeds alike, and until exactly ready have a ready endpoint.
	waitFor := func(what string, want []types.NamespacedName, ready ...types.NamespacedName) {
		t.Helper()
		set := func(svcs []types.NamespacedName) map[types.NamespacedName]bool {
			out := map[types.NamespacedName]bool{}
			for _, svc := range svcs {
				out[svc] = true
			}
			return out
		}
		wantSet, readySet := set(want), set(ready)
		deadline := time.Now().Add(waitTimeout)
		for {
			got := w.watching()
			feeds, gotReady := map[types.NamespacedName]bool{}, map[types.NamespacedName]bool{}
			for _, svc := range all {
				if eps.Feeding(svc) {
					feeds[svc] = true
				}
				if eps.AnyReady(svc) {
					gotReady[svc] = true
				}
			}
			if cmp.Equal(wantSet, got) && cmp.Equal(wantSet, feeds) && cmp.Equal(readySet, gotReady) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: followed %v, feeds %v, ready %v; want %v and ready %v", what, got, feeds, gotReady, wantSet, readySet)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	// A in serve mode is not followed; B is, but nothing is ready until
	// the watch's first list is complete.
	ports.Set(resolvertest.InMode(resolvertest.ElastiService("ns", "a", "svc-a", nil, pp(1)), elastiv1alpha1.ModeServe))
	ports.Set(resolvertest.ElastiService("ns", "b", "svc-b", nil, pp(2)))
	waitFor("only the proxy-mode Service", []types.NamespacedName{svcB})
	close(src.synced)
	waitFor("the first list is in", []types.NamespacedName{svcB}, svcB)

	// A's feed, started now, is filled from the store.
	ports.Set(resolvertest.ElastiService("ns", "a", "svc-a", nil, pp(1)))
	waitFor("A in proxy mode", []types.NamespacedName{svcA, svcB}, svcA, svcB)

	// Events reach the feeds of followed Services: B's pod goes, and a
	// slice of A's moves to C, which nobody follows yet.
	src.put(resolvertest.Slice("ns", "svc-b-own", "svc-b", "http", 8080))
	src.put(resolvertest.Slice("ns", "svc-a-own", "svc-c", "http", 8080, resolvertest.ReadyEP("10.0.0.1")))
	waitFor("B without a pod, A's slice gone to C", []types.NamespacedName{svcA, svcB})
	src.put(resolvertest.Slice("ns", "svc-a-own", "svc-a", "http", 8080, resolvertest.ReadyEP("10.0.0.1")))
	waitFor("A's slice back", []types.NamespacedName{svcA, svcB}, svcA)

	// Back to serve mode, and B deleted: both linger, so both stay
	// followed. C starts with its slice from the store.
	ports.Set(resolvertest.InMode(resolvertest.ElastiService("ns", "a", "svc-a", nil, pp(1)), elastiv1alpha1.ModeServe))
	ports.Delete(types.NamespacedName{Namespace: "ns", Name: "b"})
	ports.Set(resolvertest.ElastiService("ns", "c", "svc-c", nil, pp(3)))
	waitFor("lingering Services are still followed", all, svcA, svcC)

	// The lingers end: their feeds go, and their events change nothing.
	clk.Step(30 * time.Second)
	waitFor("after the linger", []types.NamespacedName{svcC}, svcC)
	src.put(resolvertest.Slice("ns", "svc-b-own", "svc-b", "http", 8080, resolvertest.ReadyEP("10.0.0.2")))
	src.del(resolvertest.Slice("ns", "svc-c-own", "svc-c", "http", 8080))
	waitFor("C's slice deleted, B's event ignored", []types.NamespacedName{svcC})

	// B back in proxy mode gets a fresh feed, filled with its slice's
	// latest state.
	ports.Set(resolvertest.ElastiService("ns", "b", "svc-b", nil, pp(2)))
	waitFor("B in proxy mode again", []types.NamespacedName{svcB, svcC}, svcB)

	cancel()
	<-done
	waitFor("after the context ended", nil)
}

// TestSummarizeSlice: the watch's store keeps of a slice only what the
// Endpoints tracker reads, and the tracker reads the same endpoints from
// the summary as from the whole slice.
func TestSummarizeSlice(t *testing.T) {
	full := resolvertest.Slice("ns", "web-1", "web", "http", 8080,
		resolvertest.ReadyEP("10.0.0.1"), resolvertest.Endpoint{IP: "10.0.0.2", Ready: ptr.To(false)})
	full.Endpoints[0].Addresses = append(full.Endpoints[0].Addresses, "10.0.0.9")
	full.Endpoints[0].NodeName = ptr.To("node-1")
	full.Endpoints[0].Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "a"}}}
	full.Annotations = map[string]string{"big": strings.Repeat("x", 4096)}
	full.Labels["app"] = "web"
	full.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}
	full.ResourceVersion = "42"
	got, err := summarizeSlice(full)
	if err != nil {
		t.Fatal(err)
	}
	s := got.(*discoveryv1.EndpointSlice)
	want := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", ResourceVersion: "42", Labels: map[string]string{
			discoveryv1.LabelServiceName: "web", contract.LabelManagedBy: "endpointslice-controller.k8s.io"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       full.Ports,
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.0.0.1"}, Conditions: full.Endpoints[0].Conditions, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "pod-10.0.0.1"}},
			{Addresses: []string{"10.0.0.2"}, Conditions: full.Endpoints[1].Conditions, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "pod-10.0.0.2"}},
		},
	}
	if d := cmp.Diff(want, s); d != "" {
		t.Errorf("summary (-want +got):\n%s", d)
	}
	svc := types.NamespacedName{Namespace: "ns", Name: "web"}
	fromFull, fromSummary := endpoints.New(), endpoints.New()
	fromFull.Update(full)
	fromSummary.Update(s)
	if a, b := fromFull.Ready(svc, "http"), fromSummary.Ready(svc, "http"); !cmp.Equal(a, b) || len(a) != 1 {
		t.Errorf("ready from the whole slice %v, from the summary %v", a, b)
	}
}
