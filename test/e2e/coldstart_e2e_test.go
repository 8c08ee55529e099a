//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// updateDeployment applies mutate to Deployment ns/name, retrying on
// conflicts.
func (e *Env) updateDeployment(t testing.TB, ns, name string, mutate func(*appsv1.Deployment)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var d appsv1.Deployment
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d); err != nil {
			return err
		}
		mutate(&d)
		return e.Client.Update(ctx, &d)
	})
	if err != nil {
		t.Fatalf("update Deployment %s/%s: %v", ns, name, err)
	}
}

// keepAliveClient is an HTTP client that reuses its connection, as
// browsers and SDKs do, with a timeout of d.
func (e *Env) keepAliveClient(d time.Duration) *http.Client {
	return &http.Client{Timeout: d, Transport: &http.Transport{DialContext: e.Dialer.DialContext, MaxConnsPerHost: 1}}
}

// postWithBody POSTs body to url with c and checks that the app saw all of
// it: its answer names the body's length and SHA-256.
func postWithBody(ctx context.Context, c *http.Client, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	want := fmt.Sprintf("body %d bytes sha256 %x", len(body), sha256.Sum256(body))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(got), want) {
		return fmt.Errorf("POST: %s, body %q; want 200 with %q", resp.Status, got, want)
	}
	return nil
}

// TestThreeMinuteColdStart: a target that takes three minutes to become
// ready (the demo app's startup delay) is woken by an HTTP POST with a body
// on a keep-alive connection, a gRPC call and a TCP connection, all opened
// at zero. spec.proxy.holdTimeout (10m) is above the resolver's default
// (5m) and the delay, and the trigger says idle the whole time: the target
// must not be put back to sleep while it wakes, and all three must be
// answered after the delay, not before.
func TestThreeMinuteColdStart(t *testing.T) {
	t.Parallel()
	const delay = 3 * time.Minute
	e := Get(t)
	ns, ip := demoApp(t, e)
	es := e.ElastiServiceFor(ns, "demoapp", IdleQuery)
	es.Spec.Proxy = &elastiv1alpha1.ProxySpec{HoldTimeout: "10m"}
	e.Create(t, es)
	e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)
	// The delay goes in while the target is at zero, so no pod restarts
	// with it before the test's requests.
	e.updateDeployment(t, ns, "demoapp", withEnv("STARTUP_DELAY", delay.String()))
	time.Sleep(2 * time.Second)
	if n, _, err := e.Replicas(context.Background(), ns, "demoapp"); err != nil || n != 0 {
		t.Fatalf("the target has %d replicas (%v) after its template changed at zero, want 0", n, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), delay+3*time.Minute)
	defer cancel()
	// Watch the target through the wake: once it has replicas, it must keep
	// them until every call is answered.
	stopWatch := make(chan struct{})
	var watchErr error
	var watched sync.WaitGroup
	watched.Go(func() {
		woken := false
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(time.Second):
			}
			n, _, err := e.Replicas(ctx, ns, "demoapp")
			switch {
			case err != nil:
				continue
			case n > 0:
				woken = true
			case woken && watchErr == nil:
				watchErr = fmt.Errorf("the target was put back to zero at %s, during its wake", time.Now().Format(time.RFC3339))
			}
		}
	})

	start := time.Now()
	calls := map[string]func(ctx context.Context) error{
		"http POST": func(ctx context.Context) error {
			body := []byte(strings.Repeat("a cold start of three minutes\n", 2000))
			return postWithBody(ctx, e.keepAliveClient(delay+3*time.Minute), httpURL(ip, DemoHTTPPort), body)
		},
		"grpc": func(ctx context.Context) error { return e.grpcEcho(ctx, ip, "slow") },
		"tcp":  func(ctx context.Context) error { return e.tcpEcho(ctx, ip, "held") },
	}
	type result struct {
		name string
		err  error
		took time.Duration
	}
	results := make(chan result, len(calls))
	for name, call := range calls {
		go func() {
			err := call(ctx)
			results <- result{name, err, time.Since(start)}
		}()
	}
	for range calls {
		r := <-results
		switch {
		case r.err != nil:
			t.Errorf("%s held across a %s cold start failed after %s: %v", r.name, delay, r.took.Round(time.Millisecond), r.err)
		case r.took < delay:
			t.Errorf("%s answered after %s, before the %s startup delay ended: not held by the cold start", r.name, r.took.Round(time.Millisecond), delay)
		default:
			t.Logf("%s answered after %s", r.name, r.took.Round(time.Millisecond))
		}
	}
	close(stopWatch)
	watched.Wait()
	if watchErr != nil {
		t.Error(watchErr)
	}
}

