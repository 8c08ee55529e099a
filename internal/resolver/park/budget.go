package park

import "sync"

// Budget bounds the bytes read ahead for everything a resolver holds
// together: held HTTP/1.x bodies (ReadAhead) and held TCP connections
// (WatchHeld). Each takes its share when its hold starts and gives it back
// when it ends. A hold that finds the budget spent reads nothing ahead: its
// bytes wait in the socket and TCP's flow control makes the client wait, as
// for a slow server; nothing is refused. So one tenant's uploads cannot
// take the memory that every tenant's holds share (docs/resolver.md,
// "Held means watched": "One budget for all holds").
type Budget struct {
	mu   sync.Mutex
	left int
	size int
}

// NewBudget returns a budget of size bytes; size 0 or less bounds nothing.
func NewBudget(size int) *Budget {
	if size <= 0 {
		return nil
	}
	return &Budget{left: size, size: size}
}

// Take takes up to want bytes, as many as are left. A nil Budget gives
// want.
func (b *Budget) Take(want int) int {
	if b == nil {
		return want
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	n := min(want, b.left)
	b.left -= n
	return n
}

// Give gives back n bytes that Take returned.
func (b *Budget) Give(n int) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.left = min(b.left+n, b.size)
}

// Taken returns the bytes taken and not given back.
func (b *Budget) Taken() int {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.size - b.left
}
