package endpoints

import (
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"elasti.dev/elasti/internal/contract"
)

// Endpoints tracks the ready endpoints of each Service from the Service's own
// EndpointSlices, the ones the EndpointSlice controller (or any manager other
// than Elasti) writes. Elasti's proxy slices point at the resolvers
// themselves and are ignored.
//
// Every change to a Service's slices closes that Service's change channel, so
// held requests wake on the event instead of polling.
//
// Slices arrive either directly (Update, Delete: tests) or through a Feed,
// one per Service, which an informer of that Service's slices holds (the
// ports package's slice watches). While a Service's feed has not delivered its first full
// list, the Service has no ready endpoint: nothing is forwarded on a partial
// view, and held requests wait for the change that the end of the list
// brings. A feed that has stopped, or been replaced, changes nothing, and
// stopping it forgets the Service's slices.
type Endpoints struct {
	mu       sync.RWMutex
	services map[types.NamespacedName]*serviceEndpoints
	// sliceOwner remembers which Service a slice counted for, so that a
	// relabelled slice leaves its old Service.
	sliceOwner map[types.NamespacedName]types.NamespacedName
	// feeds holds the current feed of each Service that has one.
	feeds    map[types.NamespacedName]feedState
	lastFeed uint64
	// readyEpochs counts, per Service, its turns from no ready endpoint to
	// some, so that the activation loop can tell a new sleep from the wake
	// it is waiting on (ReadyEpoch).
	readyEpochs map[types.NamespacedName]uint64
}

type feedState struct {
	id     uint64
	synced bool
}

type serviceEndpoints struct {
	slices  map[string]sliceEndpoints
	ready   map[string][]string // Service port name -> sorted "ip:port"
	changed chan struct{}
	next    atomic.Uint64
}

// sliceEndpoints is what one slice contributes: its TCP port numbers by
// Service port name and its ready, non-terminating addresses.
type sliceEndpoints struct {
	ports map[string]int32
	addrs []string
}

// New returns an empty tracker.
func New() *Endpoints {
	return &Endpoints{
		services:    map[types.NamespacedName]*serviceEndpoints{},
		sliceOwner:  map[types.NamespacedName]types.NamespacedName{},
		feeds:       map[types.NamespacedName]feedState{},
		readyEpochs: map[types.NamespacedName]uint64{},
	}
}

// Kubernetes' own writer of a selector's EndpointSlices: the resolver
// dials only what it wrote. Anyone who may write an EndpointSlice could
// otherwise point the resolver, which is shared by every tenant, at any
// address: another namespace's pods, a node port, a link-local metadata
// address. Mirrored slices (endpointslicemirroring-controller.k8s.io) are
// not trusted: they copy a selectorless Service's Endpoints, written by
// hand, target references included, so a Pod reference there proves
// nothing.
var trustedWriters = map[string]bool{
	"endpointslice-controller.k8s.io": true,
}

// TrustedWriters returns the managed-by values of the slices the tracker
// uses, for a watch to select server-side.
func TrustedWriters() []string {
	return slices.Sorted(maps.Keys(trustedWriters))
}

// serviceOf returns the Service a slice belongs to, or false for slices the
// resolver must not use: Elasti's own proxy slices, and slices Kubernetes'
// controllers did not write.
func serviceOf(s *discoveryv1.EndpointSlice) (types.NamespacedName, bool) {
	if !trustedWriters[s.Labels[contract.LabelManagedBy]] {
		return types.NamespacedName{}, false
	}
	name := s.Labels[discoveryv1.LabelServiceName]
	if name == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: s.Namespace, Name: name}, true
}

func summarize(s *discoveryv1.EndpointSlice) sliceEndpoints {
	out := sliceEndpoints{ports: map[string]int32{}}
	if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
		return out
	}
	for _, p := range s.Ports {
		if p.Port == nil || !contract.ResolverCarries(ptr.Deref(p.Protocol, "")) {
			continue
		}
		name := ""
		if p.Name != nil {
			name = *p.Name
		}
		out.ports[name] = *p.Port
	}
	for _, ep := range s.Endpoints {
		// Addresses are fungible; the first is the one to use.
		if len(ep.Addresses) == 0 || !contract.EndpointReady(ep.Conditions) {
			continue
		}
		// Only a Pod of the Service's own namespace: the controller writes
		// that reference for every endpoint it takes from a Pod, and a
		// mirrored endpoint written by hand has none.
		if r := ep.TargetRef; r == nil || r.Kind != "Pod" || (r.Namespace != "" && r.Namespace != s.Namespace) {
			continue
		}
		if net.ParseIP(ep.Addresses[0]) == nil {
			continue
		}
		out.addrs = append(out.addrs, ep.Addresses[0])
	}
	return out
}

