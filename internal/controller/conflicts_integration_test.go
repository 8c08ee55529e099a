//go:build integration

package controller

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/scaling"
	"elasti.dev/elasti/internal/testenv/estest"
)

// TestRetriedConflictsEmitNoWarning: another writer changes the
// ElastiService right before the sleep's first status write (the one that
// records the proxy ports and mode ahead of the proxy slice), and the proxy
// slice right before the operator rewrites it for a resolver that went
// unready. Both writes then meet a newer version and fail with a conflict;
// the next reconcile writes the status again, and the slice refresher's next
// pass the slice, and both succeed, so neither is news for the user: no
// Warning Event, of any reason, over the sleep, the resolver change and the
// wake.
//
// The helping hand: the other writes are made from inside the operator's
// clients (interceptors on the reconciles' client and on the slice
// refresher's), right before the operator's own, because a conflict is a
// race that a test cannot win on time otherwise.
// TestChurnDuringSleepAndWakeEmitsNoWarning makes the same kind of changes
// without one.
func TestRetriedConflictsEmitNoWarning(t *testing.T) {
	var statusRaced, sliceRaced atomic.Bool
	intercept := &interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if es, ok := obj.(*elastiv1alpha1.ElastiService); ok && sub == "status" &&
				es.Status.Mode == elastiv1alpha1.ModeProxy && statusRaced.CompareAndSwap(false, true) {
				if err := touch(ctx, &elastiv1alpha1.ElastiService{}, client.ObjectKeyFromObject(es)); err != nil {
					return err
				}
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	}
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	sliceWriter := interceptor.NewClient(base, interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if s, ok := obj.(*discoveryv1.EndpointSlice); ok && len(s.Endpoints) == 1 && sliceRaced.CompareAndSwap(false, true) {
				if err := touch(ctx, &discoveryv1.EndpointSlice{}, client.ObjectKeyFromObject(s)); err != nil {
					return err
				}
			}
			return c.Update(ctx, obj, opts...)
		},
	})
	failedBefore := testutil.ToFloat64(sliceRefreshWrites.WithLabelValues("failed"))
	op := startOperator(t, operatorOptions{
		triggers: newFakeTriggers(scaling.StateIdle), intercept: intercept,
		deps: func(d *Deps) { d.SliceWriter = sliceWriter },
	})
	key := appBehindTwoResolvers(t, op)

	eventually(t, wait, "scaled to zero", wantReplicas(op.ns, "app", 0))
	eventually(t, wait, "proxy", wantMode(op.ns, "app", elastiv1alpha1.ModeProxy))
	setResolverStatus(t, op.resolverNS, "r2", false, "10.0.0.2")
	eventually(t, wait, "the proxy slice lists r1 alone", func() error {
		slices, err := proxySlicesOf(op.ns, "app")
		if err != nil {
			return err
		}
		if len(slices) != 1 || len(slices[0].Endpoints) != 1 || slices[0].Endpoints[0].Addresses[0] != "10.0.0.1" {
			return fmt.Errorf("proxy slices %+v", slices)
		}
		return nil
	})
	if _, err := op.waker.Wake(ctxT(t), key); err != nil {
		t.Fatalf("wake: %v", err)
	}
	eventually(t, wait, "woken", wantReplicas(op.ns, "app", 1))

	if !statusRaced.Load() || !sliceRaced.Load() {
		t.Fatalf("the other writer did not get in: before the status write %v, before the slice write %v", statusRaced.Load(), sliceRaced.Load())
	}
	if n := testutil.ToFloat64(writeConflicts.WithLabelValues(op.ns, "app")); n < 1 {
		t.Fatalf("%v write conflicts counted, want at least the one provoked on the status", n)
	}
	if n := testutil.ToFloat64(sliceRefreshWrites.WithLabelValues("failed")) - failedBefore; n < 1 {
		t.Fatalf("%v failed proxy slice writes counted, want at least the one provoked", n)
	}
	noWarnings(t, op.ns, "app")
}

