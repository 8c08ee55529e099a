package ports

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/resolver/route"
)

// PortMap maps local resolver ports to their Targets, from each
// ElastiService's status.proxyPorts. It is fed by the ElastiService informer
// (or directly by tests) and read on every accepted connection.
//
// An ElastiService claims its ports only while its status.mode is proxy. In
// serve mode nothing routes the Service's traffic to the resolvers, and a
// port mapped all the same would let any pod reach the backend through
// resolverIP:port, around whatever NetworkPolicies guard the backend. The
// operator writes status.mode=proxy and status.proxyPorts before it creates
// a proxy EndpointSlice, and a connection on a port not mapped yet waits
// briefly for its mapping (Lookup), so the order in which the informer and
// kube-proxy learn of the switch refuses nobody.
//
// A port claimed by two ElastiServices at once (a transient that informer
// ordering can show while the operator moves a port) is treated as unmapped
// until only one claim remains: sending traffic to the wrong Service would be
// worse than a short wait.
//
// A port whose last claim goes (its ElastiService back in serve mode or
// deleted, or the port dropped from its status) keeps its Target for a
// linger period: kube-proxy and ingresses send new connections to the
// resolvers for a moment after the proxy slice is gone, and those
// connections are served as before instead of getting a 404. When the linger
// ends the port is unmapped, and whoever waits on the PortMap is told. The
// operator keeps a freed port out of use for longer than that (its port
// quarantine), so a lingering Target is never another Service's port.
// Connections already accepted keep their Target whatever the mapping does
// later.
type PortMap struct {
	mu      sync.RWMutex
	claims  map[int32][]route.Target
	byOwner map[types.NamespacedName][]int32
	// released holds the Targets of ports whose last claim went, until
	// their linger ends.
	released map[int32]releasedTarget
	linger   time.Duration
	clock    clock.Clock
	// expiry waits for the earliest linger's end, so that the end of a
	// linger is an event like any other change.
	expiry expiryTimer
	// deleted holds the ElastiServices deleted while some of their ports
	// still linger; forget is called for each once none does.
	deleted map[types.NamespacedName]bool
	forget  func(types.NamespacedName)
	// fallbackOn holds the ElastiServices whose FallbackActive condition
	// is True: the operator says their wake failed or took too long.
	fallbackOn map[types.NamespacedName]bool
	// progress holds status.wakeProgress of the ElastiServices that have a
	// waking page. It changes at every phase of a wake, so it is read per
	// request here rather than built into their Targets.
	progress map[types.NamespacedName]elastiv1alpha1.WakeProgress
	// namespaces holds every namespace that has had an ElastiService while
	// this process ran (Known).
	namespaces map[string]struct{}
	// changed is closed and replaced on every update so that connections
	// waiting for a mapping, and the EndpointSlice watches, wake without
	// polling.
	changed chan struct{}
}

// NewPortMap returns an empty PortMap.
func NewPortMap() *PortMap {
	return &PortMap{
		claims:     map[int32][]route.Target{},
		byOwner:    map[types.NamespacedName][]int32{},
		released:   map[int32]releasedTarget{},
		deleted:    map[types.NamespacedName]bool{},
		fallbackOn: map[types.NamespacedName]bool{},
		progress:   map[types.NamespacedName]elastiv1alpha1.WakeProgress{},
		namespaces: map[string]struct{}{},
		clock:      clock.RealClock{},
		changed:    make(chan struct{}),
	}
}

type releasedTarget struct {
	route.Target
	until time.Time
	// contested: two ElastiServices' Targets lingered on the port at
	// once; it maps to neither until the linger ends.
	contested bool
}

// expiryTimer is the goroutine that waits for the earliest linger's end:
// at is when, and closing stop ends the wait.
type expiryTimer struct {
	at   time.Time
	stop chan struct{}
}

// cancel ends the wait, if any.
func (e *expiryTimer) cancel() {
	if e.stop != nil {
		close(e.stop)
	}
	*e = expiryTimer{}
}

// SetLinger sets how long a port keeps serving its Target after its last
// claim went (zero: not at all), on clk.
func (m *PortMap) SetLinger(d time.Duration, clk clock.Clock) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expiry.cancel()
	m.linger, m.clock = d, clk
	m.scheduleLocked()
}

