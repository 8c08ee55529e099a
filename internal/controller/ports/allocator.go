package ports

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
)

// ErrPortsExhausted means every resolver port in the range is taken.
var ErrPortsExhausted = errors.New("no free resolver port left in the range")

// IndexResolverPorts is the cache index of ElastiServices by the resolver
// ports in their status (ResolverPortsIndex computes it), so that "who
// holds port p" is one lookup.
const IndexResolverPorts = "elasti.status.proxyPorts.resolverPort"

// ResolverPortsIndex returns the resolver ports obj's status records, as
// strings, for the index IndexResolverPorts.
func ResolverPortsIndex(obj client.Object) []string {
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

// Allocator hands out resolver ports. The durable record is every
// ElastiService's status.proxyPorts, read from the cache, so a new leader
// re-derives what is taken. The in-memory reservations cover allocations made
// by this process whose status write has not reached the cache yet.
// Allocation is serialized by mu; only the leader reconciles.
//
// A freed port is not handed out again at once: a node or an ingress that
// still has the old proxy slice would send the old Service's clients to the
// new one. It stays in quarantine (quarantine.go) for the configured
// period. New ports are taken from a cursor that moves on through the range
// rather than lowest first, so that a port freed lately usually comes round
// last, even in a process that has lost the quarantine (a restart).
//
// An ElastiService the range has no room for waits for an event, not for a
// timer or the work queue's backoff: it is remembered in waiting, and every
// port that becomes free (an ElastiService released, or one that needs fewer
// ports, or a port leaving quarantine) sends each waiter to the controller
// through events.
type Allocator struct {
	start, end int32
	// holders finds which ElastiServices have port p in their status.
	holders func(ctx context.Context, port int32) ([]elastiv1alpha1.ElastiService, error)
	policy  ReusePolicy

	mu       sync.Mutex
	reserved map[int32]types.NamespacedName
	byKey    map[types.NamespacedName][]elastiv1alpha1.ProxyPort
	waiting  map[types.NamespacedName]struct{}
	// next is the port a new allocation tries first; 0 until this process
	// first needs one.
	next int32
	// recordRead: the persisted quarantine (policy.Record) has been read
	// into freedAt; it is read before this process first hands out a port.
	recordRead bool
	quarantineState

	// events carries the waiters to reconcile again; the controller
	// watches it through source.Channel.
	events chan event.GenericEvent
}

// ReusePolicy is how the allocator keeps a freed port from being handed
// out again too soon. The zero value (with a clock) has no quarantine and
// starts the cursor at the first port of the longest unused run.
type ReusePolicy struct {
	Quarantine time.Duration
	Clock      clock.WithDelayedExecution
	// InUse lists every resolver port some status records, for
	// startCursorLocked; nil knows only this process's reservations.
	InUse func(ctx context.Context) ([]int32, error)
	// RandN picks where in that run the cursor starts; nil picks its
	// first port.
	RandN func(n int) int
	// Reserved is told how many ports this process holds reserved after
	// every change, under the allocator's lock (the operator's
	// elasti_operator_resolver_ports_allocated gauge); nil tells no one.
	Reserved func(n int)
	// Record keeps the quarantine in the API server, for the next
	// operator; nil keeps it in memory only.
	Record *QuarantineRecord
}

// newPortAllocator returns an allocator without quarantine whose cursor
// starts deterministically, as the older allocator tests expect.
func newPortAllocator(start, end int32, holders func(context.Context, int32) ([]elastiv1alpha1.ElastiService, error)) *Allocator {
	return NewAllocator(start, end, holders, ReusePolicy{Clock: clock.RealClock{}})
}

// NewAllocator returns an allocator for the ports start to end (both
// included) that finds who records a port through holders.
func NewAllocator(start, end int32, holders func(context.Context, int32) ([]elastiv1alpha1.ElastiService, error), policy ReusePolicy) *Allocator {
	return &Allocator{
		start: start, end: end, holders: holders, policy: policy,
		reserved:        map[int32]types.NamespacedName{},
		byKey:           map[types.NamespacedName][]elastiv1alpha1.ProxyPort{},
		waiting:         map[types.NamespacedName]struct{}{},
		quarantineState: newQuarantineState(),
		events:          make(chan event.GenericEvent, 1024),
	}
}

// Events carries the ElastiServices waiting for a port to reconcile again
// when one may have become free; the controller watches it.
func (a *Allocator) Events() <-chan event.GenericEvent { return a.events }

// CacheHolders looks port holders up through the cache index.
func CacheHolders(c client.Reader) func(context.Context, int32) ([]elastiv1alpha1.ElastiService, error) {
	return func(ctx context.Context, port int32) ([]elastiv1alpha1.ElastiService, error) {
		list := &elastiv1alpha1.ElastiServiceList{}
		if err := c.List(ctx, list, client.MatchingFields{IndexResolverPorts: strconv.Itoa(int(port))}); err != nil {
			return nil, fmt.Errorf("list ElastiServices holding resolver port %d: %w", port, err)
		}
		return list.Items, nil
	}
}

// CacheInUse lists the ports every cached status records.
func CacheInUse(c client.Reader) func(context.Context) ([]int32, error) {
	return func(ctx context.Context) ([]int32, error) {
		list := &elastiv1alpha1.ElastiServiceList{}
		if err := c.List(ctx, list); err != nil {
			return nil, fmt.Errorf("list ElastiServices: %w", err)
		}
		var out []int32
		for i := range list.Items {
			for _, p := range list.Items[i].Status.ProxyPorts {
				out = append(out, p.ResolverPort)
			}
		}
		return out, nil
	}
}

// Allocate returns es's proxy ports for the Service's TCP ports: existing
// allocations are kept (matched by port name) unless another ElastiService
// with precedence holds the same port; new ones take the next free port
// after the cursor that is not in quarantine. Ports es no longer needs go
// into quarantine.
func (a *Allocator) Allocate(ctx context.Context, es *elastiv1alpha1.ElastiService, svc *corev1.Service) ([]elastiv1alpha1.ProxyPort, error) {
	key := client.ObjectKeyFromObject(es)
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.policy.Clock.Now()

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
		// Keeping a port is not reuse: whatever still routes to it
		// means this same Service port.
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
			p, err := a.nextFree(ctx, es, inUse, now)
			if errors.Is(err, ErrPortsExhausted) {
				// Wait for a port to free up. What es holds stays
				// reserved: its status still records it.
				a.waiting[key] = struct{}{}
				a.scheduleLocked(now)
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
	dropped := droppedPorts(es.Status.ProxyPorts, out)
	dropped = append(dropped, droppedPorts(a.byKey[key], out)...)
	// Recorded before the status that lets go of them is written.
	if err := a.recordLocked(ctx, dropped, now); err != nil {
		return nil, err
	}
	a.setLocked(key, out)
	a.freeLocked(dropped, now)
	return out, nil
}

// Retire records in the persisted quarantine every port es holds, before
// es lets go of them (its finalizer removed): a new operator must not hand
// them out before their quarantine is over. Without a record or a
// quarantine it does nothing.
func (a *Allocator) Retire(ctx context.Context, es *elastiv1alpha1.ElastiService) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var held []int32
	for _, p := range es.Status.ProxyPorts {
		held = append(held, p.ResolverPort)
	}
	for _, p := range a.byKey[client.ObjectKeyFromObject(es)] {
		held = append(held, p.ResolverPort)
	}
	return a.recordLocked(ctx, held, a.policy.Clock.Now())
}

// recordLocked writes the ports of the range among freed to the persisted
// quarantine.
func (a *Allocator) recordLocked(ctx context.Context, freed []int32, now time.Time) error {
	if a.policy.Record == nil || a.policy.Quarantine == 0 {
		return nil
	}
	var ports []int32
	for _, p := range freed {
		if p >= a.start && p <= a.end {
			ports = append(ports, p)
		}
	}
	if len(ports) == 0 {
		return nil
	}
	return a.policy.Record.add(ctx, ports, now, a.policy.Quarantine)
}

// readRecordLocked merges the persisted quarantine into freedAt, once per
// process, before the first port is handed out: what an earlier operator
// freed stays in quarantine across the restart.
func (a *Allocator) readRecordLocked(ctx context.Context) error {
	if a.recordRead || a.policy.Record == nil || a.policy.Quarantine == 0 {
		return nil
	}
	freed, err := a.policy.Record.load(ctx)
	if err != nil {
		return err
	}
	for p, t := range freed {
		if p < a.start || p > a.end {
			continue
		}
		if cur, ok := a.freedAt[p]; !ok || t.After(cur) {
			a.freedAt[p] = t
		}
	}
	a.recordRead = true
	return nil
}

// Release frees every port reserved for key, for an ElastiService that is
// gone. Without a quarantine it wakes the ElastiServices waiting for a port
// even when this process reserved nothing for key (a new leader reserves
// nothing until it reconciles): the ports in key's status are free too. With
// one, those ports reach the quarantine through the informer's delete
// notification (statusHandler), which wakes the waiters when it ends.
func (a *Allocator) Release(key types.NamespacedName) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.waiting, key)
	var freed []int32
	for _, p := range a.byKey[key] {
		freed = append(freed, p.ResolverPort)
	}
	a.setLocked(key, nil)
	if a.policy.Quarantine == 0 {
		a.wakeWaitersLocked()
		return
	}
	a.freeLocked(freed, a.policy.Clock.Now())
}

