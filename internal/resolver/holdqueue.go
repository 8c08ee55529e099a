package resolver

import (
	"errors"
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// ErrQueueFull means an ElastiService already holds its maximum number of
// requests on this resolver; HTTP answers 503 with Retry-After, TCP closes.
var ErrQueueFull = errors.New("hold queue full")

// HoldQueue bounds the requests and connections held per ElastiService. Each
// ElastiService has its own bound, so a burst at one Service never takes
// slots from another. Waiting itself is event-driven and lives with the
// caller; HoldQueue only counts, which keeps it cheap on the hot path.
type HoldQueue struct {
	mu   sync.Mutex
	held map[types.NamespacedName]int
}

// NewHoldQueue returns an empty HoldQueue.
func NewHoldQueue() *HoldQueue {
	return &HoldQueue{held: map[types.NamespacedName]int{}}
}

// Enter takes a slot for key if fewer than limit are held. The returned leave
// gives it back; calling leave more than once is harmless, so a deferred call
// and an early one (client gone) can coexist.
func (q *HoldQueue) Enter(key types.NamespacedName, limit int) (leave func(), err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.held[key] >= limit {
		return nil, ErrQueueFull
	}
	q.held[key]++
	var once sync.Once
	return func() { once.Do(func() { q.leave(key) }) }, nil
}

func (q *HoldQueue) leave(key types.NamespacedName) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.held[key] <= 1 {
		delete(q.held, key)
		return
	}
	q.held[key]--
}

// Held returns how many slots key holds.
func (q *HoldQueue) Held(key types.NamespacedName) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.held[key]
}
