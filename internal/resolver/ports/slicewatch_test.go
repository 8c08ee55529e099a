package ports

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/resolver/endpoints"
	"elasti.dev/elasti/internal/resolver/resolvertest"
)

// fakeInformers stands in for the per-Service informers: it records which
// Services have one running, that is started and its context not yet ended.
type fakeInformers struct {
	mu      sync.Mutex
	live    map[types.NamespacedName]bool
	started map[types.NamespacedName]int
}

func (f *fakeInformers) start(ctx context.Context, svc types.NamespacedName, fd endpoints.Feed) {
	f.mu.Lock()
	f.live[svc] = true
	f.started[svc]++
	f.mu.Unlock()
	fd.Synced()
	go func() {
		<-ctx.Done()
		f.mu.Lock()
		defer f.mu.Unlock()
		f.live[svc] = false
	}()
}

func (f *fakeInformers) running() map[types.NamespacedName]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[types.NamespacedName]bool{}
	for svc, live := range f.live {
		if live {
			out[svc] = true
		}
	}
	return out
}

// TestSliceWatchesFollowMappedServices: a Service's slices are followed
// from the moment its ElastiService is in proxy mode until its last port has
// stopped lingering, and never for a Service in serve mode.
func TestSliceWatchesFollowMappedServices(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	ports, eps := NewPortMap(), endpoints.New()
	ports.SetLinger(30*time.Second, clk)
	inf := &fakeInformers{live: map[types.NamespacedName]bool{}, started: map[types.NamespacedName]int{}}
	w := newSliceWatches(ports, eps, inf.start)
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
	pp := func(port int32) elastiv1alpha1.ProxyPort {
		return elastiv1alpha1.ProxyPort{Name: "http", Port: 80, ResolverPort: port}
	}
	// waitFor waits until exactly want is followed, by sliceWatches, the
	// informers and the Endpoints feeds alike.
	waitFor := func(what string, want ...types.NamespacedName) {
		t.Helper()
		wantSet := map[types.NamespacedName]bool{}
		for _, svc := range want {
			wantSet[svc] = true
		}
		deadline := time.Now().Add(waitTimeout)
		for {
			got := w.watching()
			live := inf.running()
			feeds := map[types.NamespacedName]bool{}
			for _, svc := range []types.NamespacedName{svcA, svcB, svcC} {
				if eps.Feeding(svc) {
					feeds[svc] = true
				}
			}
			if cmp.Equal(wantSet, got) && cmp.Equal(wantSet, live) && cmp.Equal(wantSet, feeds) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: followed %v, informers %v, feeds %v; want %v", what, got, live, feeds, wantSet)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	// A in serve mode is not followed. B's informer starting shows that
	// the loop has seen A's (earlier) update too.
	ports.Set(resolvertest.InMode(resolvertest.ElastiService("ns", "a", "svc-a", nil, pp(1)), elastiv1alpha1.ModeServe))
	ports.Set(resolvertest.ElastiService("ns", "b", "svc-b", nil, pp(2)))
	waitFor("only the proxy-mode Service", svcB)

	ports.Set(resolvertest.ElastiService("ns", "a", "svc-a", nil, pp(1)))
	waitFor("A in proxy mode", svcA, svcB)

	// Back to serve mode, and B deleted: both linger, so both stay
	// followed. C's start shows the loop has seen the changes.
	ports.Set(resolvertest.InMode(resolvertest.ElastiService("ns", "a", "svc-a", nil, pp(1)), elastiv1alpha1.ModeServe))
	ports.Delete(types.NamespacedName{Namespace: "ns", Name: "b"})
	ports.Set(resolvertest.ElastiService("ns", "c", "svc-c", nil, pp(3)))
	waitFor("lingering Services are still followed", svcA, svcB, svcC)

	// The lingers end: their informers stop and the feeds go.
	clk.Step(30 * time.Second)
	waitFor("after the linger", svcC)

	// A back in proxy mode gets a fresh informer.
	ports.Set(resolvertest.ElastiService("ns", "a", "svc-a", nil, pp(1)))
	waitFor("A in proxy mode again", svcA, svcC)
	inf.mu.Lock()
	startsA := inf.started[svcA]
	inf.mu.Unlock()
	if startsA != 2 {
		t.Errorf("A's informer started %d times, want 2", startsA)
	}

	cancel()
	<-done
	waitFor("after the context ended")
}
