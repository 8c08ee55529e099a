//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/resolver/upstream"
)

// requestIDHeader names a request in the demo app's ledger (test/demoapp).
const requestIDHeader = "X-Request-Id"

// ledger is the demo app's record of what it executed: a host directory
// (the cluster runs on this machine) that every pod of the Deployment
// appends to, one line per executed HTTP request ("http ID") and per TCP
// connection's first bytes ("tcp BYTES"). Pods come and go across sleeps and
// wakes; the file stays.
type ledger struct{ dir string }

func newLedger(t *testing.T) *ledger {
	t.Helper()
	dir, err := os.MkdirTemp("", "elasti-e2e-ledger-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// The demo app runs as a non-root user.
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return &ledger{dir: dir}
}

// mount makes the Deployment's pods write to the ledger.
func (l *ledger) mount(d *appsv1.Deployment) {
	spec := &d.Spec.Template.Spec
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "ledger", VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: l.dir},
	}})
	c := &spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "ledger", MountPath: "/ledger"})
	c.Env = append(c.Env, corev1.EnvVar{Name: "EXECUTED_LOG", Value: "/ledger/executed"})
}

// counts returns how many times each line was recorded.
func (l *ledger) counts(t *testing.T) map[string]int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(l.dir, "executed"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	m := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line != "" {
			m[line]++
		}
	}
	return m
}

// withEnv sets an environment variable on the Deployment's container.
func withEnv(name, value string) func(*appsv1.Deployment) {
	return func(d *appsv1.Deployment) {
		c := &d.Spec.Template.Spec.Containers[0]
		c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
	}
}

func newID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// postResult is one POST a client sent: its ID, whether it got a
// connection at all and whether that was a reused one, and its error, if
// any.
type postResult struct {
	at      time.Time
	id      string
	gotConn bool
	reused  bool
	err     error
}

// postOnce sends one POST with a 1 KiB body and a fresh request ID through
// c, and checks that the demo app read the whole body.
func postOnce(ctx context.Context, c *http.Client, url string) postResult {
	return postSized(ctx, c, url, 1024)
}

// largePost is above the resolver's read-ahead bound (64 KiB): held at
// zero, the rest of its body waits with backpressure.
const largePost = 256 << 10

// postSized is postOnce with a body of size bytes.
func postSized(ctx context.Context, c *http.Client, url string, size int) postResult {
	r := postResult{at: time.Now(), id: newID()}
	body := make([]byte, size)
	_, _ = rand.Read(body)
	sum := sha256.Sum256(body)
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { r.gotConn, r.reused = true, info.Reused }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		r.err = err
		return r
	}
	req.Header.Set(requestIDHeader, r.id)
	resp, err := c.Do(req)
	if err != nil {
		r.err = err
		return r
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	switch want := fmt.Sprintf("body %d bytes sha256 %x", size, sum); {
	case err != nil:
		r.err = fmt.Errorf("read the answer: %w", err)
	case resp.StatusCode != http.StatusOK:
		r.err = fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(got)))
	case !strings.Contains(string(got), want):
		r.err = fmt.Errorf("answer %q does not confirm the body (%s)", got, want)
	}
	return r
}

// keepAliveFleet is n HTTP/1.1 clients as real ones are: each keeps its
// connection alive across requests (a Transport of its own with one
// connection), gives up on a connect after fleetDialTimeout, and POSTs a
// 1 KiB body every interval, every eighth POST a body of largePost instead.
// It never sends more than limit requests in all.
type keepAliveFleet struct {
	sent  atomic.Int64
	dials atomic.Int64
	mu    sync.Mutex
	ok    []postResult
	bad   []postResult
	stop  chan struct{}
	wg    sync.WaitGroup
}

// fleetDialTimeout is net/http's default connect timeout
// (http.DefaultTransport), which real Go clients have. A connect matters
// here: one that kube-proxy sent to a pod that has just exited is never
// answered, and its retransmitted SYNs keep going to the gone pod's address
// (the connection tracking entry outlives the rule that chose it), so the
// connect hangs until the client's timeout ends it, long after kube-proxy
// routes new connections to the resolvers.
const fleetDialTimeout = 30 * time.Second

