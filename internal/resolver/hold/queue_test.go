package hold

import (
	"errors"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestHoldQueue(t *testing.T) {
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	b := types.NamespacedName{Namespace: "ns", Name: "b"}
	type step struct {
		key     types.NamespacedName
		limit   int
		leave   int // leave this many earlier entries first (LIFO)
		wantErr error
		wantA   int
		wantB   int
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{
			name: "fills to the limit then refuses",
			steps: []step{
				{key: a, limit: 2, wantA: 1},
				{key: a, limit: 2, wantA: 2},
				{key: a, limit: 2, wantErr: ErrQueueFull, wantA: 2},
			},
		},
		{
			name: "a full service does not take slots from another",
			steps: []step{
				{key: a, limit: 1, wantA: 1},
				{key: a, limit: 1, wantErr: ErrQueueFull, wantA: 1},
				{key: b, limit: 1, wantA: 1, wantB: 1},
			},
		},
		{
			name: "leaving frees a slot",
			steps: []step{
				{key: a, limit: 1, wantA: 1},
				{key: a, limit: 1, leave: 1, wantA: 1},
			},
		},
		{
			name: "a zero limit refuses everything",
			steps: []step{
				{key: a, limit: 0, wantErr: ErrQueueFull},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := NewQueue(0, nil)
			var leaves []func()
			for i, s := range tt.steps {
				for range s.leave {
					leaves[len(leaves)-1]()
					leaves[len(leaves)-1]() // twice: must be harmless
					leaves = leaves[:len(leaves)-1]
				}
				leave, err := q.Enter(s.key, s.limit)
				if !errors.Is(err, s.wantErr) {
					t.Fatalf("step %d: Enter error = %v, want %v", i, err, s.wantErr)
				}
				if err == nil {
					leaves = append(leaves, leave)
				}
				if got := q.Held(a); got != s.wantA {
					t.Errorf("step %d: Held(a) = %d, want %d", i, got, s.wantA)
				}
				if got := q.Held(b); got != s.wantB {
					t.Errorf("step %d: Held(b) = %d, want %d", i, got, s.wantB)
				}
			}
		})
	}
}

func TestHoldQueueConcurrent(t *testing.T) {
	q := NewQueue(0, nil)
	key := types.NamespacedName{Namespace: "ns", Name: "a"}
	const limit, workers = 50, 200
	var mu sync.Mutex
	admitted, refused := 0, 0
	var leaves []func()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			leave, err := q.Enter(key, limit)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				refused++
				return
			}
			admitted++
			leaves = append(leaves, leave)
		})
	}
	wg.Wait()
	if admitted != limit || refused != workers-limit {
		t.Fatalf("admitted %d refused %d, want %d and %d", admitted, refused, limit, workers-limit)
	}
	for _, leave := range leaves {
		wg.Go(leave)
	}
	wg.Wait()
	if got := q.Held(key); got != 0 {
		t.Fatalf("Held after every leave = %d, want 0", got)
	}
}

// TestHoldQueueTotal: past the total, no ElastiService gets a slot, however
// few it holds itself, and a slot given back is taken again.
func TestHoldQueueTotal(t *testing.T) {
	q := NewQueue(3, nil)
	a, b := types.NamespacedName{Namespace: "t1", Name: "a"}, types.NamespacedName{Namespace: "t2", Name: "b"}
	var leaves []func()
	for range 3 {
		leave, err := q.Enter(a, 100)
		if err != nil {
			t.Fatal(err)
		}
		leaves = append(leaves, leave)
	}
	if _, err := q.Enter(b, 100); !errors.Is(err, ErrResolverFull) {
		t.Fatalf("another tenant's first request past the total: %v, want ErrResolverFull", err)
	}
	leaves[0]()
	if _, err := q.Enter(b, 100); err != nil {
		t.Fatalf("after a slot was given back: %v", err)
	}
	if _, err := q.Enter(a, 3); !errors.Is(err, ErrQueueFull) && !errors.Is(err, ErrResolverFull) {
		t.Fatalf("a full resolver let a fourth in: %v", err)
	}
}

func BenchmarkHoldQueue(b *testing.B) {
	q := NewQueue(0, nil)
	key := types.NamespacedName{Namespace: "ns", Name: "a"}
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			leave, err := q.Enter(key, 1<<30)
			if err != nil {
				b.Fatal(err)
			}
			leave()
		}
	})
}
