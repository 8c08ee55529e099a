//go:build integration

package controller

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/scaling"
)

// hangingTriggers say idle at once for the ElastiService named quick, and
// never answer for any other until the evaluation's context ends: a metrics
// backend that hangs.
type hangingTriggers struct {
	quick   string
	hanging atomic.Int32
}

func (h *hangingTriggers) Evaluate(ctx context.Context, es *elastiv1alpha1.ElastiService) scaling.Result {
	if es.Name == h.quick {
		return scaling.Result{State: scaling.StateIdle, Message: "quick idle"}
	}
	h.hanging.Add(1)
	defer h.hanging.Add(-1)
	<-ctx.Done()
	return scaling.Result{State: scaling.StateUnhealthy, Reason: scaling.ReasonQueryFailed, Message: "no answer"}
}

// TestSlowTriggersDoNotDelayAWake: twelve awake ElastiServices whose
// triggers' backend never answers (three times the reconcile workers) do
// not delay another ElastiService's wake: the activation call is answered
// with the target scaled, as it would be alone. Before trigger evaluation
// left the reconcile workers, the hanging evaluations held every worker and
// the wake never came (the call timed out).
func TestSlowTriggersDoNotDelayAWake(t *testing.T) {
	trig := &hangingTriggers{quick: "sleeper"}
	op := startOperator(t, operatorOptions{triggers: trig})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	createDeployment(t, op.ns, "sleeper", 1)
	createService(t, op.ns, "sleeper")
	createES(t, op.ns, "sleeper", "sleeper", "sleeper")
	eventually(t, wait, "asleep", wantReplicas(op.ns, "sleeper", 0))

	const slow = 12
	for i := range slow {
		name := fmt.Sprintf("slow-%d", i)
		createDeployment(t, op.ns, name, 1)
		createService(t, op.ns, name)
		createES(t, op.ns, name, name, name)
	}
	// As many hang as there are reconcile workers: enough to have held
	// every one of them when evaluation ran inside the reconcile.
	workers := int32(DefaultConfig().MaxConcurrentReconciles)
	eventually(t, wait, "slow evaluations hang", func() error {
		if n := trig.hanging.Load(); n < workers {
			return fmt.Errorf("%d evaluations hang, want at least %d", n, workers)
		}
		return nil
	})

	res, err := op.waker.Wake(ctxT(t), types.NamespacedName{Namespace: op.ns, Name: "sleeper"})
	if err != nil {
		t.Fatalf("wake behind %d hanging trigger evaluations: %v", slow, err)
	}
	if res.Replicas < 1 {
		t.Fatalf("wake answered with %d replicas", res.Replicas)
	}
	if got := deploymentReplicas(t, op.ns, "sleeper"); got < 1 {
		t.Fatalf("target at %d replicas after the wake was answered", got)
	}
}