func startKeepAliveFleet(e *Env, url string, n int, interval time.Duration, limit int64) *keepAliveFleet {
	f := &keepAliveFleet{stop: make(chan struct{})}
	for range n {
		tr := &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				f.dials.Add(1)
				ctx, cancel := context.WithTimeout(ctx, fleetDialTimeout)
				defer cancel()
				return e.Dialer.DialContext(ctx, network, addr)
			},
			MaxIdleConnsPerHost: 1,
			MaxConnsPerHost:     1,
			IdleConnTimeout:     5 * time.Minute,
		}
		// Long enough for a wake on a busy machine.
		c := &http.Client{Transport: tr, Timeout: 90 * time.Second}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer tr.CloseIdleConnections()
			tick := time.NewTicker(interval)
			defer tick.Stop()
			for n := f.sent.Add(1); n <= limit; n = f.sent.Add(1) {
				size := 1024
				if n%8 == 0 {
					size = largePost
				}
				r := postSized(context.Background(), c, url, size)
				f.mu.Lock()
				if r.err != nil {
					f.bad = append(f.bad, r)
				} else {
					f.ok = append(f.ok, r)
				}
				f.mu.Unlock()
				select {
				case <-f.stop:
					return
				case <-tick.C:
				}
			}
		}()
	}
	return f
}

func (f *keepAliveFleet) finish() {
	close(f.stop)
	f.wg.Wait()
}

// grpcClient sends one unary Echo every interval on one long-lived gRPC
// connection (HTTP/2), as a real client does, with no wait-for-ready: an
// RPC fails if the channel has no connection to send it on. dials counts
// the connections it opened; attempts that failed are in dialLog only.
type grpcClient struct {
	sent, ok, dials atomic.Int64
	mu              sync.Mutex
	failures        []string
	errs            []error
	dialLog         []string
	stop            chan struct{}
	done            chan struct{}
}