// SetForget makes the PortMap call f with an ElastiService's key once the
// ElastiService is deleted and none of its ports lingers any more: from then
// on no new connection can be counted for it. f runs without the PortMap's
// lock held.
func (m *PortMap) SetForget(f func(types.NamespacedName)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forget = f
}

// Set records the ports an ElastiService claims, replacing its earlier
// claims; the ports it no longer claims start to linger.
func (m *PortMap) Set(es *elastiv1alpha1.ElastiService) {
	key := types.NamespacedName{Namespace: es.Namespace, Name: es.Name}
	targets := route.TargetsOf(es)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.removeLocked(key)
	m.namespaces[key.Namespace] = struct{}{}
	// Back under the same name: whatever it is, it is live again.
	delete(m.deleted, key)
	if route.OperatorSaysFallback(es) {
		m.fallbackOn[key] = true
	} else {
		delete(m.fallbackOn, key)
	}
	if p := es.Status.WakeProgress; p != nil && es.Spec.Proxy != nil && es.Spec.Proxy.WakingPage != nil {
		m.progress[key] = *p // only values: a copy shares nothing with the informer's object
	} else {
		delete(m.progress, key)
	}
	ports := make([]int32, 0, len(targets))
	for port, t := range targets {
		m.claims[port] = append(m.claims[port], t)
		// Its own lingering port comes back at once; another's linger
		// stays, and keeps the port unmapped until it ends (get).
		if r, ok := m.released[port]; ok && r.ElastiService == key && !r.contested {
			delete(m.released, port)
		}
		ports = append(ports, port)
	}
	if len(ports) > 0 {
		m.byOwner[key] = ports
	}
	m.scheduleLocked()
	m.notifyLocked()
}

// Delete forgets an ElastiService's claims; its ports linger.
func (m *PortMap) Delete(key types.NamespacedName) {
	m.mu.Lock()
	m.removeLocked(key)
	m.deleted[key] = true
	delete(m.fallbackOn, key)
	delete(m.progress, key)
	gone, forget := m.forgottenLocked()
	m.scheduleLocked()
	m.notifyLocked()
	m.mu.Unlock()
	for _, k := range gone {
		forget(k)
	}
}

// removeLocked drops key's claims; a port left without any claim lingers.
// Lingers that have ended are pruned on the way.
func (m *PortMap) removeLocked(key types.NamespacedName) {
	now := m.clock.Now()
	m.pruneLocked(now)
	for _, port := range m.byOwner[key] {
		kept := m.claims[port][:0]
		var gone route.Target
		for _, t := range m.claims[port] {
			if t.ElastiService != key {
				kept = append(kept, t)
			} else {
				gone = t
			}
		}
		if len(kept) == 0 {
			delete(m.claims, port)
			if m.linger > 0 {
				next := releasedTarget{Target: gone, until: now.Add(m.linger)}
				if r, ok := m.released[port]; ok && (r.contested || r.ElastiService != key) {
					// Another Service's clients may still come: the
					// port goes to neither.
					next.contested = true
				}
				m.released[port] = next
			}
		} else {
			m.claims[port] = kept
		}
	}
	delete(m.byOwner, key)
}

// pruneLocked unmaps the ports whose linger has ended by now.
func (m *PortMap) pruneLocked(now time.Time) {
	for port, r := range m.released {
		if !now.Before(r.until) {
			delete(m.released, port)
		}
	}
}

// forgottenLocked takes the deleted ElastiServices none of whose ports
// lingers any more out of m.deleted, and returns them with the function to
// call for each (a no-op when none is set).
func (m *PortMap) forgottenLocked() ([]types.NamespacedName, func(types.NamespacedName)) {
	var out []types.NamespacedName
	for key := range m.deleted {
		lingering := false
		for _, r := range m.released {
			if r.ElastiService == key {
				lingering = true
				break
			}
		}
		if !lingering {
			delete(m.deleted, key)
			out = append(out, key)
		}
	}
	forget := m.forget
	if forget == nil {
		forget = func(types.NamespacedName) {}
	}
	return out, forget
}

