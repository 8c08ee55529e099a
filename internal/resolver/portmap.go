package resolver

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
)

// PortMap maps local resolver ports to their Targets, from each
// ElastiService's status.proxyPorts. It is fed by the ElastiService informer
// (or directly by tests) and read on every accepted connection.
//
// A port claimed by two ElastiServices at once (a transient that informer
// ordering can show while the operator moves a port) is treated as unmapped
// until only one claim remains: sending traffic to the wrong Service would be
// worse than a short wait.
//
// A port whose last claim goes (its ElastiService deleted, or the port
// dropped from its status) keeps its Target for a linger period: kube-proxy
// and ingresses send new connections to the resolvers for a moment after the
// proxy slice is gone, and those connections are served as before instead of
// getting a 404. The operator keeps a freed port out of use for longer than
// that (its port quarantine), so a lingering Target is never another
// Service's port.
type PortMap struct {
	mu      sync.RWMutex
	claims  map[int32][]Target
	byOwner map[types.NamespacedName][]int32
	// released holds the Targets of ports whose last claim went, until
	// their linger ends.
	released map[int32]releasedTarget
	linger   time.Duration
	clock    clock.PassiveClock
	// changed is closed and replaced on every update so that connections
	// waiting for a mapping wake without polling.
	changed chan struct{}
}

// NewPortMap returns an empty PortMap.
func NewPortMap() *PortMap {
	return &PortMap{
		claims:   map[int32][]Target{},
		byOwner:  map[types.NamespacedName][]int32{},
		released: map[int32]releasedTarget{},
		clock:    clock.RealClock{},
		changed:  make(chan struct{}),
	}
}

type releasedTarget struct {
	Target
	until time.Time
}

// SetLinger sets how long a port keeps serving its Target after its last
// claim went (zero: not at all), on clk.
func (m *PortMap) SetLinger(d time.Duration, clk clock.PassiveClock) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.linger, m.clock = d, clk
}

// TargetsOf derives the Targets an ElastiService claims, keyed by resolver
// port: the allocated ones of the ports the resolver carries
// (contract.ResolverCarries).
func TargetsOf(es *elastiv1alpha1.ElastiService) map[int32]Target {
	key := types.NamespacedName{Namespace: es.Namespace, Name: es.Name}
	var hold time.Duration
	var maxHeld int
	if p := es.Spec.Proxy; p != nil {
		if d, err := time.ParseDuration(p.HoldTimeout); err == nil && d > 0 {
			hold = d
		}
		maxHeld = int(p.MaxHeldRequests)
	}
	out := map[int32]Target{}
	for _, pp := range es.Status.ProxyPorts {
		if pp.ResolverPort <= 0 || !contract.ResolverCarries(corev1.Protocol(pp.Protocol)) {
			continue
		}
		out[pp.ResolverPort] = Target{
			ElastiService: key,
			Service:       types.NamespacedName{Namespace: es.Namespace, Name: es.Spec.Service},
			PortName:      pp.Name,
			Port:          pp.Port,
			AppProtocol:   pp.AppProtocol,
			HoldTimeout:   hold,
			MaxHeld:       maxHeld,
		}
	}
	return out
}

// Set records the ports an ElastiService claims, replacing its earlier claims.
func (m *PortMap) Set(es *elastiv1alpha1.ElastiService) {
	key := types.NamespacedName{Namespace: es.Namespace, Name: es.Name}
	targets := TargetsOf(es)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.removeLocked(key)
	ports := make([]int32, 0, len(targets))
	for port, t := range targets {
		m.claims[port] = append(m.claims[port], t)
		delete(m.released, port)
		ports = append(ports, port)
	}
	if len(ports) > 0 {
		m.byOwner[key] = ports
	}
	m.notifyLocked()
}

// Delete forgets an ElastiService's claims.
func (m *PortMap) Delete(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.removeLocked(key)
	m.notifyLocked()
}

func (m *PortMap) removeLocked(key types.NamespacedName) {
	now := m.clock.Now()
	for port, r := range m.released {
		if !now.Before(r.until) {
			delete(m.released, port)
		}
	}
	for _, port := range m.byOwner[key] {
		kept := m.claims[port][:0]
		var gone Target
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
				m.released[port] = releasedTarget{Target: gone, until: now.Add(m.linger)}
			}
		} else {
			m.claims[port] = kept
		}
	}
	delete(m.byOwner, key)
}

func (m *PortMap) notifyLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// get returns the port's Target if exactly one ElastiService claims it (or
// none does and it lingers from the last claim), and the channel closed at
// the next update.
func (m *PortMap) get(port int32) (Target, bool, <-chan struct{}) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	c := m.claims[port]
	if len(c) == 1 {
		return c[0], true, m.changed
	}
	if r, ok := m.released[port]; ok && len(c) == 0 && m.clock.Now().Before(r.until) {
		return r.Target, true, m.changed
	}
	return Target{}, false, m.changed
}

// Lookup returns the port's Target, waiting up to wait for a mapping that has
// not arrived yet; with wait zero it answers at once. It wakes on PortMap
// updates, never by polling.
func (m *PortMap) Lookup(ctx context.Context, port int32, wait time.Duration, after func(time.Duration) <-chan time.Time) (Target, bool) {
	t, ok, changed := m.get(port)
	if ok || wait <= 0 {
		return t, ok
	}
	expired := after(wait)
	for {
		select {
		case <-changed:
		case <-expired:
			return Target{}, false
		case <-ctx.Done():
			return Target{}, false
		}
		if t, ok, changed = m.get(port); ok {
			return t, true
		}
	}
}
