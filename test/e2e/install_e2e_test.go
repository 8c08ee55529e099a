//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/memlimit"
)

// TestInstall proves the user's install path: `kubectl apply -k` of an
// overlay of config/default brings up two operator replicas, one of which
// holds the leader Lease, and the resolvers, all Ready.
func TestInstall(t *testing.T) {
	e := Get(t)
	start := time.Now()
	e.InstallElasti(t)
	t.Logf("Elasti installed and ready after %s", time.Since(start).Round(10*time.Millisecond))

	ctx := context.Background()
	for _, c := range []struct {
		component string
		want      int
	}{{contract.ComponentOperator, 2}, {contract.ComponentResolver, 2}} {
		pods, err := e.Pods(ctx, ElastiNamespace, map[string]string{contract.LabelComponent: c.component})
		if err != nil {
			t.Fatal(err)
		}
		ready := 0
		for _, p := range pods {
			for _, cond := range p.Status.Conditions {
				if cond.Type == "Ready" && cond.Status == "True" {
					ready++
				}
			}
		}
		if ready < c.want {
			t.Errorf("%d ready %s pods, want %d", ready, c.component, c.want)
		}
	}

	// The resolvers' Go runtime has a soft memory limit of 90% of the
	// container's 512Mi (ELASTI_MEMORY_LIMIT from the downward API).
	limits, err := e.ResolverMetric(ctx, "go_gc_gomemlimit_bytes")
	if err != nil {
		t.Fatal(err)
	}
	for pod, v := range limits {
		if want := float64(512<<20) * memlimit.Share; v != math.Floor(want) {
			t.Errorf("resolver %s: go_gc_gomemlimit_bytes %.0f, want %.0f", pod, v, math.Floor(want))
		}
	}

	// Leader election: one Lease names one of the operator pods.
	Eventually(t, time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
		holder, err := e.OperatorLeader(ctx)
		if err != nil {
			return err
		}
		pods, err := e.Pods(ctx, ElastiNamespace, map[string]string{contract.LabelComponent: contract.ComponentOperator})
		if err != nil {
			return err
		}
		for _, p := range pods {
			if p.Name == holder {
				t.Logf("operator leader: %s", holder)
				return nil
			}
		}
		return fmt.Errorf("lease holder %q is not an operator pod", holder)
	})
}

// OperatorLeader returns the pod name in the shared install's leader Lease.
func (e *Env) OperatorLeader(ctx context.Context) (string, error) {
	return e.OperatorLeaderIn(ctx, ElastiNamespace)
}

// OperatorLeaderIn returns the pod name in the leader Lease of the operator
// installed in ns.
func (e *Env) OperatorLeaderIn(ctx context.Context, ns string) (string, error) {
	var lease coordinationv1.Lease
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "elasti-operator.elasti.dev"}, &lease); err != nil {
		return "", err
	}
	holder := ptr.Deref(lease.Spec.HolderIdentity, "")
	if holder == "" {
		return "", errors.New("the leader lease has no holder")
	}
	// controller-runtime's identity is "<hostname>_<uuid>".
	for i := len(holder) - 1; i >= 0; i-- {
		if holder[i] == '_' {
			return holder[:i], nil
		}
	}
	return holder, nil
}
