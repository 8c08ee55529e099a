package keyed

import (
	"sync"
	"testing"
	"time"
)

func TestMapSetGetDelete(t *testing.T) {
	var m Map[string, int]
	if _, ok := m.Get("a"); ok {
		t.Fatal("empty map has a")
	}
	m.Set("a", 1)
	if v, ok := m.Get("a"); !ok || v != 1 {
		t.Fatalf("Get(a) = %d, %v; want 1, true", v, ok)
	}
	m.Delete("a")
	if _, ok := m.Get("a"); ok || m.Len() != 0 {
		t.Fatalf("a still there after Delete (len %d)", m.Len())
	}
}

func TestNilMapReadsEmpty(t *testing.T) {
	var m *Map[string, int]
	m.Set("a", 1)
	m.Delete("a")
	if _, ok := m.Get("a"); ok || m.Len() != 0 {
		t.Fatal("a nil map holds something")
	}
}

// TestUpdateIsAtomic: concurrent increments through Update lose none, and
// keep=false removes the key.
func TestUpdateIsAtomic(t *testing.T) {
	var m Map[string, int]
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				m.Update("n", func(v int, _ bool) (int, bool) { return v + 1, true })
			}
		}()
	}
	wg.Wait()
	if v, _ := m.Get("n"); v != 8000 {
		t.Fatalf("n = %d after 8000 increments", v)
	}
	if _, kept := m.Update("n", func(v int, ok bool) (int, bool) { return v, false }); kept {
		t.Fatal("keep=false kept the key")
	}
	if _, ok := m.Get("n"); ok {
		t.Fatal("n still there after Update with keep=false")
	}
}

// TestLocksSerializeOneKeyOnly: a second Lock of a held key waits for its
// unlock, another key does not wait, and a key no one holds is forgotten.
func TestLocksSerializeOneKeyOnly(t *testing.T) {
	var l Locks[string]
	unlockA := l.Lock("a")

	otherDone := make(chan struct{})
	go func() {
		l.Lock("b")()
		close(otherDone)
	}()
	<-otherDone // would hang if b waited for a

	gotA := make(chan struct{})
	go func() {
		unlock := l.Lock("a")
		close(gotA)
		unlock()
	}()
	select {
	case <-gotA:
		t.Fatal("a locked twice at once")
	case <-time.After(50 * time.Millisecond):
	}
	unlockA()
	<-gotA
	// The goroutine's unlock runs right after gotA closes.
	deadline := time.Now().Add(5 * time.Second)
	for l.held() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d keys still kept after every unlock", l.held())
		}
		time.Sleep(time.Millisecond)
	}
}
