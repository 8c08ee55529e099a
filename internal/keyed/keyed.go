// Package keyed is a map that many goroutines share: the notes the operator
// and the resolver keep in memory per object (per ElastiService, per
// Service), such as a grace period's start or a refused wake's message.
// Each method takes the lock once, so a read-modify-write (Update) is atomic.
package keyed

import "sync"

// Map maps keys to values under one mutex. The zero value is empty and
// ready to use; a nil *Map reads as empty and ignores writes.
type Map[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]V
}

// Get returns the value at key, and whether there is one.
func (k *Map[K, V]) Get(key K) (V, bool) {
	if k == nil {
		var zero V
		return zero, false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.m[key]
	return v, ok
}

// Set puts v at key.
func (k *Map[K, V]) Set(key K, v V) {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil {
		k.m = map[K]V{}
	}
	k.m[key] = v
}

// Delete removes key.
func (k *Map[K, V]) Delete(key K) {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.m, key)
}

// Update replaces the value at key with what fn returns for the current
// one (ok reports whether there was one), under the lock: keep false
// removes the key. It returns what fn returned.
func (k *Map[K, V]) Update(key K, fn func(v V, ok bool) (next V, keep bool)) (V, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.m[key]
	next, keep := fn(v, ok)
	if !keep {
		delete(k.m, key)
		return next, false
	}
	if k.m == nil {
		k.m = map[K]V{}
	}
	k.m[key] = next
	return next, true
}

// Len is the number of keys.
func (k *Map[K, V]) Len() int {
	if k == nil {
		return 0
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.m)
}
