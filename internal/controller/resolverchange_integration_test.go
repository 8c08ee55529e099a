//go:build integration

package controller

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/scaling"
)

// TestResolverChangeRefreshesSlicesWithoutReconciles: with twenty
// ElastiServices asleep, a second resolver that becomes ready, and then the
// first that stops being ready, reach every proxy slice through the slice
// refresher (docs/architecture.md, "When the resolvers change"): not one
// reconcile runs for them, and the reconciles' client writes no slice.
// Before, each change reconciled every proxy-mode ElastiService, and each
// reconcile wrote its slice.
func TestResolverChangeRefreshesSlicesWithoutReconciles(t *testing.T) {
	var reconcileReads, sliceWrites atomic.Int32
	intercept := &interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*elastiv1alpha1.ElastiService); ok {
				reconcileReads.Add(1) // each reconcile's first read
			}
			return c.Get(ctx, key, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if _, ok := obj.(*discoveryv1.EndpointSlice); ok {
				sliceWrites.Add(1)
			}
			return c.Update(ctx, obj, opts...)
		},
	}
	op := startOperator(t, operatorOptions{triggers: newFakeTriggers(scaling.StateIdle), intercept: intercept})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	const n = 20
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("app-%d", i)
		createDeployment(t, op.ns, names[i], 1)
		createService(t, op.ns, names[i])
		createES(t, op.ns, names[i], names[i], names[i])
	}
	for _, name := range names {
		eventually(t, wait, name+" asleep behind r1", wantSliceIPs(op.ns, name, "10.0.0.1"))
		eventually(t, wait, name+" at zero", wantReplicas(op.ns, name, 0))
	}
	// Asleep, an ElastiService is reconciled only on events: wait until no
	// reconcile has run for two seconds.
	for last := int32(-1); ; {
		now := reconcileReads.Load()
		if now == last {
			break
		}
		last = now
		time.Sleep(2 * time.Second)
	}
	reads, writes := reconcileReads.Load(), sliceWrites.Load()

	createResolver(t, op.resolverNS, "r2", true, "10.0.0.2")
	for _, name := range names {
		eventually(t, wait, name+" behind r1 and r2", wantSliceIPs(op.ns, name, "10.0.0.1", "10.0.0.2"))
	}
	setResolverStatus(t, op.resolverNS, "r1", false, "10.0.0.1")
	for _, name := range names {
		eventually(t, wait, name+" behind r2 only", wantSliceIPs(op.ns, name, "10.0.0.2"))
	}
	if got := reconcileReads.Load() - reads; got != 0 {
		t.Errorf("%d reconciles ran while the resolvers changed, want 0", got)
	}
	if got := sliceWrites.Load() - writes; got != 0 {
		t.Errorf("the reconciles' client wrote %d proxy slices, want 0", got)
	}
	for _, name := range names {
		if got := deploymentReplicas(t, op.ns, name); got != 0 {
			t.Errorf("%s woken to %d replicas by a resolver change", name, got)
		}
	}
}

// wantSliceIPs: the Service's one proxy slice lists exactly ips.
func wantSliceIPs(ns, service string, ips ...string) func() error {
	return func() error {
		s, err := proxySlicesOf(ns, service)
		if err != nil {
			return err
		}
		if len(s) != 1 {
			return fmt.Errorf("%d proxy slices for %s, want 1", len(s), service)
		}
		var got []string
		for _, ep := range s[0].Endpoints {
			got = append(got, ep.Addresses...)
		}
		slices.Sort(got)
		if !slices.Equal(got, ips) {
			return fmt.Errorf("proxy slice of %s lists %v, want %v", service, got, ips)
		}
		return nil
	}
}
