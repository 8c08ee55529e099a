package resolver

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/resolver/endpoints"
	"elasti.dev/elasti/internal/resolver/ports"
	"elasti.dev/elasti/internal/resolver/resolvertest"
)

// waitTimeout bounds every wait in these tests. It is generous on purpose:
// the waits are event-driven and end as soon as the condition holds, so a
// busy machine makes them slower, never wrong.
const waitTimeout = 60 * time.Second

// harness is an in-process resolver on a few loopback ports, fed directly by
// the test in place of the informers.
type harness struct {
	t         testing.TB
	ports     *ports.PortMap
	endpoints *endpoints.Endpoints
	r         *Resolver
	reg       *prometheus.Registry
	act       *fakeActivator
	base      int
	n         int
}

// newHarness starts a resolver on n consecutive free loopback ports.
func newHarness(t testing.TB, n int, tune func(*Options)) *harness {
	t.Helper()
	h := &harness{t: t, ports: ports.NewPortMap(), endpoints: endpoints.New(), act: newFakeActivator(), n: n}
	var lastErr error
	for range 50 {
		h.reg = prometheus.NewRegistry()
		opts := Options{
			Ports:      PortOptions{ListenAddress: "127.0.0.1", UnmappedWait: 200 * time.Millisecond},
			Activation: ActivationOptions{Activator: h.act, Backoff: 10 * time.Millisecond},
			Log:        testLogger(t),
			Metrics:    NewMetrics(h.reg),
		}
		if tune != nil {
			tune(&opts)
		}
		h.base = 30000 + rand.IntN(25000)
		opts.Ports.PortRangeStart, opts.Ports.PortRangeEnd = h.base, h.base+n-1
		r, err := New(h.ports, h.endpoints, opts)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		if lastErr = r.Start(); lastErr == nil {
			h.r = r
			t.Cleanup(r.Close)
			return h
		}
	}
	t.Fatalf("no free range of %d loopback ports: %v", n, lastErr)
	return nil
}

// testLogger logs through t until the test's cleanups run; goroutines that
// outlive the test (a closing connection) must not log into a finished test.
func testLogger(t testing.TB) logr.Logger {
	var mu sync.Mutex
	done := false
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		done = true
	})
	return funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		if prefix != "" {
			args = prefix + ": " + args
		}
		t.Log(args)
	}, funcr.Options{Verbosity: 1})
}

// addr is the loopback address of the i-th resolver port.
func (h *harness) addr(i int) string { return "127.0.0.1:" + strconv.Itoa(h.base+i) }

// mapPort makes resolver port i carry the Service port portName of Service
// svc, owned by ElastiService es in namespace "ns".
func (h *harness) mapPort(es, svc string, proxy *elastiv1alpha1.ProxySpec, ports ...elastiv1alpha1.ProxyPort) {
	h.ports.Set(resolvertest.ElastiService("ns", es, svc, proxy, ports...))
}

func (h *harness) proxyPort(i int, name, appProtocol string) elastiv1alpha1.ProxyPort {
	return elastiv1alpha1.ProxyPort{Name: name, Port: 80, AppProtocol: appProtocol, Protocol: "TCP", ResolverPort: int32(h.base + i)}
}

// ready publishes the Service's own slice with one ready endpoint per
// upstream address ("127.0.0.1:port"; every upstream must share the port
// number here, as pods do, so tests pass one address per slice name).
func (h *harness) ready(svc, sliceName, portName string, upstream string) {
	host, port, err := net.SplitHostPort(upstream)
	if err != nil {
		h.t.Fatalf("upstream address %q: %v", upstream, err)
	}
	p, _ := strconv.Atoi(port)
	h.endpoints.Update(resolvertest.Slice("ns", sliceName, svc, portName, int32(p), resolvertest.ReadyEP(host)))
}

// eventually waits for cond, checking it on a short period; it is for
// observing state the resolver has no event for (a gauge), never a sleep
// standing in for an assertion.
func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (h *harness) held(es string) int {
	return h.r.hold.Queue().Held(types.NamespacedName{Namespace: "ns", Name: es})
}

// client returns an HTTP/1.1 client with a fresh pool.
func (h *harness) client() *http.Client {
	return &http.Client{Timeout: waitTimeout, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1000}}
}

