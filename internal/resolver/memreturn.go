package resolver

import (
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// memoryReturner gives the heap a large hold used back to the OS once the
// hold queue has drained and stayed empty for a while.
//
// Each held request costs about 14 KiB of RSS parked, 30 KiB in its
// handler (docs/benchmarks.md#burst), so the first burst after a night at
// zero can grow the resolver by a hundred MiB or more. The Go runtime frees
// that heap at its next GC but returns it to the OS only down to its last
// heap goal, which the burst set: with nothing
// allocating afterwards, the next GC is the forced one two minutes later,
// and the background scavenger then returns the rest slowly. Meanwhile the
// resolver's RSS counts against its memory limit and the node's memory. A
// return after the drain ends that at the cost of two GC cycles
// (returnFreeMemory).
type memoryReturner struct {
	clock clock.WithDelayedExecution
	// after is how long the queue stays empty first: the requests a
	// drain released are still being forwarded, and their clients'
	// connections closed, for a moment.
	after time.Duration
	// atPeak is the smallest peak that is worth a return.
	atPeak int
	// empty reports whether nothing is held now.
	empty func() bool
	// free returns the memory: in the resolver, closeIdle and then
	// returnFreeMemory; in a test, a stand-in.
	free func()
	// returned counts the returns (elasti_resolver_memory_returns_total).
	returned func()

	mu    sync.Mutex
	timer clock.Timer
	// due says a large hold drained and its memory was not returned yet:
	// a hold started before the return was due, so the next drain
	// schedules it whatever its own peak.
	due bool
}

// newMemoryReturner returns memory with free once a hold of atPeak or more
// has drained and empty has stayed true for after; returned is called after
// each return.
func newMemoryReturner(c clock.Clock, after time.Duration, atPeak int, empty func() bool, free, returned func()) *memoryReturner {
	dc, ok := c.(clock.WithDelayedExecution)
	if !ok {
		dc = clock.RealClock{}
	}
	return &memoryReturner{clock: dc, after: after, atPeak: atPeak, empty: empty, free: free, returned: returned}
}

// returnFreeMemory collects garbage twice and returns every free page to the
// OS. Once is not enough: net/http keeps the closed connections' bufio
// buffers in sync.Pools, as does the proxy its copy buffers, and what a pool
// holds survives one GC (in its victim cache). After a burst those buffers
// are about a third of what the held requests used.
func returnFreeMemory() {
	runtime.GC()
	debug.FreeOSMemory()
}

// drained is the hold queue's drained callback (hold.Config.Drained): it schedules a return after
// a drain from peak held, replacing one already scheduled. A hold that
// starts in the meantime puts the return off to its own drain.
func (m *memoryReturner) drained(peak int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if peak < m.atPeak && !m.due {
		return
	}
	m.due = true
	if m.timer != nil {
		m.timer.Stop()
	}
	m.timer = m.clock.AfterFunc(m.after, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		if !m.due || !m.empty() {
			return
		}
		m.due = false
		m.free()
		m.returned()
	})
}

// stop cancels a scheduled return.
func (m *memoryReturner) stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.timer != nil {
		m.timer.Stop()
	}
}