// TestLedgerAgreesWithMeasured: the test puts the target to sleep, keeps it
// at zero for a measured while, wakes it with one request (the app boots in
// 8 s) and reads status.ledger: the time at zero, the sleeps and wakes, the
// phases of the cold start and the CPU and memory not reserved must agree
// with the clock of the test, to the second the status keeps.
func TestLedgerAgreesWithMeasured(t *testing.T) {
	t.Parallel()
	const boot = 8 * time.Second
	e := Get(t)
	ns, ip := demoApp(t, e, withEnv("STARTUP_DELAY", boot.String()), func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("32Mi"),
		}
	})
	ctx := context.Background()
	idleSet := time.Now()
	e.Create(t, e.ElastiServiceFor(ns, "demoapp", IdleQuery))
	e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)
	asleepSeen := time.Now()
	before, err := e.GetElastiService(ctx, ns, "demoapp")
	if err != nil {
		t.Fatal(err)
	}
	l0 := before.Status.Ledger
	if l0 == nil || l0.AtZeroSince == nil || l0.Asleep == nil {
		t.Fatalf("asleep, status.ledger = %+v; want atZeroSince and asleep set", l0)
	}
	if s := l0.AtZeroSince.Time; s.Before(idleSet.Add(-time.Second)) || s.After(asleepSeen) {
		t.Errorf("ledger.atZeroSince %s is outside the test's window [%s, %s]", s, idleSet, asleepSeen)
	}
	if l0.Asleep.Replicas != 1 || l0.Asleep.CPU == nil || l0.Asleep.CPU.MilliValue() != 50 || l0.Asleep.Memory == nil || l0.Asleep.Memory.Value() != 32<<20 {
		t.Errorf("ledger.asleep = %+v; want 1 replica of 50m CPU and 32Mi", l0.Asleep)
	}

	// A measured while at zero.
	time.Sleep(20 * time.Second)
	e.SetQuery(t, ns, "demoapp", BusyQuery)
	sent := time.Now()
	if _, err := GetWith(ctx, e.LongHTTPClient(), httpURL(ip, DemoHTTPPort), ""); err != nil {
		t.Fatalf("request at zero: %v", err)
	}
	answered := time.Now()
	t.Logf("at zero from about %s to %s; the request took %s", l0.AtZeroSince.Format(time.TimeOnly), sent.Format(time.TimeOnly), answered.Sub(sent).Round(time.Millisecond))

	var after *elastiv1alpha1.ElastiService
	Eventually(t, time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
		after, err = e.GetElastiService(ctx, ns, "demoapp")
		if err != nil {
			return err
		}
		if l := after.Status.Ledger; l == nil || l.LastColdStart == nil || l.LastColdStart.ReadyTime == nil {
			return fmt.Errorf("ledger has no finished cold start yet: %+v", l)
		}
		return nil
	})
	l := after.Status.Ledger
	if l.Wakes != l0.Wakes+1 || l.Sleeps != l0.Sleeps {
		t.Errorf("wakes %d -> %d, sleeps %d -> %d; want one wake and no sleep more", l0.Wakes, l.Wakes, l0.Sleeps, l.Sleeps)
	}
	if l.AtZeroSince != nil {
		t.Errorf("ledger.atZeroSince = %s after the wake, want unset", l.AtZeroSince)
	}
	// The period ran from the scale-down (between idleSet and asleepSeen)
	// to the scale-up write (between sent and answered); the status keeps
	// whole seconds.
	period := l.SecondsAtZero - l0.SecondsAtZero
	lo, hi := int64(sent.Sub(asleepSeen).Seconds())-1, int64(answered.Sub(idleSet).Seconds())+1
	if period < lo || period > hi {
		t.Errorf("the period at zero added %d s to ledger.secondsAtZero; the test measured between %d and %d s", period, lo, hi)
	}
	// Savings: 50m CPU and 32Mi for each second of the period.
	if cpu := l.Saved.CPUCoreSeconds; cpu == nil {
		t.Error("ledger.saved.cpuCoreSeconds unset")
	} else if got, want := cpu.AsApproximateFloat64(), 0.05*float64(l.SecondsAtZero); got < want-0.05 || got > want+0.05 {
		t.Errorf("ledger.saved.cpuCoreSeconds = %s, want 0.05 x %d s = %.2f", cpu, l.SecondsAtZero, want)
	}
	if mem := l.Saved.MemoryByteSeconds; mem == nil {
		t.Error("ledger.saved.memoryByteSeconds unset")
	} else if got, want := mem.AsApproximateFloat64(), float64(32<<20)*float64(l.SecondsAtZero); got < want*0.99 || got > want*1.01 {
		t.Errorf("ledger.saved.memoryByteSeconds = %s, want 32Mi x %d s = %.0f", mem, l.SecondsAtZero, want)
	}

	cs := l.LastColdStart
	w := cs.ScaleWriteTime.Time
	if w.Before(sent.Add(-time.Second)) || w.After(answered) {
		t.Errorf("lastColdStart.scaleWriteTime %s is outside [%s, %s], when the request was held", w, sent, answered)
	}
	if cs.ScheduledTime == nil || cs.StartedTime == nil || cs.ReadyTime == nil {
		t.Fatalf("lastColdStart = %+v; want every phase", cs)
	}
	s, st, r := cs.ScheduledTime.Time, cs.StartedTime.Time, cs.ReadyTime.Time
	if s.Before(w.Add(-time.Second)) || st.Before(s) || r.Before(st) {
		t.Errorf("cold start phases out of order: scale write %s, scheduled %s, started %s, ready %s", w, s, st, r)
	}
	// The app listens only after its boot delay, so readiness comes at
	// least that long after its container started, and before the answer.
	if r.Sub(st) < boot-time.Second || r.After(answered.Add(time.Second)) {
		t.Errorf("ready %s after the container started and %s before the answer; want at least the %s boot, and not after the answer", r.Sub(st), answered.Sub(r), boot)
	}
	if got, took := r.Sub(w), answered.Sub(sent); got > took+2*time.Second {
		t.Errorf("the ledger's cold start (scale write to ready) is %s, longer than the %s the held request took", got, took)
	}
	t.Logf("ledger: %d s at zero this period; cold start %s (scheduled +%s, started +%s, ready +%s); request took %s",
		period, r.Sub(w), s.Sub(w), st.Sub(w), r.Sub(w), answered.Sub(sent).Round(time.Millisecond))
}

