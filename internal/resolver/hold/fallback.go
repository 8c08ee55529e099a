package hold

import (
	"k8s.io/apimachinery/pkg/types"

	"elasti.dev/elasti/internal/keyed"
	"elasti.dev/elasti/internal/resolver/route"
)

// fallback decides when a held request goes to spec.proxy.fallback's
// Service instead of waiting on for its target.
type fallback struct {
	endpoints Endpoints
	operator  Operator
	rec       Recorder
	// epochs remembers, per ElastiService, that a request of this replica
	// went to the fallback after its deadline: new requests then go there
	// at once, without being held again, until the target has been ready.
	// Each entry records the target Service's ready epoch
	// (Endpoints.ReadyEpoch) at that moment, so it lapses by itself the
	// first time the target has a ready endpoint, even if no request sees
	// that moment.
	epochs keyed.Map[types.NamespacedName, uint64]
}

// active reports whether t's traffic goes to its fallback without waiting:
// the operator says so, or a request of this replica went there since the
// target was last ready.
func (f *fallback) active(t route.Target) bool {
	if t.Fallback == nil {
		return false
	}
	if said, _ := f.operator.FallbackSaid(t.ElastiService); said {
		return true
	}
	return epochActive(&f.epochs, t.ElastiService, f.endpoints.ReadyEpoch(t.Service))
}

// to returns the Target that sends t's request to its fallback Service, if
// that Service has a ready endpoint for t's port name; the request is
// counted, as sent there by its own deadline or not. A fallback without one
// is not used: the request stays held rather than being sent nowhere.
func (f *fallback) to(t route.Target, deadline bool) (route.Target, bool) {
	if !f.ready(t) {
		return t, false
	}
	dest := t
	dest.Service = t.Fallback.Service
	f.rec.Fallback(t.ElastiService, deadline)
	return dest, true
}

// ready says whether t has a fallback Service with a ready endpoint for t's
// port name: the only fallback a request is ever sent to.
func (f *fallback) ready(t route.Target) bool {
	return t.Fallback != nil && len(f.endpoints.Ready(t.Fallback.Service, t.PortName)) > 0
}

// epochActive reports whether the fallback entry at key (see
// fallback.epochs) holds as of the target's current ready epoch, and forgets
// one that has lapsed.
func epochActive(epochs *keyed.Map[types.NamespacedName, uint64], key types.NamespacedName, epoch uint64) bool {
	_, kept := epochs.Update(key, func(e uint64, ok bool) (uint64, bool) { return e, ok && e == epoch })
	return kept
}
