package resolver

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// FallbackRoute is spec.proxy.fallback as the resolver uses it: where a
// held request goes when its target does not come up in time.
type FallbackRoute struct {
	// Service is the fallback Service. Its own ready endpoints are dialed,
	// on the port with the name of the Service port the request came in on.
	Service types.NamespacedName
	// After is how long a request is held before it goes to Service.
	After time.Duration
}

// fallbackOf reads spec.proxy.fallback; nil when there is none or it cannot
// be used (admission refuses both: an unparsable after, or the Service
// itself as its own fallback).
func fallbackOf(es *elastiv1alpha1.ElastiService) *FallbackRoute {
	p := es.Spec.Proxy
	if p == nil || p.Fallback == nil || p.Fallback.Service == "" || p.Fallback.Service == es.Spec.Service {
		return nil
	}
	after, err := time.ParseDuration(p.Fallback.After)
	if err != nil || after <= 0 {
		return nil
	}
	return &FallbackRoute{Service: types.NamespacedName{Namespace: es.Namespace, Name: p.Fallback.Service}, After: after}
}

// operatorSaysFallback reads the operator's FallbackActive condition: True
// when the wake failed (scale write refused, pods not created, pods
// unschedulable) or has taken longer than fallback.after, until the target
// is ready.
func operatorSaysFallback(es *elastiv1alpha1.ElastiService) bool {
	return fallbackOf(es) != nil && meta.IsStatusConditionTrue(es.Status.Conditions, elastiv1alpha1.ConditionFallbackActive)
}

// fallbackEpochs remembers, per ElastiService, that a request of this
// replica went to the fallback after its deadline: new requests then go
// there at once, without being held again, until the target has been ready.
// Each entry records the target Service's ready epoch (Endpoints.ReadyEpoch)
// at that moment, so it lapses by itself the first time the target has a
// ready endpoint, even if no request sees that moment.
type fallbackEpochs struct {
	mu sync.Mutex
	m  map[types.NamespacedName]uint64
}

func (f *fallbackEpochs) set(key types.NamespacedName, epoch uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[types.NamespacedName]uint64{}
	}
	f.m[key] = epoch
}

// active reports whether key is in fallback as of the target's current
// ready epoch, and forgets an entry that has lapsed.
func (f *fallbackEpochs) active(key types.NamespacedName, epoch uint64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.m[key]
	if ok && e != epoch {
		delete(f.m, key)
		return false
	}
	return ok
}

// inFallback reports whether t's traffic goes to its fallback without
// waiting: the operator says so, or a request of this replica went there
// since the target was last ready.
func (r *Resolver) inFallback(t Target) bool {
	if t.Fallback == nil {
		return false
	}
	if said, _ := r.ports.fallbackSaid(t.ElastiService); said {
		return true
	}
	return r.fallbacks.active(t.ElastiService, r.endpoints.ReadyEpoch(t.Service))
}

// toFallback returns the Target that sends t's request to its fallback
// Service, if that Service has a ready endpoint for t's port name; the
// request is counted under reason. A fallback without one is not used: the
// request stays held rather than being sent nowhere.
func (r *Resolver) toFallback(t Target, reason string) (Target, bool) {
	if !r.fallbackReady(t) {
		return t, false
	}
	dest := t
	dest.Service = t.Fallback.Service
	r.metrics.Fallback.WithLabelValues(t.ElastiService.Namespace, t.ElastiService.Name, reason).Inc()
	return dest, true
}

// fallbackReady says whether t has a fallback Service with a ready endpoint
// for t's port name: the only fallback a request is ever sent to.
func (r *Resolver) fallbackReady(t Target) bool {
	return t.Fallback != nil && len(r.endpoints.Ready(t.Fallback.Service, t.PortName)) > 0
}
