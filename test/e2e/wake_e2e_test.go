//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/controller"
)

// demoApp installs Elasti and creates the demo app (its Deployment adjusted
// by opts) and its Service, waits until it is Ready, and returns its
// namespace and ClusterIP. No ElastiService yet.
func demoApp(t *testing.T, e *Env, opts ...func(*appsv1.Deployment)) (string, string) {
	t.Helper()
	e.InstallElasti(t)
	ns := e.NewNamespace(t)
	d := DemoAppDeployment(ns, "demoapp", 1)
	for _, o := range opts {
		o(d)
	}
	e.Create(t, d, DemoAppService(ns, "demoapp"))
	e.WaitReadyEndpoints(t, ns, "demoapp", 1, 2*time.Minute)
	var svc corev1.Service
	if err := e.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "demoapp"}, &svc); err != nil {
		t.Fatal(err)
	}
	return ns, svc.Spec.ClusterIP
}

// sleepyDemoApp is demoApp with an ElastiService whose trigger is query.
func sleepyDemoApp(t *testing.T, e *Env, query func(ns string) string, opts ...func(*appsv1.Deployment)) (string, string) {
	t.Helper()
	ns, ip := demoApp(t, e, opts...)
	e.Create(t, e.ElastiServiceFor(ns, "demoapp", query(ns)))
	return ns, ip
}

func idle(string) string { return IdleQuery }

// TestScaleToZero: an idle demo app, as Prometheus sees it, is put to sleep
// once the cooldown has passed: proxy slice, zero replicas, proxy mode, and
// Events saying so.
func TestScaleToZero(t *testing.T) {
	t.Parallel()
	e := Get(t)
	ns, _ := sleepyDemoApp(t, e, func(ns string) string { return RequestRateQuery(ns, "demoapp") })
	start := time.Now()
	e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)
	t.Logf("asleep %s after the ElastiService was created (cooldown 5s)", time.Since(start).Round(10*time.Millisecond))

	ctx := context.Background()
	es, err := e.GetElastiService(ctx, ns, "demoapp")
	if err != nil {
		t.Fatal(err)
	}
	if es.Status.LastScaledDownTime == nil {
		t.Error("status.lastScaledDownTime is not set")
	}
	if len(es.Status.ProxyPorts) != 3 {
		t.Errorf("status.proxyPorts = %v, want one per Service port (3)", es.Status.ProxyPorts)
	}
	slices, err := e.ProxySlices(ctx, ns, "demoapp")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range slices {
		if len(s.Ports) != 3 {
			t.Errorf("proxy slice %s has %d ports, want 3", s.Name, len(s.Ports))
		}
		if len(s.OwnerReferences) == 0 || s.OwnerReferences[0].Kind != "ElastiService" {
			t.Errorf("proxy slice %s is not owned by the ElastiService: %v", s.Name, s.OwnerReferences)
		}
	}
	for _, reason := range []string{controller.EventScaledToZero, controller.EventModeChanged} {
		Eventually(t, 30*time.Second, 250*time.Millisecond, func(ctx context.Context) error {
			n, err := e.EventCount(ctx, ns, "demoapp", reason)
			if err != nil {
				return err
			}
			if n == 0 {
				return fmt.Errorf("no %s Event", reason)
			}
			return nil
		})
	}
}

// TestWakeFromEveryCaller: a request at zero is held, wakes the target and
// is answered, whichever way the caller named the Service.
func TestWakeFromEveryCaller(t *testing.T) {
	t.Parallel()
	e := Get(t)
	ns, clusterIP := sleepyDemoApp(t, e, idle)
	port := fmt.Sprint(DemoHTTPPort)
	fqdn := "demoapp." + ns + ".svc.cluster.local"
	callers := []struct {
		name, url, host string
	}{
		{"ClusterIP", "http://" + net.JoinHostPort(clusterIP, port) + "/", ""},
		{"full DNS name", "http://" + net.JoinHostPort(fqdn, port) + "/", ""},
		// A pod in ns asking for "demoapp" gets it through its resolv.conf
		// search path (ns.svc.cluster.local first) and sends Host: demoapp.
		{"short name from the namespace", "http://" + net.JoinHostPort(searchPath(t, e, ns, "demoapp"), port) + "/", "demoapp"},
		{"arbitrary Host header", "http://" + net.JoinHostPort(clusterIP, port) + "/", "shop.example.com"},
	}
	for _, c := range callers {
		t.Run(c.name, func(t *testing.T) {
			e.SetQuery(t, ns, "demoapp", IdleQuery)
			e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)
			// Keep it awake once woken, so the request is the only wake.
			e.SetQuery(t, ns, "demoapp", BusyQuery)
			start := time.Now()
			body, err := GetWith(context.Background(), e.LongHTTPClient(), c.url, c.host)
			if err != nil {
				t.Fatalf("request at zero via %s: %v", c.name, err)
			}
			t.Logf("request at zero via %s answered in %s", c.name, time.Since(start).Round(time.Millisecond))
			if !strings.HasPrefix(body, "hello from demoapp") {
				t.Errorf("body %q", body)
			}
			e.WaitAwake(t, ns, "demoapp", time.Minute)
		})
	}
}

