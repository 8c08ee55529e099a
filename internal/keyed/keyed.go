// Package keyed is a map that many goroutines share: the notes the operator
// and the resolver keep in memory per object (per ElastiService, per
// Service), such as a grace period's start or a refused wake's message.
// Each method takes the lock once, so a read-modify-write (Update) is atomic.
// Locks is a mutex per key, for work on one object that two paths may start
// at once (the operator's reconcile and a wake).
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

// Locks is one mutex per key, held only while someone holds or waits for
// it: two keys never wait for each other. The zero value is ready to use.
type Locks[K comparable] struct {
	mu sync.Mutex
	m  map[K]*keyLock
}

type keyLock struct {
	sync.Mutex
	users int // holders and waiters
}

// Lock locks key and returns its unlock.
func (l *Locks[K]) Lock(key K) (unlock func()) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[K]*keyLock{}
	}
	kl := l.m[key]
	if kl == nil {
		kl = &keyLock{}
		l.m[key] = kl
	}
	kl.users++
	l.mu.Unlock()

	kl.Lock()
	return func() {
		kl.Unlock()
		l.mu.Lock()
		if kl.users--; kl.users == 0 {
			delete(l.m, key)
		}
		l.mu.Unlock()
	}
}

// held is how many keys are held or waited for.
func (l *Locks[K]) held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}
