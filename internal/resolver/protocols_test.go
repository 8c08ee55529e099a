package resolver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

func TestWebSocketEchoThroughHold(t *testing.T) {
	h := newHarness(t, 1, nil)
	upgrader := websocket.Upgrader{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		for {
			mt, msg, err := c.ReadMessage()
			if err != nil {
				return
			}
			if err := c.WriteMessage(mt, append([]byte("echo: "), msg...)); err != nil {
				return
			}
		}
	}))
	t.Cleanup(up.Close)
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "ws", ""))

	type dialed struct {
		c   *websocket.Conn
		err error
	}
	done := make(chan dialed, 1)
	go func() {
		d := websocket.Dialer{HandshakeTimeout: waitTimeout}
		c, _, err := d.Dial("ws://"+h.addr(0)+"/socket", nil)
		done <- dialed{c, err}
	}()
	h.act.waitCalled(t)
	h.ready("websvc", "websvc-abc", "ws", upstreamAddr(up))
	d := <-done
	if d.err != nil {
		t.Fatalf("websocket dial through the resolver: %v", d.err)
	}
	defer d.c.Close()
	_ = d.c.SetReadDeadline(time.Now().Add(waitTimeout))
	for _, msg := range []string{"hello", "again"} {
		if err := d.c.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		_, got, err := d.c.ReadMessage()
		if err != nil || string(got) != "echo: "+msg {
			t.Fatalf("echo = %q, %v", got, err)
		}
	}
}

func startGRPC(t *testing.T) (addr string, hs *health.Server) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs = health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return l.Addr().String(), hs
}

func TestGRPCUnaryAndServerStreamingOverH2C(t *testing.T) {
	h := newHarness(t, 1, nil)
	upAddr, hs := startGRPC(t)
	hs.SetServingStatus("demo", healthpb.HealthCheckResponse_SERVING)
	h.mapPort("web", "grpcsvc", nil, h.proxyPort(0, "api", "grpc"))

	conn, err := grpc.NewClient(h.addr(0), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	// Unary, held until the endpoint appears.
	type checked struct {
		resp *healthpb.HealthCheckResponse
		err  error
	}
	done := make(chan checked, 1)
	go func() {
		r, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: "demo"})
		done <- checked{r, err}
	}()
	h.act.waitCalled(t)
	h.ready("grpcsvc", "grpcsvc-abc", "api", upAddr)
	c := <-done
	if c.err != nil || c.resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check = %v, %v; want SERVING", c.resp, c.err)
	}

	// A status in trailers comes through: an unknown service is NotFound.
	_, err = client.Check(ctx, &healthpb.HealthCheckRequest{Service: "nope"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("Check(unknown) = %v, want NotFound from the trailers", err)
	}

	// Server streaming: each status change arrives as its own message.
	stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{Service: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	want := []healthpb.HealthCheckResponse_ServingStatus{
		healthpb.HealthCheckResponse_SERVING,
		healthpb.HealthCheckResponse_NOT_SERVING,
		healthpb.HealthCheckResponse_SERVING,
	}
	for i, w := range want {
		if i > 0 {
			hs.SetServingStatus("demo", w)
		}
		msg, err := stream.Recv()
		if err != nil {
			t.Fatalf("Watch message %d: %v", i, err)
		}
		if msg.GetStatus() != w {
			t.Fatalf("Watch message %d = %v, want %v", i, msg.GetStatus(), w)
		}
	}
	cancel()
	if _, err := stream.Recv(); status.Code(err) != codes.Canceled && !errors.Is(err, context.Canceled) {
		t.Fatalf("after cancel: %v, want Canceled", err)
	}
}

// tcpEchoAfterEOF reads the whole request until the client half-closes, then
// answers with it and closes: it only works if half-close is passed on. A
// value on accepted marks each connection it accepts.
func tcpEchoAfterEOF(t *testing.T) (addr string, accepted <-chan struct{}) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	acc := make(chan struct{}, 10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			acc <- struct{}{}
			go func() {
				defer c.Close()
				data, err := io.ReadAll(c)
				if err != nil {
					return
				}
				_, _ = c.Write(append([]byte("echo: "), data...))
			}()
		}
	}()
	return l.Addr().String(), acc
}