// wakeWaitersLocked enqueues every waiting ElastiService. A waiter stays
// registered until it gets its ports, so a later release wakes it again if
// another waiter took this port first. The send never blocks, as the caller
// holds mu: a waiter whose event finds the channel full stays registered for
// the next release, and its requeue at the polling interval backs that up.
func (a *Allocator) wakeWaitersLocked() {
	for key := range a.waiting {
		select {
		case a.events <- event.GenericEvent{Object: &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}:
		default:
		}
	}
}

// droppedPorts returns the resolver ports in had that are missing from now.
func droppedPorts(had, now []elastiv1alpha1.ProxyPort) []int32 {
	var out []int32
	for _, p := range had {
		if !containsPort(now, p.ResolverPort) {
			out = append(out, p.ResolverPort)
		}
	}
	return out
}

func (a *Allocator) setLocked(key types.NamespacedName, ports []elastiv1alpha1.ProxyPort) {
	for _, p := range a.byKey[key] {
		if a.reserved[p.ResolverPort] == key {
			delete(a.reserved, p.ResolverPort)
		}
	}
	delete(a.byKey, key)
	if len(ports) == 0 {
		a.reportReservedLocked()
		return
	}
	for _, p := range ports {
		a.reserved[p.ResolverPort] = key
	}
	a.byKey[key] = append([]elastiv1alpha1.ProxyPort(nil), ports...)
	a.reportReservedLocked()
}