// scheduleLocked keeps the expiry timer set for the earliest linger's end,
// or stopped when nothing lingers.
func (m *PortMap) scheduleLocked() {
	var next time.Time
	for _, r := range m.released {
		if next.IsZero() || r.until.Before(next) {
			next = r.until
		}
	}
	if next.Equal(m.expiry.at) {
		return
	}
	m.expiry.cancel()
	if next.IsZero() {
		return
	}
	timer := m.clock.NewTimer(next.Sub(m.clock.Now()))
	stop := make(chan struct{})
	m.expiry = expiryTimer{at: next, stop: stop}
	go func() {
		select {
		case <-timer.C():
			m.expire(stop)
		case <-stop:
			timer.Stop()
		}
	}()
}

// expire unmaps the ports whose linger has ended, forgets the deleted
// ElastiServices that no longer linger, and tells the waiters. stop
// identifies the timer that fired.
func (m *PortMap) expire(stop chan struct{}) {
	m.mu.Lock()
	if m.expiry.stop == stop {
		m.expiry = expiryTimer{}
	}
	m.pruneLocked(m.clock.Now())
	gone, forget := m.forgottenLocked()
	m.scheduleLocked()
	m.notifyLocked()
	m.mu.Unlock()
	for _, k := range gone {
		forget(k)
	}
}

func (m *PortMap) notifyLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// get returns the port's Target if exactly one ElastiService claims it (or
// none does and it lingers from the last claim), and the channel closed at
// the next update.
func (m *PortMap) get(port int32) (route.Target, bool, <-chan struct{}) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	c := m.claims[port]
	// The expiry timer may lag a little; the clock has the last word.
	r, lingering := m.released[port]
	lingering = lingering && m.clock.Now().Before(r.until)
	switch {
	case lingering && (r.contested || len(c) > 0):
		// A claim inside another ElastiService's linger (Set keeps a
		// lingering port of the claimant's own for it): not until the
		// linger ends.
		return route.Target{}, false, m.changed
	case len(c) == 1:
		return c[0], true, m.changed
	case lingering && len(c) == 0:
		return r.Target, true, m.changed
	}
	return route.Target{}, false, m.changed
}

// Known reports whether namespace (in lower case, as every namespace is)
// has had an ElastiService while this
// resolver ran: a host name <name>.<namespace> then names a Service of the
// cluster rather than a public domain (handler.Hosts.Misdirected). A namespace
// stays known after its ElastiServices go, as its Services' clients may
// still call.
func (m *PortMap) Known(namespace string) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	_, ok := m.namespaces[namespace]
	return ok
}

// FallbackSaid reports whether the operator says key's traffic goes to its
// fallback Service now, and returns the channel closed at the next update.
func (m *PortMap) FallbackSaid(key types.NamespacedName) (bool, <-chan struct{}) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.fallbackOn[key], m.changed
}

// WakeProgress returns key's status.wakeProgress, if it has a waking page
// and the operator has set one.
func (m *PortMap) WakeProgress(key types.NamespacedName) (elastiv1alpha1.WakeProgress, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	p, ok := m.progress[key]
	return p, ok
}

// Services returns the Services that have a port claimed or lingering (the
// ones whose EndpointSlices the resolver must follow), with the fallback
// Services they name, and the channel closed at the next update.
func (m *PortMap) Services() (map[types.NamespacedName]struct{}, <-chan struct{}) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := map[types.NamespacedName]struct{}{}
	for _, ts := range m.claims {
		for _, t := range ts {
			out[t.Service] = struct{}{}
			if t.Fallback != nil {
				out[t.Fallback.Service] = struct{}{}
			}
		}
	}
	now := m.clock.Now()
	for _, r := range m.released {
		if now.Before(r.until) {
			out[r.Service] = struct{}{}
			if r.Fallback != nil {
				out[r.Fallback.Service] = struct{}{}
			}
		}
	}
	return out, m.changed
}

// Lookup returns the port's Target, waiting up to wait for a mapping that has
// not arrived yet; with wait zero it answers at once. It wakes on PortMap
// updates, never by polling.
func (m *PortMap) Lookup(ctx context.Context, port int32, wait time.Duration, after func(time.Duration) <-chan time.Time) (route.Target, bool) {
	t, ok, changed := m.get(port)
	if ok || wait <= 0 {
		return t, ok
	}
	expired := after(wait)
	for {
		select {
		case <-changed:
		case <-expired:
			return route.Target{}, false
		case <-ctx.Done():
			return route.Target{}, false
		}
		if t, ok, changed = m.get(port); ok {
			return t, true
		}
	}
}
