//go:build integration

package controller

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/scaling"
)

// TestWakeDoesNotQueueBehindOtherReconciles: while every reconcile worker
// is held by other ElastiServices' reconciles (their first read hangs, as
// behind a slow API server or a restart's initial list of thousands), an
// activation call is still answered with its target scaled: the wake is
// reconciled on the call's own path, not in the work queue
// (docs/architecture.md, "A wake on its own path"). With the wake only
// enqueued, the call timed out.
func TestWakeDoesNotQueueBehindOtherReconciles(t *testing.T) {
	release := make(chan struct{})
	var held atomic.Int32
	intercept := &interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*elastiv1alpha1.ElastiService); ok && strings.HasPrefix(key.Name, "busy-") {
				held.Add(1)
				defer held.Add(-1)
				select {
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}
	op := startOperator(t, operatorOptions{
		triggers:  newFakeTriggers(scaling.StateIdle),
		intercept: intercept,
		cfg:       func(c *Config) { c.WakeTimeout = 15 * time.Second },
	})
	// Runs before the operator stops (cleanups run last first): the held
	// reconciles return.
	t.Cleanup(func() { close(release) })
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	createDeployment(t, op.ns, "sleeper", 1)
	createService(t, op.ns, "sleeper")
	createES(t, op.ns, "sleeper", "sleeper", "sleeper")
	eventually(t, wait, "asleep", wantReplicas(op.ns, "sleeper", 0))

	workers := int32(DefaultConfig().MaxConcurrentReconciles)
	for i := range 2 * workers {
		name := fmt.Sprintf("busy-%d", i)
		createES(t, op.ns, name, name, name)
	}
	eventually(t, wait, "every reconcile worker held", func() error {
		if n := held.Load(); n < workers {
			return fmt.Errorf("%d reconciles held, want %d", n, workers)
		}
		return nil
	})

	res, err := op.waker.Wake(ctxT(t), types.NamespacedName{Namespace: op.ns, Name: "sleeper"})
	if err != nil {
		t.Fatalf("wake while %d reconcile workers are held by other ElastiServices: %v", workers, err)
	}
	if res.Replicas < 1 {
		t.Fatalf("wake answered with %d replicas", res.Replicas)
	}
	if got := deploymentReplicas(t, op.ns, "sleeper"); got < 1 {
		t.Fatalf("target at %d replicas after the wake was answered", got)
	}
	if n := held.Load(); n < workers {
		t.Fatalf("only %d reconciles held at the end: the wake may have gone through a free worker", n)
	}
}