// searchPath resolves short name as a pod in ns would: the first search
// domain of its resolv.conf that answers.
func searchPath(t *testing.T, e *Env, ns, short string) string {
	t.Helper()
	for _, domain := range []string{ns + ".svc.cluster.local", "svc.cluster.local", "cluster.local"} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		addrs, err := e.Dialer.Resolver().LookupHost(ctx, short+"."+domain+".")
		cancel()
		if err == nil && len(addrs) > 0 {
			return addrs[0]
		}
	}
	t.Fatalf("%s does not resolve from namespace %s", short, ns)
	return ""
}

// TestBurstAtZero: 500 concurrent requests at zero all succeed, after one
// scale-up, and the resolvers return the memory their hold used.
//
// The demo app takes 3 s to start listening, so that the whole burst is
// held: with an app that starts at once, a fresh CI run (the other tiers
// beside it) once had the app ready before its slow client had sent enough
// requests for either resolver to hold the 100 after which it returns its
// memory. TestWakeFromEveryCaller and others wake an app that starts at
// once.
func TestBurstAtZero(t *testing.T) {
	e := Get(t)
	ns, clusterIP := sleepyDemoApp(t, e, idle, withEnv("STARTUP_DELAY", "3s"))
	e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)
	e.SetQuery(t, ns, "demoapp", BusyQuery)
	ctx := context.Background()
	_, genBefore, err := e.Replicas(ctx, ns, "demoapp")
	if err != nil {
		t.Fatal(err)
	}
	wokeBefore, err := e.EventCount(ctx, ns, "demoapp", controller.EventWoke)
	if err != nil {
		t.Fatal(err)
	}
	returnsBefore, err := e.ResolverMetric(ctx, "elasti_resolver_memory_returns_total")
	if err != nil {
		t.Fatal(err)
	}

	const n = 500
	url := "http://" + net.JoinHostPort(clusterIP, fmt.Sprint(DemoHTTPPort)) + "/"
	c := e.LongHTTPClient()
	var wg sync.WaitGroup
	var failed atomic.Int32
	var slowest atomic.Int64
	errs := make(chan error, n)
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			if _, err := GetWith(ctx, c, url, ""); err != nil {
				failed.Add(1)
				errs <- fmt.Errorf("after %s: %w", time.Since(t0).Round(time.Millisecond), err)
				return
			}
			if d := int64(time.Since(t0)); d > slowest.Load() {
				slowest.Store(d)
			}
		}()
	}
	wg.Wait()
	close(errs)
	t.Logf("%d concurrent requests at zero: %d failed, all done in %s, slowest %s", n, failed.Load(),
		time.Since(start).Round(time.Millisecond), time.Duration(slowest.Load()).Round(time.Millisecond))
	shown := 0
	for err := range errs {
		if shown++; shown <= 5 {
			t.Errorf("request failed: %v", err)
		}
	}
	if failed.Load() > 0 {
		t.Fatalf("%d of %d requests failed", failed.Load(), n)
	}

	replicas, genAfter, err := e.Replicas(ctx, ns, "demoapp")
	if err != nil {
		t.Fatal(err)
	}
	if replicas != 1 || genAfter-genBefore != 1 {
		t.Errorf("after the burst: %d replicas, %d scale changes; want 1 replica after exactly one scale-up", replicas, genAfter-genBefore)
	}
	// One scale-up is one change of the Deployment's spec (its generation).
	// Woke Events are only logged: the events API folds repeated identical
	// Events into one series, so their count proves little here.
	if woke, err := e.EventCount(ctx, ns, "demoapp", controller.EventWoke); err == nil {
		t.Logf("Woke events during the burst: %d", woke-wokeBefore)
	}
	// The hold drained: the resolvers return the heap it used to the OS
	// (--memory-return-peak=100 in the e2e overlay, 10 s after the drain).
	Eventually(t, time.Minute, time.Second, func(ctx context.Context) error {
		after, err := e.ResolverMetric(ctx, "elasti_resolver_memory_returns_total")
		if err != nil {
			return err
		}
		returned := 0.0
		for pod, v := range after {
			returned += v - returnsBefore[pod]
		}
		if returned < 1 {
			return fmt.Errorf("no resolver returned its memory after the burst: %v (before: %v)", after, returnsBefore)
		}
		t.Logf("memory returns after the burst, per resolver: %v (before: %v)", after, returnsBefore)
		return nil
	})
	es, err := e.GetElastiService(ctx, ns, "demoapp")
	if err != nil {
		t.Fatal(err)
	}
	if es.Status.Mode == elastiv1alpha1.ModeProxy {
		e.WaitAwake(t, ns, "demoapp", time.Minute)
	}
}
