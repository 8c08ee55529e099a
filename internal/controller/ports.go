package controller

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
)

// ErrPortsExhausted means every resolver port in the range is taken.
var ErrPortsExhausted = errors.New("no free resolver port left in the range")

// indexResolverPorts indexes ElastiServices by the resolver ports in their
// status, so that "who holds port p" is one cache lookup.
const indexResolverPorts = "elasti.status.proxyPorts.resolverPort"

func resolverPortsIndex(obj client.Object) []string {
	es, ok := obj.(*elastiv1alpha1.ElastiService)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(es.Status.ProxyPorts))
	for _, p := range es.Status.ProxyPorts {
		out = append(out, strconv.Itoa(int(p.ResolverPort)))
	}
	return out
}

// proxiedPorts returns the Service ports the resolver carries, by
// contract.ResolverCarries.
func proxiedPorts(svc *corev1.Service) []corev1.ServicePort {
	var out []corev1.ServicePort
	for _, p := range svc.Spec.Ports {
		if contract.ResolverCarries(p.Protocol) {
			out = append(out, p)
		}
	}
	return out
}

// portAllocator hands out resolver ports. The durable record is every
// ElastiService's status.proxyPorts, read from the cache, so a new leader
// re-derives what is taken. The in-memory reservations cover allocations made
// by this process whose status write has not reached the cache yet.
// Allocation is serialized by mu; only the leader reconciles.
//
// An ElastiService the range has no room for waits for an event, not for a
// timer or the work queue's backoff: it is remembered in waiting, and every
// port that frees up (an ElastiService released, or one that needs fewer
// ports) sends each waiter to the controller through events.
type portAllocator struct {
	start, end int32
	// holders finds which ElastiServices have port p in their status.
	holders func(ctx context.Context, port int32) ([]elastiv1alpha1.ElastiService, error)

	mu       sync.Mutex
	reserved map[int32]types.NamespacedName
	byKey    map[types.NamespacedName][]elastiv1alpha1.ProxyPort
	waiting  map[types.NamespacedName]struct{}

	// events carries the waiters to reconcile again; the controller
	// watches it through source.Channel.
	events chan event.GenericEvent
}

func newPortAllocator(start, end int32, holders func(context.Context, int32) ([]elastiv1alpha1.ElastiService, error)) *portAllocator {
	return &portAllocator{
		start: start, end: end, holders: holders,
		reserved: map[int32]types.NamespacedName{},
		byKey:    map[types.NamespacedName][]elastiv1alpha1.ProxyPort{},
		waiting:  map[types.NamespacedName]struct{}{},
		events:   make(chan event.GenericEvent, 1024),
	}
}

// cacheHolders looks port holders up through the cache index.
func cacheHolders(c client.Reader) func(context.Context, int32) ([]elastiv1alpha1.ElastiService, error) {
	return func(ctx context.Context, port int32) ([]elastiv1alpha1.ElastiService, error) {
		list := &elastiv1alpha1.ElastiServiceList{}
		if err := c.List(ctx, list, client.MatchingFields{indexResolverPorts: strconv.Itoa(int(port))}); err != nil {
			return nil, fmt.Errorf("list ElastiServices holding resolver port %d: %w", port, err)
		}
		return list.Items, nil
	}
}

// Allocate returns es's proxy ports for the Service's TCP ports: existing
// allocations are kept (matched by port name) unless another ElastiService
// with precedence holds the same port; new ones take the lowest free port.
func (a *portAllocator) Allocate(ctx context.Context, es *elastiv1alpha1.ElastiService, svc *corev1.Service) ([]elastiv1alpha1.ProxyPort, error) {
	key := client.ObjectKeyFromObject(es)
	a.mu.Lock()
	defer a.mu.Unlock()

	previous := map[string]int32{}
	for _, p := range es.Status.ProxyPorts {
		previous[p.Name] = p.ResolverPort
	}
	// A reservation made by this process wins over a status that has not
	// caught up yet.
	for _, p := range a.byKey[key] {
		previous[p.Name] = p.ResolverPort
	}
	inUse := map[int32]bool{}
	var out []elastiv1alpha1.ProxyPort
	for _, sp := range proxiedPorts(svc) {
		pp := elastiv1alpha1.ProxyPort{Name: sp.Name, Port: sp.Port, Protocol: string(protocolOrTCP(sp.Protocol))}
		if sp.AppProtocol != nil {
			pp.AppProtocol = *sp.AppProtocol
		}
		if prev, ok := previous[sp.Name]; ok && !inUse[prev] {
			free, err := a.freeFor(ctx, es, prev, true)
			if err != nil {
				return nil, err
			}
			if free {
				pp.ResolverPort = prev
			}
		}
		if pp.ResolverPort == 0 {
			p, err := a.lowestFree(ctx, es, inUse)
			if errors.Is(err, ErrPortsExhausted) {
				// Wait for a port to free up. What es holds stays
				// reserved: its status still records it.
				a.waiting[key] = struct{}{}
			}
			if err != nil {
				return nil, err
			}
			pp.ResolverPort = p
		}
		inUse[pp.ResolverPort] = true
		out = append(out, pp)
	}
	delete(a.waiting, key)
	if freesPorts(es.Status.ProxyPorts, out) || freesPorts(a.byKey[key], out) {
		a.wakeWaitersLocked()
	}
	a.setLocked(key, out)
	return out, nil
}

