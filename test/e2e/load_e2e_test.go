//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// loadGen sends GETs at a fixed rate, each on a new connection from the
// node's network (so every request takes kube-proxy's current route), until
// stopped or until max requests have been sent. It never sends more than
// limit: the load is bounded whatever happens to the test.
type loadGen struct {
	sent, ok atomic.Int64
	mu       sync.Mutex
	failures []string
	slowest  time.Duration
	stop     chan struct{}
	done     sync.WaitGroup
}

func startLoad(e *Env, url string, rps int, limit int64) *loadGen {
	g := &loadGen{stop: make(chan struct{})}
	c := e.LongHTTPClient()
	tick := time.NewTicker(time.Second / time.Duration(rps))
	g.done.Add(1)
	go func() {
		defer g.done.Done()
		defer tick.Stop()
		for g.sent.Load() < limit {
			select {
			case <-g.stop:
				return
			case <-tick.C:
			}
			g.sent.Add(1)
			g.done.Add(1)
			go func() {
				defer g.done.Done()
				t0 := time.Now()
				_, err := GetWith(context.Background(), c, url, "")
				d := time.Since(t0)
				g.mu.Lock()
				defer g.mu.Unlock()
				if err != nil {
					g.failures = append(g.failures, fmt.Sprintf("%s: %v", t0.Format("15:04:05.000"), err))
					return
				}
				g.ok.Add(1)
				g.slowest = max(g.slowest, d)
			}()
		}
	}()
	return g
}

// finish stops sending and waits for the requests in flight.
func (g *loadGen) finish() {
	close(g.stop)
	g.done.Wait()
}

// TestNoLossUnderLoad is the invariant: with steady traffic (50 requests a
// second) the service goes through five sleep/wake cycles and not one
// request fails.
//
// The trigger query always says idle, so the operator puts the target to
// sleep as soon as each cooldown ends, and the steady traffic wakes it at
// once: each cycle is cooldown (5s) + grace period + wake.
func TestNoLossUnderLoad(t *testing.T) {
	e := Get(t)
	e.InstallElasti(t)
	ns := e.NewNamespace(t)
	// The demo app drains on SIGTERM (it keeps accepting for 3 s), as a
	// well-behaved workload does; no preStop hook is needed.
	e.Create(t, DemoAppDeployment(ns, "demoapp", 1), DemoAppService(ns, "demoapp"))
	e.WaitReadyEndpoints(t, ns, "demoapp", 1, 2*time.Minute)
	var svc corev1.Service
	if err := e.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "demoapp"}, &svc); err != nil {
		t.Fatal(err)
	}
	url := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(DemoHTTPPort)) + "/"
	Eventually(t, 30*time.Second, 200*time.Millisecond, func(ctx context.Context) error {
		_, err := e.HTTPGet(ctx, url)
		return err
	})

	const cycles, rps = 5, 50
	// Bounded: at most 6 minutes of traffic at 50 rps.
	load := startLoad(e, url, rps, 6*60*rps)
	e.Create(t, e.ElastiServiceFor(ns, "demoapp", IdleQuery))

	start := time.Now()
	var downs []time.Time
	Eventually(t, 5*time.Minute, 100*time.Millisecond, func(ctx context.Context) error {
		es, err := e.GetElastiService(ctx, ns, "demoapp")
		if err != nil {
			return err
		}
		if ts := es.Status.LastScaledDownTime; ts != nil && (len(downs) == 0 || ts.After(downs[len(downs)-1])) {
			downs = append(downs, ts.Time)
			t.Logf("cycle %d: scaled to zero at %s (%s into the test), %d requests so far",
				len(downs), ts.Format("15:04:05"), time.Since(start).Round(time.Second), load.sent.Load())
		}
		if len(downs) < cycles {
			return fmt.Errorf("%d sleep/wake cycles so far, want %d", len(downs), cycles)
		}
		return nil
	})
	// Stay awake, and let the last wake finish under load.
	e.SetQuery(t, ns, "demoapp", BusyQuery)
	e.WaitAwake(t, ns, "demoapp", 2*time.Minute)
	load.finish()

	t.Logf("%d requests over %s through %d sleep/wake cycles: %d ok, %d failed, slowest %s",
		load.sent.Load(), time.Since(start).Round(time.Second), len(downs), load.ok.Load(), len(load.failures), load.slowest.Round(time.Millisecond))
	for i, f := range load.failures {
		if i == 10 {
			t.Errorf("... and %d more", len(load.failures)-10)
			break
		}
		t.Errorf("failed request at %s", f)
	}
}
