package resolver

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
)

func TestActivationRetriedWithBackoffWhileHeld(t *testing.T) {
	h := newHarness(t, 1, nil)
	up := echoUpstream(t)
	h.act.mu.Lock()
	h.act.fail = 2
	h.act.mu.Unlock()
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	done := make(chan result, 1)
	go func() { done <- get(h.client(), context.Background(), "http://"+h.addr(0)+"/", nil) }()
	for range 3 {
		h.act.waitCalled(t)
	}
	h.ready("websvc", "websvc-abc", "http", upstreamAddr(up))
	if r := <-done; r.err != nil || r.status != http.StatusOK {
		t.Fatalf("status %d err %v", r.status, r.err)
	}
	// The loop counts a call once Activate has returned, which may be after
	// the request it woke was answered.
	h.eventually("one activation counted ok", func() bool {
		return testutil.ToFloat64(h.r.metrics.Activations.WithLabelValues("ns", "web", ActivationOK)) >= 1
	})
	if v := testutil.ToFloat64(h.r.metrics.Activations.WithLabelValues("ns", "web", ActivationError)); v != 2 {
		t.Errorf("activations{error} = %v, want 2", v)
	}
}

func TestActivationResultLabels(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{nil, ActivationOK},
		{statusErr(http.StatusUnauthorized), ActivationUnauthorized},
		{fmt.Errorf("wrapped: %w", statusErr(http.StatusForbidden)), ActivationUnauthorized},
		{statusErr(http.StatusNotFound), ActivationNotFound},
		{statusErr(http.StatusBadGateway), ActivationError},
		{io.EOF, ActivationError},
	}
	for _, tt := range tests {
		if got := activationResult(tt.err); got != tt.want {
			t.Errorf("activationResult(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

func TestReadinessAndDrain(t *testing.T) {
	var synced atomic.Bool
	h := newHarness(t, 3, func(o *Options) { o.Synced = synced.Load })
	admin := httptest.NewServer(h.r.AdminHandler(h.reg))
	t.Cleanup(admin.Close)
	status := func(path string) int {
		resp, err := http.Get(admin.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := status("/readyz"); got != http.StatusServiceUnavailable {
		t.Fatalf("/readyz before caches synced = %d, want 503", got)
	}
	synced.Store(true)
	if got := status("/readyz"); got != http.StatusOK {
		t.Fatalf("/readyz with ports open and caches synced = %d, want 200", got)
	}
	if got := status("/healthz"); got != http.StatusOK {
		t.Fatalf("/healthz = %d", got)
	}
	resp, err := http.Get(admin.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "elasti_resolver_open_listeners 3") {
		t.Errorf("/metrics lacks the listener gauge:\n%s", body)
	}

	// Drain: a held request keeps waiting and is forwarded once ready; new
	// connections are still accepted during the drain period.
	up := echoUpstream(t)
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	held := make(chan result, 1)
	go func() { held <- get(h.client(), context.Background(), "http://"+h.addr(0)+"/held", nil) }()
	h.eventually("the request is held", func() bool { return h.held("web") == 1 })

	drained := make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	periodEnd := make(chan struct{})
	go func() {
		h.r.drain(ctx, periodEnd)
		close(drained)
	}()
	h.eventually("readiness turns false", func() bool { return status("/readyz") == http.StatusServiceUnavailable })
	late := make(chan result, 1)
	go func() { late <- get(h.client(), context.Background(), "http://"+h.addr(0)+"/late", nil) }()
	h.eventually("the late request is held too", func() bool { return h.held("web") == 2 })
	close(periodEnd)
	// Ports close; the held requests still complete once ready.
	h.eventually("ports are closed", func() bool {
		c, err := net.Dial("tcp", h.addr(1))
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	h.ready("websvc", "websvc-abc", "http", upstreamAddr(up))
	for _, ch := range []chan result{held, late} {
		if r := <-ch; r.err != nil || r.status != http.StatusOK {
			t.Fatalf("request during drain: status %d err %v", r.status, r.err)
		}
	}
	select {
	case <-drained:
	case <-time.After(waitTimeout):
		t.Fatal("drain did not finish after the held requests completed")
	}
}

func TestDrainTimeoutCutsHeldRequests(t *testing.T) {
	h := newHarness(t, 1, nil)
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	held := make(chan result, 1)
	go func() { held <- get(h.client(), context.Background(), "http://"+h.addr(0)+"/held", nil) }()
	h.eventually("the request is held", func() bool { return h.held("web") == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the drain timeout has already passed
	periodEnd := make(chan struct{})
	close(periodEnd)
	h.r.drain(ctx, periodEnd)
	r := <-held
	if r.err == nil && r.status != http.StatusServiceUnavailable {
		t.Fatalf("held request after drain timeout: status %d, want 503 or a cut connection", r.status)
	}
}

// After a wake completes, a later sleep must be woken at once by its first
// held request, not after the refresh interval of the earlier wake's loop.
func TestSecondWakeAfterSleepActivatesAtOnce(t *testing.T) {
	h := newHarness(t, 1, func(o *Options) { o.Activation.Refresh = time.Hour })
	up := echoUpstream(t)
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))

	first := make(chan result, 1)
	go func() { first <- get(h.client(), context.Background(), "http://"+h.addr(0)+"/", nil) }()
	h.act.waitCalled(t)
	h.ready("websvc", "websvc-abc", "http", upstreamAddr(up))
	if r := <-first; r.err != nil || r.status != http.StatusOK {
		t.Fatalf("first wake: status %d err %v", r.status, r.err)
	}

	// The target goes back to zero: its only endpoint disappears.
	h.endpoints.Delete("ns", "websvc-abc")
	second := make(chan result, 1)
	go func() { second <- get(h.client(), context.Background(), "http://"+h.addr(0)+"/", nil) }()
	h.act.waitCalled(t) // with a one-hour refresh, only a fresh loop calls now
	h.ready("websvc", "websvc-def", "http", upstreamAddr(up))
	if r := <-second; r.err != nil || r.status != http.StatusOK {
		t.Fatalf("second wake: status %d err %v", r.status, r.err)
	}
}

// TestActivationLoopEndsWhenReadyDuringCall: a target that turns ready while
// the activation call is in flight ends the loop, so that the next sleep
// starts a fresh one that calls at once, instead of finding this one waiting
// out its refresh interval.
func TestActivationLoopEndsWhenReadyDuringCall(t *testing.T) {
	h := newHarness(t, 1, func(o *Options) { o.Activation.Refresh = time.Hour })
	up := echoUpstream(t)
	h.act.onCall = func(_, _ string) { h.ready("websvc", "websvc-abc", "http", upstreamAddr(up)) }
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	if r := get(h.client(), context.Background(), "http://"+h.addr(0)+"/", nil); r.err != nil || r.status != http.StatusOK {
		t.Fatalf("status %d err %v", r.status, r.err)
	}
	h.eventually("the activation loop ends", func() bool {
		return !h.r.hold.Waking(types.NamespacedName{Namespace: "ns", Name: "web"})
	})
}

// TestDrainAnswersHeldRequests503: holds still waiting as the drain timeout
// nears end with a 503 and Retry-After, parked or held in their handler,
// never with a cut connection; a held TCP connection is closed.
func TestDrainAnswersHeldRequests503(t *testing.T) {
	h := newHarness(t, 1, nil)
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	results := make(chan result, 2)
	go func() { results <- get(h.client(), context.Background(), "http://"+h.addr(0)+"/parked", nil) }()
	go func() {
		resp, err := h.client().Post("http://"+h.addr(0)+"/in-handler", "text/plain", strings.NewReader("a body"))
		if err != nil {
			results <- result{err: err}
			return
		}
		defer resp.Body.Close()
		results <- result{status: resp.StatusCode, header: resp.Header}
	}()
	h.eventually("both requests are held", func() bool { return h.held("web") == 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	periodEnd := make(chan struct{})
	close(periodEnd)
	h.r.drain(ctx, periodEnd)
	for range 2 {
		r := <-results
		if r.err != nil || r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
			t.Errorf("held request at the drain: status %d Retry-After %q err %v; want 503 with Retry-After", r.status, r.header.Get("Retry-After"), r.err)
		}
	}
}