// TestTCPHeldThenSplicedWithHalfClose: bytes sent while held are replayed,
// and a half-close once spliced is passed on. (A half-close while held
// cannot be told from a client leaving; see held_test.go.)
func TestTCPHeldThenSplicedWithHalfClose(t *testing.T) {
	h := newHarness(t, 1, nil)
	upAddr, accepted := tcpEchoAfterEOF(t)
	h.mapPort("db", "dbsvc", nil, h.proxyPort(0, "postgres", ""))

	c, err := net.Dial("tcp", h.addr(0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(waitTimeout))
	if _, err := c.Write([]byte("hello over tcp")); err != nil {
		t.Fatal(err)
	}
	h.act.waitCalled(t)
	h.ready("dbsvc", "dbsvc-abc", "postgres", upAddr)
	select {
	case <-accepted:
	case <-time.After(waitTimeout):
		t.Fatal("the held connection was not forwarded")
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "echo: hello over tcp" {
		t.Fatalf("read %q, %v", got, err)
	}
}

func TestTCPInteractiveSplice(t *testing.T) {
	h := newHarness(t, 1, nil)
	up := newTCPRecorder(t)
	h.mapPort("db", "dbsvc", nil, h.proxyPort(0, "redis", ""))
	h.ready("dbsvc", "dbsvc-abc", "redis", up.addr())
	c, err := net.Dial("tcp", h.addr(0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(waitTimeout))
	buf := make([]byte, 5)
	for _, msg := range []string{"ping1", "ping2", "ping3"} {
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != msg {
			t.Fatalf("echo = %q, %v", buf, err)
		}
	}
}

func TestTCPClientGoneWhileHeldFreesSlot(t *testing.T) {
	h := newHarness(t, 1, nil)
	h.mapPort("db", "dbsvc", nil, h.proxyPort(0, "postgres", ""))
	c, err := net.Dial("tcp", h.addr(0))
	if err != nil {
		t.Fatal(err)
	}
	h.eventually("the connection is held", func() bool { return h.held("db") == 1 })
	c.Close()
	h.eventually("the slot is freed", func() bool { return h.held("db") == 0 })
}

func TestTCPTimeoutAndQueueFullClose(t *testing.T) {
	h := newHarness(t, 2, nil)
	h.mapPort("db", "dbsvc", &elastiv1alpha1.ProxySpec{HoldTimeout: "300ms"}, h.proxyPort(0, "postgres", ""))
	h.mapPort("mq", "mqsvc", &elastiv1alpha1.ProxySpec{MaxHeldRequests: 1}, h.proxyPort(1, "amqp", ""))

	closed := func(c net.Conn) bool {
		_ = c.SetDeadline(time.Now().Add(waitTimeout))
		n, err := c.Read(make([]byte, 1))
		return n == 0 && err != nil
	}
	c, err := net.Dial("tcp", h.addr(0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !closed(c) {
		t.Fatal("held connection not closed at the hold timeout")
	}
	if v := testutil.ToFloat64(h.r.metrics.TimedOut.WithLabelValues("ns", "db")); v != 1 {
		t.Errorf("timed out metric = %v, want 1", v)
	}

	first, err := net.Dial("tcp", h.addr(1))
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	h.eventually("the first connection is held", func() bool { return h.held("mq") == 1 })
	second, err := net.Dial("tcp", h.addr(1))
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if !closed(second) {
		t.Fatal("connection beyond the hold bound not closed")
	}
	if v := testutil.ToFloat64(h.r.metrics.Rejected.WithLabelValues("ns", "mq", ReasonQueueFull)); v != 1 {
		t.Errorf("rejected{queue_full} = %v, want 1", v)
	}
}

// TestH2CBalancedAcrossEndpoints: requests multiplexed on one client
// connection are spread over the ready endpoints, as HTTP/1.1 requests are,
// instead of all riding one upstream connection to one pod.
func TestH2CBalancedAcrossEndpoints(t *testing.T) {
	const n = 20
	h := newHarness(t, 1, nil)
	// Every upstream answers only once all n requests have arrived, so the
	// n streams are open on the client's connection together, before the
	// first answer's GOAWAY moves the client off the resolver.
	var arrived atomic.Int32
	all := make(chan struct{})
	pod := func(name string) string {
		return upstreamAddr(startH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if arrived.Add(1) == n {
				close(all)
			}
			select {
			case <-all:
			case <-r.Context().Done():
				return
			}
			fmt.Fprint(w, name)
		})))
	}
	h.mapPort("web", "grpcsvc", nil, h.proxyPort(0, "grpc", ""))
	h.ready("grpcsvc", "grpcsvc-a", "grpc", pod("a"))
	h.ready("grpcsvc", "grpcsvc-b", "grpc", pod("b"))

	c := h2cClient()
	var mu sync.Mutex
	clientConns := map[string]bool{}
	perPod := map[string]int{}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
				mu.Lock()
				clientConns[info.Conn.LocalAddr().String()] = true
				mu.Unlock()
			}}
			req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodPost, "http://"+h.addr(0)+"/rpc", strings.NewReader("msg"))
			resp, err := c.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			mu.Lock()
			perPod[string(b)]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(clientConns) != 1 {
		t.Fatalf("the client used %d connections; the test needs its requests on one", len(clientConns))
	}
	if perPod["a"] == 0 || perPod["b"] == 0 || perPod["a"]+perPod["b"] != n {
		t.Fatalf("requests per pod = %v; want all %d spread over both", perPod, n)
	}
}
