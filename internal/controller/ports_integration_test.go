//go:build integration

package controller

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/controller/plan"
	"elasti.dev/elasti/internal/scaling"
)

// TestPortWaiterWokenWhenPortFrees: an ElastiService the range has no room
// for gets the port of a deleted one as soon as its quarantine is over (not
// before), through an event. No timer can help it: the polling interval is
// an hour and it has no triggers. This test used to expect the port at once;
// since freed ports are quarantined it expects it when the quarantine ends.
func TestPortWaiterWokenWhenPortFrees(t *testing.T) {
	const quarantine = 3 * time.Second
	op := startOperator(t, operatorOptions{
		triggers: newFakeTriggers(scaling.StateActive),
		cfg: func(c *Config) {
			c.PortRangeStart, c.PortRangeEnd = 22000, 22001
			c.PollingInterval = time.Hour
			c.PortQuarantine = quarantine
		},
	})
	noTriggers := func(es *elastiv1alpha1.ElastiService) { es.Spec.Triggers = nil }
	for _, name := range []string{"a", "b"} {
		createService(t, op.ns, name)
		createES(t, op.ns, name, name, name, noTriggers)
		eventually(t, wait, name+" has a port", wantPorts(op.ns, name, 1))
	}
	createService(t, op.ns, "c")
	createES(t, op.ns, "c", "c", "c", noTriggers)
	eventually(t, wait, "c waits", wantCondition(op.ns, "c", elastiv1alpha1.ConditionReady, metav1.ConditionFalse, plan.ReasonPortsExhausted))

	victim := getES(t, op.ns, "a")
	freed := victim.Status.ProxyPorts[0].ResolverPort
	start := time.Now()
	if err := k8s.Delete(context.Background(), victim); err != nil {
		t.Fatal(err)
	}
	eventually(t, wait, "c gets the freed port", func() error {
		es := getES(t, op.ns, "c")
		if len(es.Status.ProxyPorts) != 1 || es.Status.ProxyPorts[0].ResolverPort != freed {
			return fmt.Errorf("c has %+v, want port %d", es.Status.ProxyPorts, freed)
		}
		return nil
	})
	took := time.Since(start)
	t.Logf("c got port %d %s after a's deletion", freed, took.Round(time.Millisecond))
	if took < quarantine {
		t.Fatalf("c got the freed port %s after a's deletion, inside the %s quarantine", took, quarantine)
	}
	eventually(t, wait, "c ready", wantCondition(op.ns, "c", elastiv1alpha1.ConditionReady, metav1.ConditionFalse, plan.ReasonTargetNotFound))
}

// TestStartupListNotStarved: ElastiServices that exist when the operator
// starts get reconciled (and get ports) even while others keep the work
// queue busy. With controller-runtime's priority queue they never did: the
// initial list is enqueued at low priority, and ElastiServices polling
// their triggers kept normal-priority work ready forever.
func TestStartupListNotStarved(t *testing.T) {
	gate := &gatedScaler{entered: make(chan struct{}), open: make(chan struct{})}
	op := startOperator(t, operatorOptions{
		triggers: newFakeTriggers(scaling.StateActive),
		deps:     func(d *Deps) { d.Scaler = gate },
		cfg: func(c *Config) {
			c.PortRangeStart, c.PortRangeEnd = 23000, 23999
			c.PollingInterval = time.Millisecond
			c.MaxConcurrentReconciles = 1
			// Before the manager starts: these come in the initial list.
			for _, name := range []string{"early-a", "early-b"} {
				createService(t, c.WatchNamespaces[0], name)
				createES(t, c.WatchNamespaces[0], name, name, name)
			}
		},
	})
	// The single worker holds the first early ElastiService in the gate
	// while busy ones, which poll every millisecond, join the queue.
	select {
	case <-gate.entered:
	case <-time.After(wait):
		t.Fatal("no reconcile reached the scaler")
	}
	const busy = 100
	for i := 0; i < busy; i++ {
		createES(t, op.ns, fmt.Sprintf("busy-%02d", i), "none", "none")
	}
	eventually(t, wait, "busy ones in the cache", func() error {
		list := &elastiv1alpha1.ElastiServiceList{}
		if err := op.mgr.GetCache().List(context.Background(), list); err != nil {
			return err
		}
		if len(list.Items) != busy+2 {
			return fmt.Errorf("%d ElastiServices cached", len(list.Items))
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond) // let the event handlers enqueue them
	close(gate.open)

	for _, name := range []string{"early-a", "early-b"} {
		eventually(t, 15*time.Second, name+" has a port", wantPorts(op.ns, name, 1))
	}
}

// gatedScaler holds the first Replicas call until open is closed; every
// target is missing.
type gatedScaler struct {
	once    sync.Once
	entered chan struct{}
	open    chan struct{}
}

func (g *gatedScaler) Replicas(_ context.Context, _ string, ref elastiv1alpha1.ScaleTargetRef) (int32, error) {
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.entered)
		<-g.open
	}
	return 0, apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "deployments"}, ref.Name)
}

func (g *gatedScaler) Scale(context.Context, string, elastiv1alpha1.ScaleTargetRef, int32) error {
	return nil
}

func (g *gatedScaler) ScaleFromZero(context.Context, string, elastiv1alpha1.ScaleTargetRef, int32) (bool, error) {
	return false, nil
}

func (g *gatedScaler) ScaleToZero(context.Context, string, elastiv1alpha1.ScaleTargetRef, int32) (bool, error) {
	return false, nil
}

func wantPorts(ns, name string, n int) func() error {
	return func() error {
		es := &elastiv1alpha1.ElastiService{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, es); err != nil {
			return err
		}
		if len(es.Status.ProxyPorts) != n {
			return fmt.Errorf("%s has ports %+v, want %d", name, es.Status.ProxyPorts, n)
		}
		return nil
	}
}
