package resolver

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// burst runs n calls of fn at once and fails the test for each error.
func burst(t *testing.T, n int, fn func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(i); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func httpOK(c *http.Client, url string) error {
	r := get(c, context.Background(), url, nil)
	if r.err != nil {
		return fmt.Errorf("GET %s: %w", url, r.err)
	}
	if r.status != http.StatusOK {
		return fmt.Errorf("GET %s: status %d", url, r.status)
	}
	return nil
}

// TestTrafficToAReadyTargetIsReported: requests and connections that the
// resolver forwards at once, because the target already has a ready
// endpoint, are reported to the operator with an activation call: over
// HTTP/1.1, gRPC (h2c) and plain TCP. A burst inside the throttle interval
// makes exactly one call per ElastiService. Before the report existed, the
// operator heard nothing of this traffic and went on scaling to zero.
func TestTrafficToAReadyTargetIsReported(t *testing.T) {
	const n = 20
	h := newHarness(t, 3, func(o *Options) { o.Activation.TrafficReportInterval = time.Hour })

	web := echoUpstream(t)
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	h.ready("websvc", "websvc-abc", "http", upstreamAddr(web))

	grpcAddr, hs := startGRPC(t)
	hs.SetServingStatus("demo", healthpb.HealthCheckResponse_SERVING)
	h.mapPort("api", "grpcsvc", nil, h.proxyPort(1, "api", "grpc"))
	h.ready("grpcsvc", "grpcsvc-abc", "api", grpcAddr)

	db := newTCPRecorder(t)
	h.mapPort("db", "dbsvc", nil, h.proxyPort(2, "redis", ""))
	h.ready("dbsvc", "dbsvc-abc", "redis", db.addr())

	c := h.client()
	burst(t, n, func(i int) error { return httpOK(c, fmt.Sprintf("http://%s/r/%d", h.addr(0), i)) })

	// A client connection per call: the resolver sends GOAWAY after each
	// forwarded answer, which fails the calls still queued on a draining
	// connection, and the point here is the report, not that.
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	burst(t, n, func(int) error {
		conn, err := grpc.NewClient(h.addr(1), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		defer conn.Close()
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "demo"})
		if err != nil {
			return fmt.Errorf("gRPC Check: %w", err)
		}
		if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			return fmt.Errorf("gRPC Check = %v, want SERVING", resp.GetStatus())
		}
		return nil
	})

	burst(t, n, func(i int) error {
		c, err := net.Dial("tcp", h.addr(2))
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(waitTimeout))
		msg := fmt.Sprintf("ping%03d", i)
		if _, err := c.Write([]byte(msg)); err != nil {
			return err
		}
		buf := make([]byte, len(msg))
		if _, err := io.ReadFull(c, buf); err != nil {
			return fmt.Errorf("TCP echo: %w", err)
		}
		if string(buf) != msg {
			return fmt.Errorf("TCP echo = %q, want %q", buf, msg)
		}
		return nil
	})
	if got := db.connections(); got != n {
		t.Errorf("TCP upstream accepted %d connections, want %d", got, n)
	}

	// The reports run on their own goroutines, so they may complete after
	// the traffic did.
	for _, es := range []string{"web", "api", "db"} {
		h.eventually("the report of "+es+" is counted", func() bool {
			return testutil.ToFloat64(h.r.metrics.Activations.WithLabelValues("ns", es, ActivationOK)) == 1
		})
		if got := h.act.count("ns/" + es); got != 1 {
			t.Errorf("%s: %d activation calls for a burst of %d inside the interval, want exactly 1", es, got, n)
		}
	}
}

// TestTrafficReportNeverDelaysTheRequest: the report runs beside the
// request. An operator that does not answer delays nothing, and while its
// call is in flight no second call starts for the same ElastiService, even
// with the interval long over.
func TestTrafficReportNeverDelaysTheRequest(t *testing.T) {
	h := newHarness(t, 1, func(o *Options) { o.Activation.TrafficReportInterval = time.Nanosecond })
	release := make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before the harness's Close, which waits for connections
	h.act.onCall = func(_, _ string) { <-release }
	up := echoUpstream(t)
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	h.ready("websvc", "websvc-abc", "http", upstreamAddr(up))
	url := "http://" + h.addr(0) + "/"

	// The activator blocks until release: a request that waited for it
	// would end in the client's timeout instead.
	start := time.Now()
	if err := httpOK(h.client(), url); err != nil {
		t.Fatal(err)
	}
	h.act.waitCalled(t)
	burst(t, 10, func(int) error { return httpOK(h.client(), url) })
	if d := time.Since(start); d > waitTimeout/2 {
		t.Errorf("requests took %s while the report was blocked", d)
	}
	if got := h.act.count("ns/web"); got != 1 {
		t.Fatalf("%d activation calls while the first was in flight, want 1", got)
	}

	// Once the call returns, the next request reports again.
	unblock()
	key := types.NamespacedName{Namespace: "ns", Name: "web"}
	h.eventually("the report is over", func() bool {
		recent := h.r.hold.Reported(key)
		return !recent
	})
	if err := httpOK(h.client(), url); err != nil {
		t.Fatal(err)
	}
	h.act.waitCalled(t)
	if got := h.act.count("ns/web"); got != 2 {
		t.Fatalf("%d activation calls, want 2", got)
	}
}

// TestTrafficReportThrottle: with the clock held still, every request of a
// busy Service inside the interval shares one report; once the interval has
// passed, the next request reports again.
func TestTrafficReportThrottle(t *testing.T) {
	fake := clocktesting.NewFakeClock(time.Now())
	h := newHarness(t, 1, func(o *Options) {
		o.Clock = fake
		o.Activation.TrafficReportInterval = time.Second
	})
	up := echoUpstream(t)
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	h.ready("websvc", "websvc-abc", "http", upstreamAddr(up))
	url := "http://" + h.addr(0) + "/"
	c := h.client()

	if err := httpOK(c, url); err != nil {
		t.Fatal(err)
	}
	// The report started its interval timer before calling.
	h.act.waitCalled(t)
	burst(t, 50, func(int) error { return httpOK(c, url) })
	key := types.NamespacedName{Namespace: "ns", Name: "web"}
	h.eventually("the call has returned", func() bool {
		return testutil.ToFloat64(h.r.metrics.Activations.WithLabelValues("ns", "web", ActivationOK)) == 1
	})
	fake.Step(999 * time.Millisecond)
	if err := httpOK(c, url); err != nil {
		t.Fatal(err)
	}
	if got := h.act.count("ns/web"); got != 1 {
		t.Fatalf("%d activation calls inside one interval, want 1", got)
	}

	fake.Step(time.Millisecond)
	h.eventually("the interval is over", func() bool {
		recent := h.r.hold.Reported(key)
		return !recent
	})
	if err := httpOK(c, url); err != nil {
		t.Fatal(err)
	}
	h.act.waitCalled(t)
	if got := h.act.count("ns/web"); got != 2 {
		t.Fatalf("%d activation calls after the interval, want 2", got)
	}
}
