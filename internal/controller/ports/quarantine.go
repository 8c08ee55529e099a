package ports

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// quarantineState is the allocator's memory of freed ports. It lives in the
// process, on every replica: the informer's notifications reach followers
// too, so a standby that becomes leader already knows what was freed while
// it stood by. A process that starts afresh reads what was freed before it
// started from the QuarantineRecord, if there is one; its cursor
// (startCursorLocked) is the fallback when there is none.
type quarantineState struct {
	// freedAt is when each port in quarantine was freed. An entry whose
	// quarantine is over is dropped when next looked at.
	freedAt map[int32]time.Time
	// recorded is, per port, the ElastiServices whose status records it
	// as the informer's notifications last said.
	recorded map[int32]map[types.NamespacedName]struct{}
	// timer fires when the earliest quarantine that a waiter may need
	// ends, at timerAt.
	timer   clock.Timer
	timerAt time.Time
}

func newQuarantineState() quarantineState {
	return quarantineState{freedAt: map[int32]time.Time{}, recorded: map[int32]map[types.NamespacedName]struct{}{}}
}

// freeLocked puts ports that nobody in this process needs any more into
// quarantine from now. A port freed again restarts its quarantine: the
// later release is the one whose slice data planes may still hold. Without
// a quarantine the ports are free at once and the waiters are woken; with
// one, they are woken when it ends.
func (a *Allocator) freeLocked(ports []int32, now time.Time) {
	inRange := false
	for _, p := range ports {
		if p < a.start || p > a.end {
			continue
		}
		inRange = true
		if a.policy.Quarantine > 0 {
			a.freedAt[p] = now
		}
	}
	if !inRange {
		return
	}
	if a.policy.Quarantine == 0 {
		a.wakeWaitersLocked()
		return
	}
	a.scheduleLocked(now)
}

// quarantinedLocked reports whether port p is still in quarantine at now.
// The quarantine is over once the whole period has passed since the release.
func (a *Allocator) quarantinedLocked(p int32, now time.Time) bool {
	t, ok := a.freedAt[p]
	if !ok {
		return false
	}
	if now.Sub(t) >= a.policy.Quarantine {
		delete(a.freedAt, p)
		return false
	}
	return true
}

// scheduleLocked makes sure the waiters are woken when the next quarantine
// ends, so that a port leaving quarantine is taken on an event of its own,
// not on some later poll. Nothing is scheduled while nobody waits: a new
// waiter schedules it (Allocate).
func (a *Allocator) scheduleLocked(now time.Time) {
	if len(a.waiting) == 0 {
		return
	}
	var next time.Time
	for p, t := range a.freedAt {
		if !a.quarantinedLocked(p, now) {
			continue
		}
		if end := t.Add(a.policy.Quarantine); next.IsZero() || end.Before(next) {
			next = end
		}
	}
	if next.IsZero() {
		return
	}
	if a.timer != nil {
		if !a.timerAt.After(next) {
			return
		}
		a.timer.Stop()
	}
	// The callback must not take mu: a fake clock calls it while holding
	// its own lock, which Allocate takes (through Now) while holding mu.
	a.timer = a.policy.Clock.AfterFunc(next.Sub(now), func() { go a.quarantineEnded() })
	a.timerAt = next
}

// quarantineEnded wakes the waiters, as a port has just left quarantine,
// and schedules the next end.
func (a *Allocator) quarantineEnded() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.timer = nil
	a.wakeWaitersLocked()
	a.scheduleLocked(a.policy.Clock.Now())
}

// statusHandler follows, from the ElastiService informer's notifications,
// which ports the statuses record. A port that leaves a status (its
// ElastiService deleted, or its Service port gone) goes into quarantine,
// whichever process allocated it: a new leader that never reconciled the
// deleted ElastiService, and the followers, learn of the release too.
func (a *Allocator) StatusHandler() toolscache.ResourceEventHandler {
	ports := func(obj any) (types.NamespacedName, []elastiv1alpha1.ProxyPort, bool) {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		es, ok := obj.(*elastiv1alpha1.ElastiService)
		if !ok {
			return types.NamespacedName{}, nil, false
		}
		return types.NamespacedName{Namespace: es.Namespace, Name: es.Name}, es.Status.ProxyPorts, true
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if key, has, ok := ports(obj); ok {
				a.recordStatus(key, nil, has)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			key, had, ok1 := ports(oldObj)
			_, has, ok2 := ports(newObj)
			if ok1 && ok2 {
				a.recordStatus(key, had, has)
			}
		},
		DeleteFunc: func(obj any) {
			if key, had, ok := ports(obj); ok {
				a.recordStatus(key, had, nil)
			}
		},
	}
}

// recordStatus applies one change of key's status.proxyPorts from had to
// has.
func (a *Allocator) recordStatus(key types.NamespacedName, had, has []elastiv1alpha1.ProxyPort) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range has {
		holders := a.recorded[p.ResolverPort]
		if holders == nil {
			holders = map[types.NamespacedName]struct{}{}
			a.recorded[p.ResolverPort] = holders
		}
		holders[key] = struct{}{}
	}
	dropped := droppedPorts(had, has)
	for _, p := range dropped {
		delete(a.recorded[p], key)
		if len(a.recorded[p]) == 0 {
			delete(a.recorded, p)
		}
	}
	a.freeLocked(dropped, a.policy.Clock.Now())
}