// Update records a slice after an add or update event.
func (e *Endpoints) Update(s *discoveryv1.EndpointSlice) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.updateLocked(s)
}

func (e *Endpoints) updateLocked(s *discoveryv1.EndpointSlice) {
	sliceKey := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	svc, ok := serviceOf(s)
	if old, had := e.sliceOwner[sliceKey]; had && (!ok || old != svc) {
		e.deleteLocked(sliceKey)
	}
	if !ok {
		return
	}
	e.sliceOwner[sliceKey] = svc
	se := e.serviceLocked(svc)
	se.slices[s.Name] = summarize(s)
	e.rebuildLocked(svc, se)
}

// Delete forgets a slice after a delete event.
func (e *Endpoints) Delete(namespace, name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.deleteLocked(types.NamespacedName{Namespace: namespace, Name: name})
}

// deleteLocked forgets a slice and wakes its Service's waiters.
func (e *Endpoints) deleteLocked(sliceKey types.NamespacedName) {
	svc, ok := e.sliceOwner[sliceKey]
	if !ok {
		return
	}
	delete(e.sliceOwner, sliceKey)
	if se, ok := e.services[svc]; ok {
		delete(se.slices, sliceKey.Name)
		e.rebuildLocked(svc, se)
	}
}

// Feed is one informer's hold on a Service's endpoints, from StartFeed
// until Stop.
type Feed struct {
	e   *Endpoints
	svc types.NamespacedName
	id  uint64
}

// StartFeed gives svc a new feed, which replaces any earlier one. Until the
// feed reports Synced, svc has no ready endpoint.
func (e *Endpoints) StartFeed(svc types.NamespacedName) Feed {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lastFeed++
	e.feeds[svc] = feedState{id: e.lastFeed}
	return Feed{e: e, svc: svc, id: e.lastFeed}
}

// currentLocked reports whether f is still its Service's feed.
func (f Feed) currentLocked() bool {
	st, ok := f.e.feeds[f.svc]
	return ok && st.id == f.id
}

// Update records a slice of f's Service after an add or update event.
func (f Feed) Update(s *discoveryv1.EndpointSlice) {
	f.e.mu.Lock()
	defer f.e.mu.Unlock()
	if !f.currentLocked() {
		return
	}
	if svc, ok := serviceOf(s); ok && svc != f.svc {
		// Not this feed's to say; the feed of its own Service, if any,
		// reports it.
		return
	}
	f.e.updateLocked(s)
}

// Delete forgets a slice of f's Service after a delete event.
func (f Feed) Delete(namespace, name string) {
	f.e.mu.Lock()
	defer f.e.mu.Unlock()
	sliceKey := types.NamespacedName{Namespace: namespace, Name: name}
	if !f.currentLocked() || f.e.sliceOwner[sliceKey] != f.svc {
		return
	}
	f.e.deleteLocked(sliceKey)
}

// Synced reports that f has delivered its first full list: its Service's
// ready endpoints count from now on, and held requests re-check them.
func (f Feed) Synced() {
	f.e.mu.Lock()
	defer f.e.mu.Unlock()
	if !f.currentLocked() {
		return
	}
	f.e.feeds[f.svc] = feedState{id: f.id, synced: true}
	f.notifyLocked()
}

// Stop ends f and forgets its Service's slices. Events the informer still
// delivers afterwards change nothing.
func (f Feed) Stop() {
	f.e.mu.Lock()
	defer f.e.mu.Unlock()
	if !f.currentLocked() {
		return
	}
	delete(f.e.feeds, f.svc)
	if se, ok := f.e.services[f.svc]; ok {
		for name := range se.slices {
			delete(f.e.sliceOwner, types.NamespacedName{Namespace: f.svc.Namespace, Name: name})
		}
		clear(se.slices)
	}
	f.notifyLocked()
}

// notifyLocked wakes the waiters of f's Service after a change of its feed.
func (f Feed) notifyLocked() {
	if se, ok := f.e.services[f.svc]; ok {
		f.e.rebuildLocked(f.svc, se)
	}
}

// Feeding reports whether svc has a feed, that is whether the resolver
// follows svc's slices at all.
func (e *Endpoints) Feeding(svc types.NamespacedName) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	_, ok := e.feeds[svc]
	return ok
}

func (e *Endpoints) serviceLocked(svc types.NamespacedName) *serviceEndpoints {
	se, ok := e.services[svc]
	if !ok {
		se = &serviceEndpoints{slices: map[string]sliceEndpoints{}, changed: make(chan struct{})}
		e.services[svc] = se
	}
	return se
}

