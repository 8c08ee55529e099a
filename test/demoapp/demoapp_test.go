package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	return string(body)
}

func TestHTTPCountsRequestsAndEchoesWebSocket(t *testing.T) {
	srv := httptest.NewServer(newHTTPHandler("pod-a", true, false, nil, nil))
	defer srv.Close()

	if body := get(t, srv.URL+"/x"); body != "hello from pod-a: GET /x\n" {
		t.Errorf("body %q", body)
	}
	get(t, srv.URL+"/")
	if m := get(t, srv.URL+"/metrics"); !strings.Contains(m, `http_requests_total{code="200",method="get"} 2`) {
		t.Errorf("metrics lack the request count:\n%s", m)
	}

	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.WriteMessage(websocket.TextMessage, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if _, msg, err := conn.ReadMessage(); err != nil || string(msg) != "hi" {
		t.Errorf("websocket echo = %q, %v", msg, err)
	}
	if m := get(t, srv.URL+"/metrics"); !strings.Contains(m, "websocket_connections_open 1\n") {
		t.Errorf("metrics do not count the open WebSocket:\n%s", m)
	}
	conn.Close()
	deadline := time.Now().Add(5 * time.Second)
	for m := get(t, srv.URL+"/metrics"); !strings.Contains(m, "websocket_connections_open 0\n"); m = get(t, srv.URL+"/metrics") {
		if time.Now().After(deadline) {
			t.Fatalf("the closed WebSocket is still counted:\n%s", m)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestHTTPNamesThePeer(t *testing.T) {
	srv := httptest.NewServer(newHTTPHandler("pod-a", false, false, nil, nil))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get(PeerHeader); got != "127.0.0.1" {
		t.Errorf("%s = %q, want the client's address 127.0.0.1", PeerHeader, got)
	}
}

func TestTCPEcho(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "executed")
	executed, err := openLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveTCPEcho(ctx, lis, executed) }()
	conn, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintln(conn, "ping")
	if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil || line != "ping\n" {
		t.Errorf("echo = %q, %v", line, err)
	}
	conn.Close()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serveTCPEcho: %v", err)
	}
	if got := readFile(t, path); got != "tcp ping_\n" {
		t.Errorf("ledger = %q, want the connection's first bytes", got)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestHTTPLedgerBodyAndDrain: "/" reads the body, answers its size and
// digest, and records the request ID only then; once draining, answers
// carry Connection: close so keep-alive clients reconnect elsewhere.
func TestHTTPLedgerBodyAndDrain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "executed")
	executed, err := openLedger(path)
	if err != nil {
		t.Fatal(err)
	}
	var draining atomic.Bool
	srv := httptest.NewServer(newHTTPHandler("pod-a", false, false, executed, &draining))
	defer srv.Close()

	post := func(id string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/charge", strings.NewReader("abc"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(RequestIDHeader, id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := "hello from pod-a: POST /charge\nbody 3 bytes sha256 ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\n"
		if string(body) != want {
			t.Errorf("body %q, want %q", body, want)
		}
		return resp
	}
	if resp := post("r-1"); resp.Close {
		t.Error("Connection: close before draining")
	}
	draining.Store(true)
	if resp := post("r-2"); !resp.Close {
		t.Error("no Connection: close while draining")
	}
	if got := readFile(t, path); got != "http r-1\nhttp r-2\n" {
		t.Errorf("ledger = %q", got)
	}
}

func TestGRPCHealthAndEcho(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newGRPCServer()
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health = %v, %v", resp, err)
	}
	var out wrapperspb.StringValue
	if err := conn.Invoke(ctx, EchoMethod, wrapperspb.String("ping"), &out); err != nil || out.GetValue() != "ping" {
		t.Errorf("echo = %q, %v", out.GetValue(), err)
	}
}

// freeAddr returns a loopback address nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	return lis.Addr().String()
}

// TestDrainServesNewConnectionsAfterStop: after the stop signal the app
// still accepts new connections for the drain period (as kube-proxy may
// still send them), then closes every listener and returns.
func TestDrainServesNewConnectionsAfterStop(t *testing.T) {
	const drain = 3 * time.Second
	o := options{httpAddr: freeAddr(t), grpcAddr: "", tcpAddr: freeAddr(t), drain: drain}
	stop, signal := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(stop, o) }()
	url := "http://" + o.httpAddr + "/"
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("app never answered: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	signal()
	stopped := time.Now()
	time.Sleep(300 * time.Millisecond)
	// A new connection, as a node whose kube-proxy has not caught up opens.
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Post(url, "text/plain", strings.NewReader("late"))
	if err != nil {
		t.Fatalf("new HTTP connection during the drain: %v", err)
	}
	resp.Body.Close()
	conn, err := net.Dial("tcp", o.tcpAddr)
	if err != nil {
		t.Fatalf("new TCP connection during the drain: %v", err)
	}
	conn.Close()

	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		if d := time.Since(stopped); d < drain {
			t.Fatalf("returned %s after the stop signal, before the %s drain ended", d, drain)
		}
	case <-time.After(drain + 15*time.Second):
		t.Fatal("run did not return after the drain")
	}
	if _, err := net.Dial("tcp", o.httpAddr); err == nil {
		t.Fatal("HTTP still listening after the drain")
	}
}

func TestBurnUsesCPUAndRefusesBadDurations(t *testing.T) {
	srv := httptest.NewServer(newHTTPHandler("pod-a", false, false, nil, nil))
	defer srv.Close()
	get := func(q string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/burn" + q)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	start := time.Now()
	if code, body := get("?ms=30"); code != http.StatusOK || !strings.HasPrefix(body, "burned 30ms") {
		t.Errorf("?ms=30: %d %q", code, body)
	}
	if took := time.Since(start); took < 30*time.Millisecond {
		t.Errorf("?ms=30 answered after %s", took)
	}
	for _, q := range []string{"", "?ms=0", "?ms=-5", "?ms=1001", "?ms=abc"} {
		if code, _ := get(q); code != http.StatusBadRequest {
			t.Errorf("/burn%s: %d, want 400", q, code)
		}
	}
}

func TestParseHold(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{in: "", want: 0},
		{in: "0", want: 0},
		{in: "4096", want: 4096},
		{in: "2Ki", want: 2 << 10},
		{in: "500Mi", want: 500 << 20},
		{in: "1Gi", want: 1 << 30},
		{in: "-1Mi", bad: true},
		{in: "0.5", bad: true},
		{in: "lots", bad: true},
	} {
		got, err := parseHold(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("parseHold(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

// The held memory has every page written, so the kernel backs it.
func TestHoldMemoryWritesEveryPage(t *testing.T) {
	const n = 1<<20 + 100 // the last page only partly used
	b := holdMemory(n)
	if len(b) != n {
		t.Fatalf("held %d bytes, want %d", len(b), n)
	}
	page := os.Getpagesize()
	for i := 0; i < n; i += page {
		if b[i] == 0 {
			t.Fatalf("page at byte %d was never written", i)
		}
	}
	if holdMemory(0) != nil {
		t.Error("holdMemory(0) allocated")
	}
}