// Release frees every port reserved for key, for an ElastiService that is
// gone, and wakes the ElastiServices waiting for a port. It wakes them even
// when this process reserved nothing for key (a new leader reserves nothing
// until it reconciles): the ports in key's status are free too.
func (a *portAllocator) Release(key types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.waiting, key)
	a.setLocked(key, nil)
	a.wakeWaitersLocked()
}

// wakeWaitersLocked enqueues every waiting ElastiService. A waiter stays
// registered until it gets its ports, so a later release wakes it again if
// another waiter took this port first. The send never blocks, as the caller
// holds mu: a waiter whose event finds the channel full stays registered for
// the next release, and its requeue at the polling interval backs that up.
func (a *portAllocator) wakeWaitersLocked() {
	for key := range a.waiting {
		select {
		case a.events <- event.GenericEvent{Object: &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}:
		default:
		}
	}
}

// freesPorts reports whether a resolver port in had is missing from now.
func freesPorts(had, now []elastiv1alpha1.ProxyPort) bool {
	for _, p := range had {
		if !containsPort(now, p.ResolverPort) {
			return true
		}
	}
	return false
}

func (a *portAllocator) setLocked(key types.NamespacedName, ports []elastiv1alpha1.ProxyPort) {
	for _, p := range a.byKey[key] {
		if a.reserved[p.ResolverPort] == key {
			delete(a.reserved, p.ResolverPort)
		}
	}
	delete(a.byKey, key)
	if len(ports) == 0 {
		resolverPortsAllocated.Set(float64(len(a.reserved)))
		return
	}
	for _, p := range ports {
		a.reserved[p.ResolverPort] = key
	}
	a.byKey[key] = append([]elastiv1alpha1.ProxyPort(nil), ports...)
	resolverPortsAllocated.Set(float64(len(a.reserved)))
}

func (a *portAllocator) lowestFree(ctx context.Context, es *elastiv1alpha1.ElastiService, inUse map[int32]bool) (int32, error) {
	for p := a.start; p <= a.end; p++ {
		if inUse[p] {
			continue
		}
		free, err := a.freeFor(ctx, es, p, false)
		if err != nil {
			return 0, err
		}
		if free {
			return p, nil
		}
	}
	return 0, fmt.Errorf("%w (%d-%d)", ErrPortsExhausted, a.start, a.end)
}

// freeFor reports whether es may hold port p: it is in range, not reserved
// by another ElastiService in this process, and not recorded by another
// ElastiService. When es already held p (kept is true) and another one
// records it too, the one with precedence keeps it.
func (a *portAllocator) freeFor(ctx context.Context, es *elastiv1alpha1.ElastiService, p int32, kept bool) (bool, error) {
	if p < a.start || p > a.end {
		return false, nil
	}
	key := client.ObjectKeyFromObject(es)
	if holder, ok := a.reserved[p]; ok && holder != key {
		return false, nil
	}
	others, err := a.holders(ctx, p)
	if err != nil {
		return false, err
	}
	for i := range others {
		o := &others[i]
		okey := client.ObjectKeyFromObject(o)
		if okey == key {
			continue
		}
		if ports, ok := a.byKey[okey]; ok && !containsPort(ports, p) {
			// This process moved o off p; the cache has not caught up.
			continue
		}
		if !kept || precedes(o, es) {
			return false, nil
		}
	}
	return true, nil
}

// precedes decides which of two ElastiServices that claim the same port
// keeps it: the older one, then the lower namespace/name. Both sides of a
// collision agree, so exactly one moves.
func precedes(a, b *elastiv1alpha1.ElastiService) bool {
	at, bt := a.CreationTimestamp.Time, b.CreationTimestamp.Time
	if !at.Equal(bt) {
		return at.Before(bt)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

func containsPort(ports []elastiv1alpha1.ProxyPort, p int32) bool {
	for _, q := range ports {
		if q.ResolverPort == p {
			return true
		}
	}
	return false
}

func protocolOrTCP(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}