// touch sets an annotation on the object at key, as another writer would:
// its resourceVersion moves on.
func touch(ctx context.Context, obj client.Object, key client.ObjectKey) error {
	obj.SetNamespace(key.Namespace)
	obj.SetName(key.Name)
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{"test.elasti.dev/touched":"%d"}}}`, time.Now().UnixNano()))
	return k8s.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
}

// noWarnings checks that no Warning Event regards the ElastiService name,
// for long enough that the recorder has written what it was given.
func noWarnings(t *testing.T, ns, name string) {
	t.Helper()
	never(t, 2*time.Second, "no Warning Event", func() error {
		list := &eventsv1.EventList{}
		if err := k8s.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range list.Items {
			// Only the ElastiService's: the API server itself may warn about
			// the Service of the same name (its ClusterIP repair loop does,
			// on a busy machine).
			if e.Type == corev1.EventTypeWarning && e.Regarding.Kind == "ElastiService" && e.Regarding.Name == name {
				return fmt.Errorf("warning Event %s: %s", e.Reason, e.Note)
			}
		}
		return nil
	})
}

// TestChurnDuringSleepAndWakeEmitsNoWarning: a sleep and a wake while a
// resolver keeps changing and another writer keeps touching the
// ElastiService, with no help: whatever conflicts the operator's writes meet
// are retried without a Warning Event.
func TestChurnDuringSleepAndWakeEmitsNoWarning(t *testing.T) {
	op := startOperator(t, operatorOptions{triggers: newFakeTriggers(scaling.StateIdle)})
	key := appBehindTwoResolvers(t, op)

	// The churn: resolver r2 goes unready and ready again, and an annotation
	// on the ElastiService changes, every few milliseconds. Each change
	// brings a reconcile, often before the operator's cache has its own
	// last write; each annotation write makes the status version the
	// operator read an old one.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	churnErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			if err := churn(ctx, op.resolverNS, key, i); err != nil && ctx.Err() == nil {
				churnErr <- err
				return
			}
			time.Sleep(15 * time.Millisecond)
		}
	}()
	stopChurn := func() {
		stop()
		wg.Wait()
		select {
		case err := <-churnErr:
			t.Fatalf("churn: %v", err)
		default:
		}
	}
	defer stopChurn()

	eventually(t, wait, "scaled to zero", wantReplicas(op.ns, "app", 0))
	eventually(t, wait, "proxy", wantMode(op.ns, "app", elastiv1alpha1.ModeProxy))
	// Asleep, every flip of r2 rewrites the proxy slice, often from a cached
	// copy older than the operator's last write of it.
	never(t, 3*time.Second, "asleep while the resolvers change", wantReplicas(op.ns, "app", 0))
	if _, err := op.waker.Wake(ctxT(t), key); err != nil {
		t.Fatalf("wake: %v", err)
	}
	eventually(t, wait, "woken", wantReplicas(op.ns, "app", 1))
	stopChurn()

	// Conflicts here are a matter of timing; the count is logged, and
	// TestRetriedConflictsEmitNoWarning provokes them for sure.
	t.Logf("write conflicts retried: %v", testutil.ToFloat64(writeConflicts.WithLabelValues(op.ns, "app")))
	noWarnings(t, op.ns, "app")
}

// churn makes one round of changes for
// TestChurnDuringSleepAndWakeEmitsNoWarning:
// resolver r2's readiness flips, and the ElastiService's annotation
// test.elasti.dev/churn takes the value i.
func churn(ctx context.Context, resolverNS string, es types.NamespacedName, i int) error {
	pod := &corev1.Pod{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: resolverNS, Name: "r2"}, pod); err != nil {
		return err
	}
	ready := corev1.ConditionTrue
	if i%2 == 1 {
		ready = corev1.ConditionFalse
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}
	if err := k8s.Status().Update(ctx, pod); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("flip resolver r2: %w", err)
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{"test.elasti.dev/churn":"%d"}}}`, i))
	obj := &elastiv1alpha1.ElastiService{}
	obj.Namespace, obj.Name = es.Namespace, es.Name
	if err := k8s.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("annotate the ElastiService: %w", err)
	}
	return nil
}

// appBehindTwoResolvers creates the ready resolvers r1 (10.0.0.1) and r2
// (10.0.0.2), and a Deployment of one replica, a Service and an
// ElastiService, all named app; opts adjust the ElastiService.
func appBehindTwoResolvers(t *testing.T, op *operator, opts ...estest.Option) types.NamespacedName {
	t.Helper()
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	createResolver(t, op.resolverNS, "r2", true, "10.0.0.2")
	createDeployment(t, op.ns, "app", 1)
	createService(t, op.ns, "app")
	createES(t, op.ns, "app", "app", "app", opts...)
	return types.NamespacedName{Namespace: op.ns, Name: "app"}
}
