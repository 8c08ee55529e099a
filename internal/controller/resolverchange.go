package controller

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/controller/proxyslices"
	"elasti.dev/elasti/internal/controller/watches"
)

// sliceRefreshWorkers is how many proxy slice writes a refresh has in
// flight; --slice-update-qps is what bounds them.
const sliceRefreshWorkers = 16

// sliceRefresher carries a change of the resolver pods to every proxy slice
// in one pass (proxyslices.Refresh), instead of a reconcile of every
// sleeping ElastiService, each behind the others in the work queue
// (docs/architecture.md, "When the resolvers change"). Only a change to or
// from no ready resolver of an address family reconciles them: that changes
// the plan (fail open, proxy again, a slice of that family), not only the
// addresses.
type sliceRefresher struct {
	// cache reads the resolver pods and the proxy slices.
	cache client.Reader
	// writer updates the slices, on a rate limit of its own
	// (--slice-update-qps), so that thousands of them do not hold up the
	// reconciles' requests.
	writer    proxyslices.Updater
	namespace string
	mappers   watches.Mappers
	// retry is how long a refresh with failed writes waits before the next.
	retry time.Duration

	poke   chan struct{}
	events chan event.GenericEvent

	mu       sync.Mutex
	seen     bool
	families [2]int // ready resolvers with an IPv4, with an IPv6 address
}

func newSliceRefresher(cache client.Reader, writer proxyslices.Updater, namespace string, m watches.Mappers) *sliceRefresher {
	return &sliceRefresher{
		cache: cache, writer: writer, namespace: namespace, mappers: m, retry: time.Second,
		poke: make(chan struct{}, 1), events: make(chan event.GenericEvent, 1024),
	}
}

// Map is the resolver pods' map function: it asks for a refresh, and maps
// to every proxy-mode ElastiService only when an address family has no
// ready resolver now and had one before, or the other way round (or none
// was seen yet): the plan changes then (fail open, proxy again, a slice of
// that family to create or remove), not only the addresses.
func (f *sliceRefresher) Map(ctx context.Context, obj client.Object) []reconcile.Request {
	resolvers, err := proxyslices.ListResolvers(ctx, f.cache, f.namespace)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "resolver pods changed: reconciling every proxy-mode ElastiService instead of a refresh")
		return f.mappers.ForResolverPod(ctx, obj)
	}
	var now [2]int
	for _, r := range resolvers {
		if r.IPv4 != "" {
			now[0]++
		}
		if r.IPv6 != "" {
			now[1]++
		}
	}
	f.mu.Lock()
	before, seen := f.families, f.seen
	f.families, f.seen = now, true
	f.mu.Unlock()
	if !seen || (now[0] == 0) != (before[0] == 0) || (now[1] == 0) != (before[1] == 0) || len(resolvers) == 0 {
		return f.mappers.ForResolverPod(ctx, obj)
	}
	f.ask()
	return nil
}

func (f *sliceRefresher) ask() {
	select {
	case f.poke <- struct{}{}:
	default: // one is asked for already; it reads the pods when it runs
	}
}

// Events carries the ElastiServices a refresh could not update, for a
// reconcile.
func (f *sliceRefresher) Events() <-chan event.GenericEvent { return f.events }

// NeedLeaderElection: only the leader writes slices.
func (f *sliceRefresher) NeedLeaderElection() bool { return true }

// refresh runs one Refresh, cancelled if another is asked for meanwhile
// (superseded; the ask is taken).
func (f *sliceRefresher) refresh(ctx context.Context, resolvers []proxyslices.Resolver) (res proxyslices.Refreshed, superseded bool, err error) {
	passCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, err = proxyslices.Refresh(passCtx, f.cache, f.writer, resolvers, sliceRefreshWorkers)
	}()
	select {
	case <-done:
		return res, false, err
	case <-f.poke:
		cancel()
		<-done
		return res, ctx.Err() == nil, err
	}
}

// Start refreshes once per request until ctx ends.
func (f *sliceRefresher) Start(ctx context.Context) error {
	log := ctrl.Log.WithName("proxy-slices")
	// followsSuperseded: the pass before this one was cut short, and its
	// writes in flight may land after this pass has listed the slices.
	followsSuperseded := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-f.poke:
		}
		start := time.Now()
		resolvers, err := proxyslices.ListResolvers(ctx, f.cache, f.namespace)
		if err != nil || len(resolvers) == 0 {
			// No resolver: every proxy-mode ElastiService was mapped to
			// its reconcile, which fails open.
			continue
		}
		res, superseded, err := f.refresh(ctx, resolvers)
		if superseded {
			// The resolvers changed again mid-pass: the next pass, at
			// once, writes the newest set instead of finishing the old one
			// (a resolver draining in a rollout waits for the slices to
			// drop it, not for a pass that adds its successor).
			log.Info("proxy EndpointSlice refresh superseded by a newer change of the resolvers", "updated", res.Updated)
			sliceRefreshWrites.WithLabelValues("updated").Add(float64(res.Updated))
			sliceRefreshWrites.WithLabelValues("failed").Add(float64(res.Failed))
			f.ask()
			followsSuperseded = true
			continue
		}
		recheck := followsSuperseded || res.Updated > 0
		followsSuperseded = false
		sliceRefreshWrites.WithLabelValues("updated").Add(float64(res.Updated))
		sliceRefreshWrites.WithLabelValues("failed").Add(float64(res.Failed))
		sliceRefreshDuration.Observe(time.Since(start).Seconds())
		if err != nil {
			log.Error(err, "refresh the proxy EndpointSlices")
		}
		log.Info("proxy EndpointSlices point at the ready resolvers", "resolvers", len(resolvers),
			"updated", res.Updated, "current", res.Current, "failed", res.Failed, "reconcile", len(res.Reconcile),
			"took", time.Since(start).Round(time.Millisecond).String())
		for _, key := range res.Reconcile {
			es := &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
			select {
			case f.events <- event.GenericEvent{Object: es}:
			case <-ctx.Done():
				return nil
			}
		}
		if res.Failed > 0 || recheck {
			// A write met a newer slice (a reconcile wrote it, or the
			// cache was behind): try again once the cache has caught up.
			// So too after a pass that wrote, or that followed a pass cut
			// short: a write of that pass still in flight when this one
			// listed, or one this pass's list did not see yet, may have
			// left a slice stale, and nothing else would look at it again
			// (a proxy slice's own change reconciles nothing). The check
			// that finds every slice current writes nothing, and ends it.
			select {
			case <-time.After(f.retry):
				f.ask()
			case <-ctx.Done():
				return nil
			}
		}
	}
}
