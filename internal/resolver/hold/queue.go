package hold

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Queue bounds the requests and connections held per ElastiService, and
// what all of them hold together on this resolver. Each ElastiService has
// its own bound, so a burst at one Service takes no slots from another up
// to the total; the total keeps the ElastiServices of all tenants together
// within what the resolver's memory holds. Queue only counts, which keeps
// it cheap on the hot path; the event-driven wait is Hold.Hold (hold.go).
type Queue struct {
	mu   sync.Mutex
	held map[types.NamespacedName]int
	// maxTotal bounds total; 0 is no bound.
	maxTotal int
	// total is what all ElastiServices hold; peak is its largest value
	// since it was last zero.
	total, peak int
	// drained, if set, is called (without the lock) each time total
	// falls back to zero, with the peak it had.
	drained func(peak int)
}

// NewQueue returns an empty Queue that holds at most maxTotal in all (0:
// no bound); drained, if not nil, is called (without the lock) each time
// the total held falls back to zero, with the peak it had.
func NewQueue(maxTotal int, drained func(peak int)) *Queue {
	return &Queue{held: map[types.NamespacedName]int{}, maxTotal: maxTotal, drained: drained}
}

// Enter takes a slot for key if fewer than limit are held for it and fewer
// than the Queue's total bound in all (ErrQueueFull, ErrResolverFull
// otherwise). The returned leave
// gives it back; calling leave more than once is harmless, so a deferred call
// and an early one (client gone) can coexist.
func (q *Queue) Enter(key types.NamespacedName, limit int) (leave func(), err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.held[key] >= limit {
		return nil, ErrQueueFull
	}
	if q.maxTotal > 0 && q.total >= q.maxTotal {
		return nil, ErrResolverFull
	}
	q.held[key]++
	q.total++
	q.peak = max(q.peak, q.total)
	var once sync.Once
	return func() { once.Do(func() { q.leave(key) }) }, nil
}

func (q *Queue) leave(key types.NamespacedName) {
	q.mu.Lock()
	if q.held[key] <= 1 {
		delete(q.held, key)
	} else {
		q.held[key]--
	}
	q.total--
	peak := q.peak
	if q.total > 0 {
		peak = 0
	} else {
		q.peak = 0
	}
	q.mu.Unlock()
	if peak > 0 && q.drained != nil {
		q.drained(peak)
	}
}

// Total returns how many slots all ElastiServices hold.
func (q *Queue) Total() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.total
}

// Held returns how many slots key holds.
func (q *Queue) Held(key types.NamespacedName) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.held[key]
}