// rebuildLocked recomputes the ready sets and wakes waiters. A Service left
// with no slices is dropped; its waiters still wake and pick up a fresh entry.
func (e *Endpoints) rebuildLocked(svc types.NamespacedName, se *serviceEndpoints) {
	ready := map[string][]string{}
	for _, sl := range se.slices {
		for name, port := range sl.ports {
			for _, ip := range sl.addrs {
				ready[name] = append(ready[name], net.JoinHostPort(ip, strconv.Itoa(int(port))))
			}
		}
	}
	for name, addrs := range ready {
		slices.Sort(addrs)
		ready[name] = slices.Compact(addrs)
	}
	if len(se.ready) == 0 && len(ready) > 0 {
		e.readyEpochs[svc]++
	}
	se.ready = ready
	close(se.changed)
	se.changed = make(chan struct{})
	if len(se.slices) == 0 {
		delete(e.services, svc)
	}
}

// usableLocked returns svc's endpoints, or nil while svc's feed has not
// synced.
func (e *Endpoints) usableLocked(svc types.NamespacedName) *serviceEndpoints {
	if st, ok := e.feeds[svc]; ok && !st.synced {
		return nil
	}
	return e.services[svc]
}

// Ready returns the ready "ip:port" addresses of a Service port, by the
// Service port's name. The slice must not be modified.
func (e *Endpoints) Ready(svc types.NamespacedName, portName string) []string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if se := e.usableLocked(svc); se != nil {
		return se.ready[portName]
	}
	return nil
}

// AnyReady reports whether any port of the Service has a ready endpoint.
func (e *Endpoints) AnyReady(svc types.NamespacedName) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	se := e.usableLocked(svc)
	return se != nil && se.anyReady()
}

// anyReady reports whether any port has a ready endpoint.
func (se *serviceEndpoints) anyReady() bool {
	for _, addrs := range se.ready {
		if len(addrs) > 0 {
			return true
		}
	}
	return false
}

// Candidates returns the ready addresses of a Service port in the order a
// dialer should try them. When prefer is one of them (an HTTP/2 pool's
// endpoint, which Next already chose), the list starts there and the
// rotation stays put: otherwise a request that both picks its endpoint and
// dials would advance the rotation twice, and every such request would get
// the same endpoint. Otherwise the list is rotated by one more position on
// every call, so that new connections spread across endpoints.
func (e *Endpoints) Candidates(svc types.NamespacedName, portName, prefer string) []string {
	e.mu.RLock()
	defer e.mu.RUnlock()
	var addrs []string
	start := -1
	if se := e.usableLocked(svc); se != nil && prefer != "" {
		addrs = se.ready[portName]
		start = slices.Index(addrs, prefer)
	}
	if start < 0 {
		addrs, start = e.usableLocked(svc).rotate(portName)
	}
	if len(addrs) == 0 {
		return nil
	}
	out := make([]string, 0, len(addrs))
	out = append(out, addrs[start:]...)
	return append(out, addrs[:start]...)
}

// Next returns the ready address of the Service port that Candidates would
// list first, advancing the same rotation, without building the list: the
// HTTP/2 path picks one per request.
func (e *Endpoints) Next(svc types.NamespacedName, portName string) (string, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	addrs, start := e.usableLocked(svc).rotate(portName)
	if len(addrs) == 0 {
		return "", false
	}
	return addrs[start], true
}

// rotate returns the ready addresses of a Service port and where this
// call's turn of the rotation starts; se may be nil (no usable endpoints).
// The caller holds the Endpoints' lock.
func (se *serviceEndpoints) rotate(portName string) (addrs []string, start int) {
	if se == nil || len(se.ready[portName]) == 0 {
		return nil, 0
	}
	addrs = se.ready[portName]
	return addrs, int((se.next.Add(1) - 1) % uint64(len(addrs)))
}

// ReadyEpoch counts svc's turns from no ready endpoint to some. Two reads
// that differ mean the Service was ready at some moment in between, even if
// it is not any more.
func (e *Endpoints) ReadyEpoch(svc types.NamespacedName) uint64 {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.readyEpochs[svc]
}

// Changed returns a channel closed at the next change to the Service's
// slices. Take it before checking Ready so that no event is missed.
func (e *Endpoints) Changed(svc types.NamespacedName) <-chan struct{} {
	e.mu.RLock()
	if se, ok := e.services[svc]; ok {
		ch := se.changed
		e.mu.RUnlock()
		return ch
	}
	e.mu.RUnlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.serviceLocked(svc).changed
}
