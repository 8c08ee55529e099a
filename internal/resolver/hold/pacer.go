package hold

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Pacer lets the requests a hold releases reach a woken target a
// bounded number at a time, per ElastiService on this replica. Without it, a
// burst held at zero is forwarded all at once: thousands of new upstream
// connections to one fresh pod, each with its own buffers and goroutines,
// at the very moment the pod is slowest. Paced, the requests reuse a few
// dozen kept-alive connections and leave as fast as the pod answers.
//
// A request's turn ends when its response headers arrive, when forwarding
// fails, or after slot at the latest, so that slow answers (a long poll)
// slow the release down but never stop it. Requests forwarded at once, to a
// target that was already ready, are never paced.
type Pacer struct {
	limit int
	slot  time.Duration

	mu    sync.Mutex
	paces map[types.NamespacedName]*pace
}

type pace struct {
	turns chan struct{}
	users int
}

// NewPacer paces the release of each ElastiService's held requests,
// limit at a time, each keeping its turn for slot at most.
func NewPacer(limit int, slot time.Duration) *Pacer {
	return &Pacer{limit: limit, slot: slot, paces: map[types.NamespacedName]*pace{}}
}

// Wait blocks until it is the request's turn to be forwarded to key's
// target, or gone is closed (the client left: false). The returned done ends
// the turn; calling it more than once is harmless.
func (p *Pacer) Wait(gone <-chan struct{}, key types.NamespacedName) (done func(), ok bool) {
	p.mu.Lock()
	pc := p.paces[key]
	if pc == nil {
		pc = &pace{turns: make(chan struct{}, p.limit)}
		p.paces[key] = pc
	}
	pc.users++
	p.mu.Unlock()

	select {
	case pc.turns <- struct{}{}:
	case <-gone:
		p.leave(key, pc)
		return nil, false
	}
	// A turn that came free as the client left may win the select: the
	// client is gone all the same, and the turn goes to the next one.
	select {
	case <-gone:
		<-pc.turns
		p.leave(key, pc)
		return nil, false
	default:
	}
	var once sync.Once
	end := func() {
		once.Do(func() {
			<-pc.turns
			p.leave(key, pc)
		})
	}
	timer := time.AfterFunc(p.slot, end)
	done = func() {
		timer.Stop()
		end()
	}
	return done, true
}

// leave forgets key's pace once nobody waits on it or holds a turn.
func (p *Pacer) leave(key types.NamespacedName, pc *pace) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pc.users--; pc.users == 0 {
		delete(p.paces, key)
	}
}

// Users is how many requests wait for or hold a turn of key's target now.
func (p *Pacer) Users(key types.NamespacedName) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pc := p.paces[key]; pc != nil {
		return pc.users
	}
	return 0
}

// Size is how many ElastiServices have a pace now.
func (p *Pacer) Size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.paces)
}