func (a *Allocator) reportReservedLocked() {
	if a.policy.Reserved != nil {
		a.policy.Reserved(len(a.reserved))
	}
}

// nextFree returns the first port from the cursor on, once round the range,
// that es may take and that is not in quarantine, and moves the cursor past
// it. Allocating in this order rather than lowest first means a freed port
// comes round only when the cursor reaches it again. The cursor passed the
// ports handed out lately a short while ago, so those freed soon after they
// were taken (the churn of short-lived ElastiServices) are the last to be
// reused, and the ports ahead are those left unused longest.
func (a *Allocator) nextFree(ctx context.Context, es *elastiv1alpha1.ElastiService, inUse map[int32]bool, now time.Time) (int32, error) {
	if err := a.readRecordLocked(ctx); err != nil {
		return 0, err
	}
	if a.next == 0 {
		if err := a.startCursorLocked(ctx, now); err != nil {
			return 0, err
		}
	}
	size := a.end - a.start + 1
	quarantined := 0
	for i := int32(0); i < size; i++ {
		p := a.start + (a.next-a.start+i)%size
		if inUse[p] {
			continue
		}
		free, err := a.freeFor(ctx, es, p, false)
		if err != nil {
			return 0, err
		}
		if !free {
			continue
		}
		if a.quarantinedLocked(p, now) {
			quarantined++
			continue
		}
		a.next = a.start + (p-a.start+1)%size
		return p, nil
	}
	if quarantined > 0 {
		return 0, fmt.Errorf("%w (%d-%d): %d freed port(s) still in quarantine (--port-quarantine)", ErrPortsExhausted, a.start, a.end, quarantined)
	}
	return 0, fmt.Errorf("%w (%d-%d)", ErrPortsExhausted, a.start, a.end)
}

