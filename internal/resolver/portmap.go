package resolver

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

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
type PortMap struct {
	mu      sync.RWMutex
	claims  map[int32][]Target
	byOwner map[types.NamespacedName][]int32
	// changed is closed and replaced on every update so that connections
	// waiting for a mapping wake without polling.
	changed chan struct{}
}

// NewPortMap returns an empty PortMap.
func NewPortMap() *PortMap {
	return &PortMap{
		claims:  map[int32][]Target{},
		byOwner: map[types.NamespacedName][]int32{},
		changed: make(chan struct{}),
	}
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
	for _, port := range m.byOwner[key] {
		kept := m.claims[port][:0]
		for _, t := range m.claims[port] {
			if t.ElastiService != key {
				kept = append(kept, t)
			}
		}
		if len(kept) == 0 {
			delete(m.claims, port)
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

// get returns the port's Target if exactly one ElastiService claims it, and
// the channel closed at the next update.
func (m *PortMap) get(port int32) (Target, bool, <-chan struct{}) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	c := m.claims[port]
	if len(c) == 1 {
		return c[0], true, m.changed
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