// sleepingWithFallback is demoApp asleep, with a second demo app as its
// spec.proxy.fallback (after 5m, holdTimeout 10m).
func sleepingWithFallback(t *testing.T, e *Env) (string, string) {
	t.Helper()
	ns, ip := demoApp(t, e)
	e.Create(t, DemoAppDeployment(ns, "fallback", 1), DemoAppService(ns, "fallback"))
	e.WaitReadyEndpoints(t, ns, "fallback", 1, 2*time.Minute)
	es := e.ElastiServiceFor(ns, "demoapp", IdleQuery)
	es.Spec.Proxy = &elastiv1alpha1.ProxySpec{HoldTimeout: "10m", Fallback: &elastiv1alpha1.Fallback{Service: "fallback", After: "5m"}}
	e.Create(t, es)
	e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)
	return ns, ip
}

// TestFallbackWhenUnschedulable: the target's pods cannot be scheduled (a
// nodeSelector no node has). A request held at zero goes to the fallback
// Service long before fallback.after, FallbackActive turns True with
// PodsUnschedulable and an Event, and new requests go there too. Once the
// target can be scheduled, it serves again and the fallback stands down.
func TestFallbackWhenUnschedulable(t *testing.T) {
	t.Parallel()
	e := Get(t)
	ns, ip := sleepingWithFallback(t, e)
	e.updateDeployment(t, ns, "demoapp", func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.NodeSelector = map[string]string{"elasti.dev/e2e-no-such-node": "true"}
	})
	e.SetQuery(t, ns, "demoapp", BusyQuery)

	ctx := context.Background()
	c := e.keepAliveClient(6 * time.Minute)
	start := time.Now()
	body := []byte(strings.Repeat("held, then sent to the fallback\n", 500))
	req := func() (string, error) {
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, httpURL(ip, DemoHTTPPort), strings.NewReader(string(body)))
		if err != nil {
			return "", err
		}
		resp, err := c.Do(r)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return string(got), fmt.Errorf("%s: %s", resp.Status, got)
		}
		return string(got), err
	}
	got, err := req()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("request held at zero with an unschedulable target: after %s: %v", took.Round(time.Millisecond), err)
	}
	wantBody := fmt.Sprintf("body %d bytes sha256 %x", len(body), sha256.Sum256(body))
	if !strings.HasPrefix(got, "hello from fallback-") || !strings.Contains(got, wantBody) {
		t.Fatalf("held request answered %q; want the fallback's answer with %q", got, wantBody)
	}
	if took >= 5*time.Minute {
		t.Errorf("the fallback took over after %s, not before fallback.after (5m): the unschedulable pod was not noticed", took)
	}
	t.Logf("held request answered by the fallback after %s", took.Round(time.Millisecond))

	Eventually(t, time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
		es, err := e.GetElastiService(ctx, ns, "demoapp")
		if err != nil {
			return err
		}
		if c := Condition(es, elastiv1alpha1.ConditionFallbackActive); c == nil || c.Status != "True" || c.Reason != "PodsUnschedulable" {
			return fmt.Errorf("FallbackActive is not True/PodsUnschedulable: %s", conditions(es))
		}
		if n, err := e.EventCount(ctx, ns, "demoapp", "FallbackActive"); err != nil {
			return err
		} else if n == 0 {
			return errors.New("no FallbackActive Event")
		}
		return nil
	})
	// A new request, on the same keep-alive connection, goes there too.
	if got, err := req(); err != nil || !strings.HasPrefix(got, "hello from fallback-") {
		t.Fatalf("request while the fallback is active: %q, %v; want the fallback's answer", got, err)
	}

	// The target can be scheduled again: it becomes ready, serves, and the
	// fallback stands down.
	e.updateDeployment(t, ns, "demoapp", func(d *appsv1.Deployment) { d.Spec.Template.Spec.NodeSelector = nil })
	e.WaitAwake(t, ns, "demoapp", 3*time.Minute)
	Eventually(t, time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
		got, err := req()
		if err != nil {
			return err
		}
		if !strings.HasPrefix(got, "hello from demoapp-") {
			return fmt.Errorf("answered %q, want the target's answer", strings.SplitN(got, "\n", 2)[0])
		}
		es, err := e.GetElastiService(ctx, ns, "demoapp")
		if err != nil {
			return err
		}
		if c := Condition(es, elastiv1alpha1.ConditionFallbackActive); c == nil || c.Status != "False" {
			return fmt.Errorf("FallbackActive still set: %s", conditions(es))
		}
		return nil
	})
}