// startCursorLocked places the cursor of a process that has not allocated
// yet (a restart, a new leader). What was freed before it started is not
// known, so it starts at a random port of the longest run of unused ports:
// a port freed among those still in use (or still quarantined here) comes
// round only after the whole run, and one freed at the edge of the run is
// the next one only by a 1-in-the-run's-length chance. A fixed rule (say,
// after the highest port in use) would pick the port just freed at the top
// every time.
func (a *Allocator) startCursorLocked(ctx context.Context, now time.Time) error {
	used := map[int32]bool{}
	if a.policy.InUse != nil {
		recorded, err := a.policy.InUse(ctx)
		if err != nil {
			return err
		}
		for _, p := range recorded {
			used[p] = true
		}
	}
	for p := range a.reserved {
		used[p] = true
	}
	for p := range a.recorded {
		used[p] = true
	}
	for p := range a.freedAt {
		if a.quarantinedLocked(p, now) {
			used[p] = true
		}
	}
	begin, length := longestUnusedRun(a.start, a.end, used)
	if length > 0 && a.policy.RandN != nil {
		begin += a.policy.RandN(length)
	}
	a.next = a.start + int32(begin%int(a.end-a.start+1))
	return nil
}

// longestUnusedRun finds the longest run of ports not in used, going round
// the range as a ring; begin is its offset from start. A range with every
// port used has no run (length 0).
func longestUnusedRun(start, end int32, used map[int32]bool) (begin, length int) {
	size := int(end - start + 1)
	anchor := -1
	for i := 0; i < size; i++ {
		if used[start+int32(i)] {
			anchor = i
			break
		}
	}
	if anchor < 0 {
		return 0, size
	}
	runBegin, runLen := 0, 0
	for k := 1; k <= size; k++ {
		i := (anchor + k) % size
		if used[start+int32(i)] {
			if runLen > length {
				begin, length = runBegin, runLen
			}
			runLen = 0
			continue
		}
		if runLen == 0 {
			runBegin = i
		}
		runLen++
	}
	return begin, length
}

// freeFor reports whether es may hold port p: it is in range, not reserved
// by another ElastiService in this process, and not recorded by another
// ElastiService. When es already held p (kept is true) and another one
// records it too, the one with precedence keeps it. A port es did not hold
// must also be missing from every status the informer last notified: the
// cache drops a deleted ElastiService a moment before the notification that
// puts its ports in quarantine arrives, and in that moment the port would
// look free.
func (a *Allocator) freeFor(ctx context.Context, es *elastiv1alpha1.ElastiService, p int32, kept bool) (bool, error) {
	if p < a.start || p > a.end {
		return false, nil
	}
	key := client.ObjectKeyFromObject(es)
	if holder, ok := a.reserved[p]; ok && holder != key {
		return false, nil
	}
	if !kept {
		for k := range a.recorded[p] {
			if k != key {
				return false, nil
			}
		}
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
		if !kept || o.Precedes(es) {
			return false, nil
		}
	}
	return true, nil
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