// fakeActivator records activation calls and can fail them.
type fakeActivator struct {
	mu     sync.Mutex
	calls  map[string]int
	fail   int // fail this many calls first
	called chan string
	onCall func(namespace, name string)
}

func newFakeActivator() *fakeActivator {
	return &fakeActivator{calls: map[string]int{}, called: make(chan string, 10000)}
}

type statusErr int

func (e statusErr) Error() string   { return "status " + strconv.Itoa(int(e)) }
func (e statusErr) HTTPStatus() int { return int(e) }

func (f *fakeActivator) Activate(_ context.Context, namespace, name string) (*contract.ActivationResponse, error) {
	f.mu.Lock()
	f.calls[namespace+"/"+name]++
	failing := f.fail > 0
	if failing {
		f.fail--
	}
	onCall := f.onCall
	f.mu.Unlock()
	f.called <- namespace + "/" + name
	if failing {
		return nil, statusErr(http.StatusInternalServerError)
	}
	if onCall != nil {
		onCall(namespace, name)
	}
	return &contract.ActivationResponse{Replicas: 1}, nil
}

func (f *fakeActivator) count(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[key]
}

// waitCalled waits for the next activation call.
func (f *fakeActivator) waitCalled(t testing.TB) string {
	t.Helper()
	select {
	case k := <-f.called:
		return k
	case <-time.After(waitTimeout):
		t.Fatal("no activation call")
		return ""
	}
}

// result is an HTTP response or error from a goroutine.
type result struct {
	status int
	body   string
	header http.Header
	err    error
}

// seenRequest is what a recordingUpstream executed.
type seenRequest struct {
	method, uri, proto string
	body               string
}

// recordingUpstream stands in for a pod that counts every request it
// executes: the way to prove a request was never forwarded, or was
// forwarded exactly once.
type recordingUpstream struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []seenRequest
}

// startH2C starts an upstream serving handler over HTTP/1.1 and cleartext
// HTTP/2 with prior knowledge.
func startH2C(t testing.TB, handler http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(handler)
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// h2cClient speaks cleartext HTTP/2 with prior knowledge.
func h2cClient() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Timeout: waitTimeout, Transport: &http.Transport{Protocols: &p}}
}

// newRecordingUpstream starts one, speaking HTTP/1.1 and cleartext HTTP/2.
func newRecordingUpstream(t testing.TB) *recordingUpstream {
	t.Helper()
	u := &recordingUpstream{}
	u.srv = startH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return // the request never arrived whole: not executed
		}
		u.mu.Lock()
		u.seen = append(u.seen, seenRequest{method: r.Method, uri: r.RequestURI, proto: r.Proto, body: string(body)})
		u.mu.Unlock()
		fmt.Fprintf(w, "%s %d", r.Method, len(body))
	}))
	return u
}

func (u *recordingUpstream) addr() string { return u.srv.Listener.Addr().String() }

// requests returns what it executed so far.
func (u *recordingUpstream) requests() []seenRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.seen)
}

// tcpRecorder stands in for a TCP pod: it counts accepted connections and
// echoes what each sends.
type tcpRecorder struct {
	address string
	mu      sync.Mutex
	count   int
}

func newTCPRecorder(t testing.TB) *tcpRecorder {
	t.Helper()
	u := &tcpRecorder{}
	u.address = tcpPod(t, func(c net.Conn) {
		u.mu.Lock()
		u.count++
		u.mu.Unlock()
		_, _ = io.Copy(c, c)
	})
	return u
}

// tcpPod stands in for a TCP pod on loopback: each connection it accepts
// is served by serve, in a goroutine of its own, and closed after. It
// returns the pod's address.
func tcpPod(t testing.TB, serve func(c net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return l.Addr().String()
}

func (u *tcpRecorder) addr() string { return u.address }

func (u *tcpRecorder) connections() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.count
}

// heldGauge reads elasti_resolver_held_requests for es.
func (h *harness) heldGauge(es string) float64 {
	return testutil.ToFloat64(h.r.metrics.Held.WithLabelValues("ns", es))
}

// waitReleased waits until es holds nothing, by the queue and the gauge.
func (h *harness) waitReleased(es string) {
	h.t.Helper()
	h.eventually("the hold slot is freed", func() bool { return h.held(es) == 0 })
	h.eventually("the held gauge is 0", func() bool { return h.heldGauge(es) == 0 })
}
