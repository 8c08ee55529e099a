package hold

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"elasti.dev/elasti/internal/resolver/route"
)

// trafficReporter tells the operator about traffic that the resolver
// forwards at once, because its target already has a ready endpoint. Traffic
// only reaches a resolver while the proxy slice is in place: in the grace
// period of a scale-down, or while data planes converge after a wake. The
// waker never calls for it, since nothing is held, so without this report
// the operator would scale to zero a target that is serving traffic through
// the resolvers. The report is an ordinary activation call: in the grace
// period it calls the scale-down off, and for a target that is up it costs
// the operator a reconcile that changes nothing but lastScaledUpTime.
//
// The request path pays one lock-free map lookup. An ElastiService stays in
// recent from the start of its report until the call has returned and the
// interval has passed, so at most one call per ElastiService is in flight
// and calls start at most once per interval. The call runs on a goroutine
// of its own: no request ever waits for it.
type trafficReporter struct {
	activator   Activator
	clock       clock.Clock
	log         logr.Logger
	rec         Recorder
	interval    time.Duration
	callTimeout time.Duration

	// recent holds the ElastiServices (types.NamespacedName) whose report
	// is in flight or within its interval. A sync.Map, because the lookup
	// runs on every forwarded request of every core, and a key is written
	// once per interval at most.
	recent sync.Map
}

// seen records that t's traffic is being forwarded to a ready endpoint, and
// starts a report unless one was started within the interval. It never
// blocks; ctx ends the report (the resolver's stop).
func (tr *trafficReporter) seen(ctx context.Context, t route.Target) {
	if tr.activator == nil {
		return
	}
	key := t.ElastiService
	if _, recent := tr.recent.Load(key); recent {
		return
	}
	if _, recent := tr.recent.LoadOrStore(key, struct{}{}); recent {
		return
	}
	go tr.report(ctx, key)
}

// report makes one activation call for key, then keeps key in recent until
// the interval since the call started has passed.
func (tr *trafficReporter) report(ctx context.Context, key types.NamespacedName) {
	defer tr.recent.Delete(key)
	if ctx.Err() != nil {
		return
	}
	interval := tr.clock.NewTimer(tr.interval)
	defer interval.Stop()
	callCtx, cancel := context.WithTimeout(ctx, tr.callTimeout)
	_, err := tr.activator.Activate(callCtx, key.Namespace, key.Name)
	cancel()
	result := tr.rec.Activation(key, err)
	if err != nil {
		// Not retried: the next forwarded request after the interval
		// reports again.
		tr.log.Error(err, "traffic report failed", "elastiservice", key.String(), "result", result)
	} else {
		tr.log.V(1).Info("traffic reported", "elastiservice", key.String())
	}
	select {
	case <-interval.C():
	case <-ctx.Done():
	}
}