func startGRPCClient(t *testing.T, e *Env, addr string, interval time.Duration, limit int64) *grpcClient {
	t.Helper()
	g := &grpcClient{stop: make(chan struct{}), done: make(chan struct{})}
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			c, err := e.Dialer.DialContext(ctx, "tcp", addr)
			outcome := "connected"
			if err != nil {
				outcome = err.Error()
			} else {
				g.dials.Add(1)
			}
			g.mu.Lock()
			g.dialLog = append(g.dialLog, time.Now().Format("15:04:05.000")+" "+outcome)
			g.mu.Unlock()
			return c, err
		}))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(g.done)
		defer conn.Close()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for g.sent.Add(1) <= limit {
			msg := newID()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			var out wrapperspb.StringValue
			err := conn.Invoke(ctx, "/elasti.demo.Echo/Echo", wrapperspb.String(msg), &out)
			cancel()
			if err == nil && out.GetValue() != msg {
				err = fmt.Errorf("echo returned %q, want %q", out.GetValue(), msg)
			}
			if err != nil {
				g.mu.Lock()
				g.failures = append(g.failures, fmt.Sprintf("%s: %v", time.Now().Format("15:04:05.000"), err))
				g.errs = append(g.errs, err)
				g.mu.Unlock()
			} else {
				g.ok.Add(1)
			}
			select {
			case <-g.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return g
}

func (g *grpcClient) finish() {
	close(g.stop)
	<-g.done
}

// cycles waits until the ElastiService has gone to zero want times (by
// status.lastScaledDownTime) and returns when each happened.
func (e *Env) cycles(t *testing.T, ns, name string, want int, timeout time.Duration, progress func() string) []time.Time {
	t.Helper()
	start := time.Now()
	var downs []time.Time
	Eventually(t, timeout, 100*time.Millisecond, func(ctx context.Context) error {
		es, err := e.GetElastiService(ctx, ns, name)
		if err != nil {
			return err
		}
		if ts := es.Status.LastScaledDownTime; ts != nil && (len(downs) == 0 || ts.After(downs[len(downs)-1])) {
			downs = append(downs, ts.Time)
			t.Logf("cycle %d: scaled to zero at %s (%s into the test); %s",
				len(downs), ts.Format("15:04:05"), time.Since(start).Round(time.Second), progress())
		}
		if len(downs) < want {
			return fmt.Errorf("%d sleep/wake cycles so far, want %d", len(downs), want)
		}
		return nil
	})
	return downs
}

// checkLedger reports through errorf (t.Errorf, or a test's own) a request
// that was answered but not executed exactly once, and any request executed
// twice.
func checkLedger(t *testing.T, errorf func(format string, args ...any), l *ledger, ok []postResult) {
	t.Helper()
	counts := l.counts(t)
	for _, r := range ok {
		if n := counts["http "+r.id]; n != 1 {
			errorf("request %s was answered but executed %d times", r.id, n)
		}
	}
	for line, n := range counts {
		// "http -" is a request without an ID: the tests' own checks
		// that the app answers (answers), not a client's request.
		if n > 1 && line != "http -" {
			errorf("%q executed %d times", line, n)
		}
	}
}

// loadOnCycles runs the keep-alive fleet (8 clients, 5 POSTs a second each)
// and one gRPC client (10 RPCs a second on one connection) against a demo
// app whose trigger always says idle, through cycles sleep/wake cycles, and
// returns what they saw. drain is the app's DRAIN.
func loadOnCycles(t *testing.T, drain string, cycles int) (*keepAliveFleet, *grpcClient, *ledger) {
	e := Get(t)
	l := newLedger(t)
	ns, ip := demoApp(t, e, withEnv("DRAIN", drain), l.mount)
	url := httpURL(ip, DemoHTTPPort)
	answers(t, e, url, 30*time.Second)

	// Bounded: at most 5 minutes of traffic.
	fleet := startKeepAliveFleet(e, url, 8, 200*time.Millisecond, 8*5*300)
	rpc := startGRPCClient(t, e, net.JoinHostPort(ip, fmt.Sprint(DemoGRPCPort)), 100*time.Millisecond, 10*300)
	e.Create(t, e.ElastiServiceFor(ns, "demoapp", IdleQuery))
	start := time.Now()
	e.cycles(t, ns, "demoapp", cycles, 4*time.Minute, func() string {
		return fmt.Sprintf("%d POSTs and %d RPCs so far", fleet.sent.Load(), rpc.sent.Load())
	})
	// Stay awake, and let the last wake finish under load.
	e.SetQuery(t, ns, "demoapp", BusyQuery)
	e.WaitAwake(t, ns, "demoapp", 2*time.Minute)
	time.Sleep(2 * time.Second)
	fleet.finish()
	rpc.finish()
	t.Logf("over %s and %d cycles: %d keep-alive POSTs on %d connections (%d ok, %d failed); %d RPCs on %d connections (%d ok, %d failed)",
		time.Since(start).Round(time.Second), cycles, len(fleet.ok)+len(fleet.bad), fleet.dials.Load(), len(fleet.ok), len(fleet.bad),
		rpc.ok.Load()+int64(len(rpc.failures)), rpc.dials.Load(), rpc.ok.Load(), len(rpc.failures))
	// The clients really kept their connections: fewer than half as many
	// connections as requests. A new one is opened only where a pod or a
	// resolver closed one; while routing converges back to serve each
	// request may still reach a resolver, which closes the connection after
	// answering so that the next one takes the new route.
	if n, dials := len(fleet.ok)+len(fleet.bad), fleet.dials.Load(); dials*2 > int64(n) {
		t.Errorf("%d connections for %d requests: the fleet did not keep its connections alive", dials, n)
	}
	checkLedger(t, t.Errorf, l, fleet.ok)
	return fleet, rpc, l
}

// TestNoLossUnderLoad is the invariant with real clients: keep-alive
// HTTP/1.1 clients POSTing bodies and a gRPC client on one long-lived HTTP/2
// connection send steadily while the service goes serve → proxy → zero →
// wake → serve three times, and not one request fails or runs twice.
//
// The trigger always says idle, so the operator starts a scale-down as soon
// as each cooldown ends. The keep-alive connections stay on the pod during
// the grace period (kube-proxy routes only new connections to the
// resolvers), so no request reaches a resolver then and the target goes to
// zero. The demo app drains on SIGTERM: its answers carry Connection: close
// and gRPC gets a GOAWAY, so the clients reconnect, now through the
// resolvers, which hold the requests and wake the target. No preStop hook is
// used.
func TestNoLossUnderLoad(t *testing.T) {
	t.Parallel()
	const cycles = 3
	fleet, rpc, _ := loadOnCycles(t, "3s", cycles)
	// The gRPC client kept its connection, as the keep-alive fleet did:
	// fewer than half as many connections as RPCs. A connection lives until
	// a pod or a resolver sends it a GOAWAY, which happens at each switch;
	// while routing converges back to serve, each reconnect may still reach
	// a resolver, which answers one RPC and sends a GOAWAY again, so that
	// the next one takes the new route: one connection per RPC for as long
	// as kube-proxy takes (about 2 s, 20 connections, on a machine busy with
	// the other tests). Dials that fail open no connection and are not
	// counted.
	if rpcs, conns := rpc.ok.Load()+int64(len(rpc.failures)), rpc.dials.Load(); conns*2 > rpcs {
		rpc.mu.Lock()
		t.Errorf("the gRPC client opened %d connections for %d RPCs: its connection did not live long; dials:\n%s",
			conns, rpcs, strings.Join(rpc.dialLog, "\n"))
		rpc.mu.Unlock()
	}
	for i, f := range fleet.bad {
		if i == 10 {
			t.Errorf("... and %d more", len(fleet.bad)-10)
			break
		}
		t.Errorf("POST %s at %s (reused connection: %v): %v", f.id, f.at.Format("15:04:05.000"), f.reused, f.err)
	}
	for i, f := range rpc.failures {
		if i == 10 {
			t.Errorf("... and %d more", len(rpc.failures)-10)
			break
		}
		t.Errorf("RPC at %s", f)
	}
}

// TestNoDrainTerminationRace runs the same load against a workload that
// exits promptly on SIGTERM (DRAIN=0: it stops listening, finishes the
// requests in flight and closes its idle keep-alive connections at once).
// Requests can fail there, in two ways only, both the Kubernetes termination
// race, with or without Elasti:
//   - a request written on a keep-alive connection that the pod closed at the
//     same moment (EOF or reset). net/http retries such a request only when
//     it knows it to be idempotent, so a POST fails, and its client cannot
//     know whether the pod ran it;
//   - a new connection that kube-proxy still sent to the pod after it
//     stopped listening (refused) or after it was gone (no route to host,
//     or, once the network plugin has dropped the pod's rules, no answer
//     at all: the client's own timeout, without ever getting a
//     connection): the endpoint update takes a moment to reach every node.
//     The same holds for the gRPC client's reconnect.
//
// And the first of the two one hop later: a request that reached a resolver
// while the target was still ready, and which the resolver sent on its own
// kept-alive connection to the pod as the pod closed it, is answered with
// the resolver's 502 that says so (upstream.PodClosedMessage).
//
// The test fails on any other failure, and on a request executed twice.
// docs/e2e.md explains it.
func TestNoDrainTerminationRace(t *testing.T) {
	t.Parallel()
	fleet, rpc, l := loadOnCycles(t, "0s", 2)
	counts := l.counts(t)
	for _, f := range fleet.bad {
		// A refused or unrouted connect is a new connection whether or
		// not the request first got a kept-alive one: net/http sends a
		// request again on a new connection when the kept-alive one was
		// found closed before anything was written (seen: "got a
		// connection true, reused true", then "dial tcp ...: connection
		// refused" in the same moment as the scale to zero).
		race := (f.reused && isConnClosed(f.err)) || isStaleRoute(f.err) || (!f.gotConn && isTimeout(f.err)) ||
			strings.Contains(f.err.Error(), upstream.PodClosedMessage)
		t.Logf("POST %s at %s, got a connection %v, reused %v, executed %d times: %v (termination race: %v)",
			f.id, f.at.Format("15:04:05.000"), f.gotConn, f.reused, counts["http "+f.id], f.err, race)
		if !race {
			t.Errorf("POST %s failed otherwise than by the termination race: %v", f.id, f.err)
		}
	}
	for i, err := range rpc.errs {
		race := status.Code(err) == codes.Unavailable && (isConnClosed(err) || isStaleRoute(err) || isUnansweredDial(err))
		t.Logf("RPC %s (termination race: %v)", rpc.failures[i], race)
		if !race {
			t.Errorf("RPC failed otherwise than by the termination race: %s", rpc.failures[i])
		}
	}
}

// TestAbandonedWhileHeldNeverRuns: a POST whose client gives up while it is
// held, and a TCP client that sends data and closes while held, never reach
// the pod, though the pod comes up and serves the next request. The demo app
// boots in 8 s, so both clients are gone long before it is ready.
func TestAbandonedWhileHeldNeverRuns(t *testing.T) {
	t.Parallel()
	e := Get(t)
	l := newLedger(t)
	ns, ip := sleepyDemoApp(t, e, idle, withEnv("STARTUP_DELAY", "8s"), l.mount)
	e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)
	e.SetQuery(t, ns, "demoapp", BusyQuery)

	// The POST's client waits 2 s, then leaves.
	c := &http.Client{Transport: &http.Transport{DialContext: e.Dialer.DialContext}, Timeout: 2 * time.Second}
	post := postOnce(context.Background(), c, httpURL(ip, DemoHTTPPort))
	if post.err == nil {
		t.Fatal("the POST was answered within 2 s of a wake that takes 8 s")
	}
	t.Logf("POST %s given up: %v", post.id, post.err)

	// The TCP client sends its bytes and closes while held.
	marker := "abandoned-" + newID()
	conn, err := e.Dialer.DialContext(context.Background(), "tcp", net.JoinHostPort(ip, fmt.Sprint(DemoTCPPort)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte(marker)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	conn.Close()

	// The target wakes (the held requests asked for it) and serves.
	e.WaitAwake(t, ns, "demoapp", 2*time.Minute)
	lc := &http.Client{Transport: &http.Transport{DialContext: e.Dialer.DialContext}, Timeout: 30 * time.Second}
	var later postResult
	Eventually(t, time.Minute, 500*time.Millisecond, func(ctx context.Context) error {
		later = postOnce(ctx, lc, httpURL(ip, DemoHTTPPort))
		return later.err
	})
	// Give a wrongly forwarded request time to land.
	time.Sleep(5 * time.Second)
	counts := l.counts(t)
	if n := counts["http "+later.id]; n != 1 {
		t.Fatalf("the ledger is not working: the answered POST %s is recorded %d times (ledger %v)", later.id, n, keys(counts))
	}
	if n := counts["http "+post.id]; n != 0 {
		t.Errorf("the abandoned POST %s was executed %d times", post.id, n)
	}
	for line := range counts {
		if strings.Contains(line, marker) {
			t.Errorf("the abandoned TCP connection reached the pod: %q", line)
		}
	}
}

func keys(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestTrafficCallsOffScaleDown: a service that gets requests is never put
// to sleep, even when its trigger says idle. Each scale-down the operator
// starts puts the proxy slice in place; requests on new connections then
// reach a resolver during the grace period, which reports them, and the
// operator calls the scale-down off. The test sees scale-downs start and
// never finish, and no request fails across these switches.
func TestTrafficCallsOffScaleDown(t *testing.T) {
	t.Parallel()
	e := Get(t)
	ns, ip := demoApp(t, e)
	url := httpURL(ip, DemoHTTPPort)
	answers(t, e, url, 30*time.Second)
	// Bounded: at most 2 minutes at 10 requests a second.
	load := startLoad(e, url, 10, 10*120)
	e.Create(t, e.ElastiServiceFor(ns, "demoapp", IdleQuery))

	attempts := 0
	var last string
	StableFor(t, 40*time.Second, 100*time.Millisecond, func(ctx context.Context) error {
		es, err := e.GetElastiService(ctx, ns, "demoapp")
		if err != nil {
			return err
		}
		if es.Status.LastScaledDownTime != nil {
			return fmt.Errorf("scaled to zero at %s under steady traffic", es.Status.LastScaledDownTime.Format("15:04:05"))
		}
		if c := Condition(es, elastiv1alpha1.ConditionActive); c != nil {
			if c.Reason == contract.ReasonScalingDown && last != contract.ReasonScalingDown {
				attempts++
			}
			last = c.Reason
		}
		return nil
	})
	load.finish()
	t.Logf("%d scale-downs started and called off; %d requests, %d failed", attempts, load.sent.Load(), len(load.failures))
	if attempts == 0 {
		t.Error("no scale-down started: the test did not exercise the call-off")
	}
	for _, f := range load.failures {
		t.Errorf("GET failed at %s", f)
	}
	// Each call-off by traffic is said: an Event, and the status's
	// lastSleepCancelledTime.
	ctx := context.Background()
	if n, err := e.EventCount(ctx, ns, "demoapp", "SleepCancelled"); err != nil {
		t.Error(err)
	} else if n == 0 {
		t.Errorf("%d scale-downs called off by traffic, and no SleepCancelled Event", attempts)
	}
	if es, err := e.GetElastiService(ctx, ns, "demoapp"); err != nil {
		t.Error(err)
	} else if es.Status.LastSleepCancelledTime == nil {
		t.Error("status.lastSleepCancelledTime is unset after scale-downs called off by traffic")
	}
}

// isConnClosed reports whether err is the server closing the connection
// under a request.
func isConnClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		strings.Contains(err.Error(), "server closed") || strings.Contains(err.Error(), "connection reset") ||
		strings.Contains(err.Error(), "EOF")
}

// isTimeout reports whether err is the client's own timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// isUnansweredDial reports whether err is a gRPC reconnect whose connection
// attempt was never answered (see isStaleRoute).
func isUnansweredDial(err error) bool {
	return strings.Contains(err.Error(), "while dialing") && (isTimeout(err) ||
		strings.Contains(err.Error(), "i/o timeout") || strings.Contains(err.Error(), "deadline exceeded"))
}

// isStaleRoute reports whether err is a new connection that reached a pod
// which no longer listens, or no longer exists. Where the pod's network is
// already gone, the network plugin can also drop the connection attempt
// without an answer; the client then waits for its own timeout without
// ever getting a connection (postResult.gotConn false, or
// isUnansweredDial), which is the same race.
func isStaleRoute(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "no route to host")
}