// TestFallbackWhenQuotaForbidsPods: a ResourceQuota created while the
// target sleeps leaves no room for its pod: the wake's scale write
// succeeds, and the workload controller cannot create the pod. A request
// held at zero goes to the fallback long before fallback.after, with
// FallbackActive=True PodsNotCreated, and status.wakeProgress says why the
// wake is stuck.
func TestFallbackWhenQuotaForbidsPods(t *testing.T) {
	t.Parallel()
	e := Get(t)
	ns, ip := sleepingWithFallback(t, e)
	// The fallback's pod is the namespace's one pod.
	e.Create(t, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "one-pod", Namespace: ns},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}},
	})
	Eventually(t, time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
		var q corev1.ResourceQuota
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "one-pod"}, &q); err != nil {
			return err
		}
		if used, ok := q.Status.Used[corev1.ResourcePods]; !ok || used.Value() != 1 {
			return fmt.Errorf("quota not computed yet: used %v", q.Status.Used)
		}
		return nil
	})
	e.SetQuery(t, ns, "demoapp", BusyQuery)

	start := time.Now()
	got, err := GetWith(context.Background(), e.keepAliveClient(6*time.Minute), httpURL(ip, DemoHTTPPort), "")
	took := time.Since(start)
	if err != nil {
		t.Fatalf("request held at zero with no room for the target's pod: after %s: %v", took.Round(time.Millisecond), err)
	}
	if !strings.HasPrefix(got, "hello from fallback-") {
		t.Fatalf("held request answered %q; want the fallback's answer", got)
	}
	if took >= 5*time.Minute {
		t.Errorf("the fallback took over after %s, not before fallback.after (5m): the refused pod was not noticed", took)
	}
	t.Logf("held request answered by the fallback after %s", took.Round(time.Millisecond))
	Eventually(t, time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
		es, err := e.GetElastiService(ctx, ns, "demoapp")
		if err != nil {
			return err
		}
		if c := Condition(es, elastiv1alpha1.ConditionFallbackActive); c == nil || c.Status != "True" || c.Reason != "PodsNotCreated" {
			return fmt.Errorf("FallbackActive is not True/PodsNotCreated: %s", conditions(es))
		}
		if wp := es.Status.WakeProgress; wp == nil || wp.Phase != elastiv1alpha1.WakePhaseScaling || !strings.Contains(wp.Message, "exceeded quota") {
			return fmt.Errorf("wakeProgress %+v; want Scaling with the quota's message", wp)
		}
		return nil
	})
	if n, _, err := e.Replicas(context.Background(), ns, "demoapp"); err != nil || n == 0 {
		t.Errorf("the target has %d replicas (%v): the wake's scale write should stand while the fallback serves", n, err)
	}
}
