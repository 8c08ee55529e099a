package resolver

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/resolver/resolvertest"
	"elasti.dev/elasti/internal/resolver/upstream"
)

// echoUpstream stands in for a pod: it reports what it received.
func echoUpstream(t testing.TB) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Seen-Host", r.Host)
		w.Header().Set("X-Seen-XFF", r.Header.Get("X-Forwarded-For"))
		w.Header().Set("X-Seen-XFH", r.Header.Get("X-Forwarded-Host"))
		w.Header().Set("X-Seen-XFP", r.Header.Get("X-Forwarded-Proto"))
		w.Header().Set("X-Seen-Hop", r.Header.Get("X-Hop"))
		w.Header().Set("X-Seen-Proto", r.Proto)
		fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.RequestURI(), body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func upstreamAddr(srv *httptest.Server) string { return srv.Listener.Addr().String() }

func get(c *http.Client, ctx context.Context, url string, hdr map[string]string) result {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return result{err: err}
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	h := resp.Header.Clone()
	if resp.Close {
		h.Set("X-Test-Close", "true")
	}
	return result{status: resp.StatusCode, body: string(b), header: h, err: err}
}

func TestHeldRequestReleasedByEndpointEvent(t *testing.T) {
	h := newHarness(t, 1, nil)
	up := echoUpstream(t)
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))

	done := make(chan result, 1)
	go func() {
		done <- get(h.client(), context.Background(), "http://"+h.addr(0)+"/hello?x=1", map[string]string{
			"Host":              "websvc.ns.svc.cluster.local",
			"X-Forwarded-For":   "203.0.113.7",
			"X-Forwarded-Proto": "https",
			"Connection":        "X-Hop",
			"X-Hop":             "must not pass",
		})
	}()
	if got := h.act.waitCalled(t); got != "ns/web" {
		t.Fatalf("activation for %q, want ns/web", got)
	}
	select {
	case r := <-done:
		t.Fatalf("request finished while no endpoint was ready: %+v", r)
	default:
	}
	h.ready("websvc", "websvc-abc", "http", upstreamAddr(up))
	var r result
	select {
	case r = <-done:
	case <-time.After(waitTimeout):
		t.Fatal("held request was not released by the endpoint event")
	}
	if r.err != nil {
		t.Fatalf("request: %v", r.err)
	}
	got := map[string]string{
		"status": fmt.Sprint(r.status), "body": r.body,
		"host": r.header.Get("X-Seen-Host"), "xff": r.header.Get("X-Seen-XFF"),
		"xfh": r.header.Get("X-Seen-XFH"), "xfp": r.header.Get("X-Seen-XFP"),
		"hop": r.header.Get("X-Seen-Hop"), "close": r.header.Get("X-Test-Close"),
	}
	want := map[string]string{
		"status": "200", "body": "GET /hello?x=1 ",
		"host": "websvc.ns.svc.cluster.local", "xff": "203.0.113.7, 127.0.0.1",
		"xfh": "websvc.ns.svc.cluster.local", "xfp": "https",
		"hop": "", "close": "true",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("forwarded request (-want +got):\n%s", diff)
	}
	if n := h.act.count("ns/web"); n != 1 {
		t.Errorf("activation calls = %d, want 1", n)
	}
	if v := testutil.ToFloat64(h.r.metrics.Forwarded.WithLabelValues("ns", "web")); v != 1 {
		t.Errorf("forwarded metric = %v, want 1", v)
	}
	h.eventually("the held gauge is back to 0", func() bool {
		return testutil.ToFloat64(h.r.metrics.Held.WithLabelValues("ns", "web")) == 0
	})
}

func TestThousandHeldRequestsAllSucceed(t *testing.T) {
	const n = 1000
	h := newHarness(t, 1, nil)
	up := echoUpstream(t)
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	c := h.client()
	results := make(chan result, n)
	for i := range n {
		go func() {
			results <- get(c, context.Background(), fmt.Sprintf("http://%s/r/%d", h.addr(0), i), nil)
		}()
	}
	h.eventually("all requests are held", func() bool { return h.held("web") == n })
	h.ready("websvc", "websvc-abc", "http", upstreamAddr(up))
	bad := 0
	for range n {
		r := <-results
		if r.err != nil || r.status != http.StatusOK {
			bad++
			if bad < 5 {
				t.Errorf("request failed: status %d err %v body %q", r.status, r.err, r.body)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d of %d held requests failed", bad, n)
	}
	if calls := h.act.count("ns/web"); calls < 1 || calls > 3 {
		t.Errorf("activation calls = %d, want one (deduplicated), a few at most", calls)
	}
}

func TestRequestsForwardedAtOnceWhenReady(t *testing.T) {
	h := newHarness(t, 1, func(o *Options) { o.Activation.TrafficReportInterval = time.Hour })
	up := echoUpstream(t)
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	h.ready("websvc", "websvc-abc", "http", upstreamAddr(up))
	for range 5 {
		r := get(h.client(), context.Background(), "http://"+h.addr(0)+"/", nil)
		if r.err != nil || r.status != http.StatusOK {
			t.Fatalf("status %d err %v", r.status, r.err)
		}
		if r.header.Get("X-Test-Close") != "true" {
			t.Errorf("response without Connection: close although the target is ready: %v", r.header)
		}
	}
	// Nothing was held, so the waker never called; the one call is the
	// throttled traffic report (traffic_test.go).
	h.act.waitCalled(t)
	if n := h.act.count("ns/web"); n != 1 {
		t.Errorf("activation calls = %d, want the one traffic report", n)
	}
}

func TestStreamingResponseArrivesIncrementally(t *testing.T) {
	h := newHarness(t, 1, nil)
	proceed := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-proceed:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "data: two\n\n")
	}))
	t.Cleanup(up.Close)
	t.Cleanup(func() {
		select {
		case <-proceed:
		default:
			close(proceed)
		}
	})
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	h.ready("websvc", "websvc-abc", "http", upstreamAddr(up))

	resp, err := h.client().Get("http://" + h.addr(0) + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	// The first event must arrive while the upstream is still blocked
	// before the second: nothing buffers the stream.
	line, err := br.ReadString('\n')
	if err != nil || line != "data: one\n" {
		t.Fatalf("first event = %q, %v", line, err)
	}
	close(proceed)
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "\ndata: two\n\n" {
		t.Fatalf("rest = %q, %v", rest, err)
	}
}

func TestLargeBodiesStreamBothWays(t *testing.T) {
	h := newHarness(t, 1, nil)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		_, _ = io.Copy(w, r.Body) // echo while still reading
	}))
	t.Cleanup(up.Close)
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	h.ready("websvc", "websvc-abc", "http", upstreamAddr(up))
	const size = 32 << 20
	pr, pw := io.Pipe()
	go func() {
		chunk := []byte(strings.Repeat("x", 64<<10))
		for written := 0; written < size; written += len(chunk) {
			if _, err := pw.Write(chunk); err != nil {
				return
			}
		}
		_ = pw.Close()
	}()
	req, _ := http.NewRequest(http.MethodPost, "http://"+h.addr(0)+"/upload", pr)
	resp, err := h.client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || n != size {
		t.Fatalf("echoed %d bytes, err %v; want %d", n, err, size)
	}
}

func TestClientCancelWhileHeldFreesSlot(t *testing.T) {
	h := newHarness(t, 1, nil)
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan result, 1)
	go func() { done <- get(h.client(), ctx, "http://"+h.addr(0)+"/", nil) }()
	h.eventually("the request is held", func() bool { return h.held("web") == 1 })
	cancel()
	<-done
	h.eventually("the slot is freed", func() bool { return h.held("web") == 0 })
	h.eventually("the held gauge is 0", func() bool {
		return testutil.ToFloat64(h.r.metrics.Held.WithLabelValues("ns", "web")) == 0
	})
}

func TestQueueFullAnd503(t *testing.T) {
	h := newHarness(t, 2, nil)
	h.mapPort("web", "websvc", &elastiv1alpha1.ProxySpec{MaxHeldRequests: 1}, h.proxyPort(0, "http", ""))
	h.mapPort("api", "apisvc", &elastiv1alpha1.ProxySpec{MaxHeldRequests: 1}, h.proxyPort(1, "http", ""))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go get(h.client(), ctx, "http://"+h.addr(0)+"/", nil)
	h.eventually("the first request is held", func() bool { return h.held("web") == 1 })
	r := get(h.client(), context.Background(), "http://"+h.addr(0)+"/", nil)
	if r.err != nil || r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
		t.Fatalf("second request: status %d Retry-After %q err %v; want 503 with Retry-After", r.status, r.header.Get("Retry-After"), r.err)
	}
	// Another Service still has its own slot.
	go get(h.client(), ctx, "http://"+h.addr(1)+"/", nil)
	h.eventually("another Service's request is held", func() bool { return h.held("api") == 1 })
	if v := testutil.ToFloat64(h.r.metrics.Rejected.WithLabelValues("ns", "web", ReasonQueueFull)); v != 1 {
		t.Errorf("rejected{queue_full} = %v, want 1", v)
	}
}

func TestHoldTimeoutGives504(t *testing.T) {
	h := newHarness(t, 1, nil)
	h.mapPort("web", "websvc", &elastiv1alpha1.ProxySpec{HoldTimeout: "300ms"}, h.proxyPort(0, "http", ""))
	r := get(h.client(), context.Background(), "http://"+h.addr(0)+"/", nil)
	if r.err != nil || r.status != http.StatusGatewayTimeout {
		t.Fatalf("status %d err %v, want 504", r.status, r.err)
	}
	if v := testutil.ToFloat64(h.r.metrics.TimedOut.WithLabelValues("ns", "web")); v != 1 {
		t.Errorf("timed out metric = %v, want 1", v)
	}
	if h.held("web") != 0 {
		t.Error("slot not freed after timeout")
	}
}

func TestUnmappedPortRefused(t *testing.T) {
	h := newHarness(t, 2, nil)
	r := get(h.client(), context.Background(), "http://"+h.addr(0)+"/", nil)
	if r.err != nil || r.status != http.StatusNotFound || !strings.Contains(r.body, "not mapped") {
		t.Fatalf("HTTP on unmapped port: status %d body %q err %v; want 404 saying so", r.status, r.body, r.err)
	}
	// Non-HTTP bytes: the connection is closed without an answer.
	c, err := net.Dial("tcp", h.addr(1))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Write([]byte("\x00\x01binary"))
	_ = c.SetReadDeadline(time.Now().Add(waitTimeout))
	if n, err := c.Read(make([]byte, 16)); err == nil || n != 0 {
		t.Fatalf("TCP on unmapped port read %d bytes, err %v; want a close", n, err)
	}
	h.eventually("both refusals are counted", func() bool {
		return testutil.ToFloat64(h.r.metrics.Rejected.WithLabelValues("", "", ReasonUnmappedPort)) == 2
	})
}

func TestLateMappingIsWaitedFor(t *testing.T) {
	h := newHarness(t, 1, func(o *Options) { o.Ports.UnmappedWait = waitTimeout })
	up := echoUpstream(t)
	h.ready("websvc", "websvc-abc", "http", upstreamAddr(up))
	done := make(chan result, 1)
	go func() { done <- get(h.client(), context.Background(), "http://"+h.addr(0)+"/late", nil) }()
	// Whether the connection arrives before or after the mapping, it must
	// be served; with a long UnmappedWait the order does not matter.
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	r := <-done
	if r.err != nil || r.status != http.StatusOK {
		t.Fatalf("status %d err %v", r.status, r.err)
	}
}

func TestHTTP2GoawayOnceReady(t *testing.T) {
	h := newHarness(t, 1, nil)
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "h2c", ""))
	h.ready("websvc", "websvc-abc", "h2c", upstreamAddr(upH2C(t)))
	c := h2cClient()
	var mu sync.Mutex
	var reused []bool
	for range 2 {
		trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
			mu.Lock()
			reused = append(reused, info.Reused)
			mu.Unlock()
		}}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodGet, "http://"+h.addr(0)+"/", nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusOK {
			t.Fatalf("got %s %d, want HTTP/2 200", resp.Proto, resp.StatusCode)
		}
		if resp.Header.Get("X-Seen-Proto") != "HTTP/2.0" {
			t.Errorf("upstream saw %q, want HTTP/2.0", resp.Header.Get("X-Seen-Proto"))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]bool{false, false}, reused); diff != "" {
		t.Errorf("connection reuse after GOAWAY (-want +got):\n%s", diff)
	}
}

// upH2C is an upstream that speaks cleartext HTTP/2 with prior knowledge.
func upH2C(t *testing.T) *httptest.Server {
	t.Helper()
	return startH2C(t, echoUpstream(t).Config.Handler)
}

func TestDialRetriesRefusedEndpoint(t *testing.T) {
	h := newHarness(t, 1, nil)
	up := echoUpstream(t)
	// A "pod" listed ready that refuses connections: a closed port.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := l.Addr().String()
	l.Close()
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	h.ready("websvc", "websvc-dead", "http", refused)
	h.ready("websvc", "websvc-live", "http", upstreamAddr(up))
	for i := range 10 {
		r := get(h.client(), context.Background(), fmt.Sprintf("http://%s/%d", h.addr(0), i), nil)
		if r.err != nil || r.status != http.StatusOK {
			t.Fatalf("request %d: status %d err %v body %q", i, r.status, r.err, r.body)
		}
	}
}

func TestDialWaitsForEndpointThatStartsListening(t *testing.T) {
	h := newHarness(t, 1, nil)
	// Reserve a port, list it ready while nothing listens, then start the
	// "pod" there: the refused dials must be retried, not answered 502.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	h.ready("websvc", "websvc-abc", "http", addr)
	done := make(chan result, 1)
	go func() { done <- get(h.client(), context.Background(), "http://"+h.addr(0)+"/", nil) }()
	// Give the dialer a moment to meet the refusal first. This sleep is not
	// an assertion: the request must succeed whichever comes first.
	time.Sleep(200 * time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("request finished before the pod listened: %+v", r)
	default:
	}
	l2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("could not re-bind %s: %v", addr, err)
	}
	srv := &http.Server{Handler: echoUpstream(t).Config.Handler}
	go func() { _ = srv.Serve(l2) }()
	t.Cleanup(func() { srv.Close() })
	r := <-done
	if r.err != nil || r.status != http.StatusOK {
		t.Fatalf("status %d err %v body %q", r.status, r.err, r.body)
	}
}

func TestMalformedRequestGets4xx(t *testing.T) {
	h := newHarness(t, 1, nil)
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	for _, raw := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: x\r\n\r\n",
		"GET /\x00 HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/9.9\r\n\r\n",
		"CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n",
		// Over net/http's default header limit (1 MiB), as a pod would refuse.
		"GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X-Big: "+strings.Repeat("y", 1000)+"\r\n", 1100) + "\r\n",
	} {
		c, err := net.Dial("tcp", h.addr(0))
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(waitTimeout))
		// Written while the answer is read: the server may answer before
		// it has read everything.
		go func() { _, _ = c.Write([]byte(raw)) }()
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err != nil {
			t.Errorf("%q: no response: %v", raw[:min(len(raw), 40)], err)
			continue
		}
		// 505 is the precise answer to an unknown HTTP version.
		if (resp.StatusCode < 400 || resp.StatusCode >= 500) && resp.StatusCode != http.StatusHTTPVersionNotSupported {
			t.Errorf("%q: status %d, want 4xx", raw[:min(len(raw), 40)], resp.StatusCode)
		}
	}
}

// TestRawQueryPassedByteForByte: proxy mode passes the query on as serve mode
// does, unparsed: signed URLs keep their signature, and a query Go cannot
// parse is not re-encoded, reordered or trimmed.
func TestRawQueryPassedByteForByte(t *testing.T) {
	const query = "b=2&a=1&sig=abc%2Fdef+x&empty=&x=%zz&semi=1;2&dup=2&dup=1&t=%7e%7E&bare"
	for _, tc := range []struct{ name, portName string }{{"HTTP/1.1", "http"}, {"h2c", "h2c"}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 1, nil)
			up := newRecordingUpstream(t)
			h.mapPort("web", "websvc", nil, h.proxyPort(0, tc.portName, ""))
			h.ready("websvc", "websvc-abc", tc.portName, up.addr())
			if tc.portName == "http" {
				c := dialRaw(t, h.addr(0))
				if _, err := c.Write([]byte("GET /signed?" + query + " HTTP/1.1\r\nHost: websvc\r\n\r\n")); err != nil {
					t.Fatal(err)
				}
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("response %v, %v", resp, err)
				}
				resp.Body.Close()
			} else {
				resp, err := h2cClient().Get("http://" + h.addr(0) + "/signed?" + query)
				if err != nil || resp.StatusCode != http.StatusOK {
					t.Fatalf("response %v, %v", resp, err)
				}
				resp.Body.Close()
			}
			got := up.requests()
			if len(got) != 1 {
				t.Fatalf("upstream executed %d requests, want 1", len(got))
			}
			if diff := cmp.Diff("/signed?"+query, got[0].uri); diff != "" {
				t.Errorf("request URI at the pod (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLargeHeaderPassesAsInServeMode: a 100 KiB header, which a Go pod takes
// in serve mode (1 MiB by default), also passes in proxy mode.
func TestLargeHeaderPassesAsInServeMode(t *testing.T) {
	big := strings.Repeat("y", 100<<10)
	up := startH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, len(r.Header.Get("X-Big")))
	}))
	for _, tc := range []struct {
		name, portName string
		client         *http.Client
	}{{"HTTP/1.1", "http", nil}, {"h2c", "h2c", h2cClient()}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 1, nil)
			h.mapPort("web", "websvc", nil, h.proxyPort(0, tc.portName, ""))
			h.ready("websvc", "websvc-abc", tc.portName, upstreamAddr(up))
			c := tc.client
			if c == nil {
				c = h.client()
			}
			r := get(c, context.Background(), "http://"+h.addr(0)+"/", map[string]string{"X-Big": big})
			if r.err != nil || r.status != http.StatusOK || r.body != fmt.Sprint(len(big)) {
				t.Fatalf("status %d body %q err %v; want 200 and the pod seeing %d bytes", r.status, r.body, r.err, len(big))
			}
		})
	}
}

// BenchmarkHTTPForward measures the L7 path to a ready endpoint: accept,
// port lookup, readiness check, dial, proxy, and the Connection: close that
// moves clients off the resolver.
func BenchmarkHTTPForward(b *testing.B) {
	h := newHarness(b, 1, func(o *Options) { o.Log = logr.Discard() })
	up := echoUpstream(b)
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	h.ready("websvc", "websvc-abc", "http", upstreamAddr(up))
	c := h.client()
	url := "http://" + h.addr(0) + "/bench"
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := c.Get(url)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	})
}

// closingPod stands in for a pod that shuts down: it answers the first
// request on each kept-alive connection, then resets that connection as
// soon as the next request's first bytes arrive, without reading them, as
// a server does that closes its idle connections while a request is on its
// way. It records the requests it ran.
type closingPod struct {
	l   net.Listener
	mu  sync.Mutex
	ran []string
}

func newClosingPod(t *testing.T) *closingPod {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	p := &closingPod{l: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *closingPod) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, req.Body)
	p.mu.Lock()
	p.ran = append(p.ran, req.Method+" "+req.URL.Path)
	p.mu.Unlock()
	_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	if _, err := br.Peek(1); err != nil {
		return
	}
	_ = c.(*net.TCPConn).SetLinger(0) // a reset, as for unread data
}

func (p *closingPod) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.ran...)
}

// TestPodClosingKeptAliveConnection: the termination race between the
// resolver and a pod that shuts down. A POST that meets the pod's close on
// the resolver's kept-alive connection may have run, so it is answered with
// a 502 that says so and is not sent again; a GET, which net/http knows to
// be idempotent, is sent again on a new connection and answered. Every
// answered request ran once.
func TestPodClosingKeptAliveConnection(t *testing.T) {
	h := newHarness(t, 1, nil)
	pod := newClosingPod(t)
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	h.ready("websvc", "websvc-abc", "http", pod.l.Addr().String())
	post := func(path string) result {
		req, _ := http.NewRequest(http.MethodPost, "http://"+h.addr(0)+path, strings.NewReader("payload"))
		resp, err := h.client().Do(req)
		if err != nil {
			return result{err: err}
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return result{status: resp.StatusCode, body: string(b), err: err}
	}

	// A POST after an answered one goes on the resolver's kept-alive
	// connection, which the pod resets, unless that connection was not
	// back in the resolver's pool yet: then it goes on a new one and is
	// answered, and the next POST meets the reset.
	var cut string
	answered := map[string]bool{}
	for i := 0; i < 20 && cut == ""; i++ {
		path := fmt.Sprintf("/post-%d", i)
		switch r := post(path); {
		case r.err == nil && r.status == http.StatusOK:
			answered["POST "+path] = true
		case r.err == nil && r.status == http.StatusBadGateway && strings.TrimSpace(r.body) == upstream.PodClosedMessage:
			cut = "POST " + path
		default:
			t.Fatalf("POST %s: status %d body %q err %v; want 200, or 502 %q", path, r.status, r.body, r.err, upstream.PodClosedMessage)
		}
	}
	if cut == "" {
		t.Fatal("no POST met the pod's close in 20: the resolver did not keep its connection alive")
	}
	// A GET, which net/http knows to be idempotent, is sent again on a new
	// connection when it meets the close, and answered.
	for i := range 3 {
		path := fmt.Sprintf("/get-%d", i)
		if g := get(h.client(), context.Background(), "http://"+h.addr(0)+path, nil); g.err != nil || g.status != http.StatusOK {
			t.Errorf("GET %s: status %d err %v", path, g.status, g.err)
		}
		answered["GET "+path] = true
	}
	ran := map[string]int{}
	for _, r := range pod.requests() {
		ran[r]++
	}
	if ran[cut] != 0 {
		t.Errorf("%s, answered with the 502, ran %d times", cut, ran[cut])
	}
	for r := range answered {
		if ran[r] != 1 {
			t.Errorf("%s, answered 200, ran %d times", r, ran[r])
		}
	}
}

// TestResolverFullGets503: past --max-held-total, a request for any
// ElastiService gets 503 with Retry-After, however few its own are, and
// counts as rejected{reason="resolver_full"}.
func TestResolverFullGets503(t *testing.T) {
	h := newHarness(t, 1, func(o *Options) { o.Hold.MaxHeldTotal = 2 })
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 2 {
		go func() { _ = get(h.client(), ctx, "http://"+h.addr(0)+"/", nil) }()
	}
	h.eventually("two requests held", func() bool { return h.held("web") == 2 })
	r := get(h.client(), context.Background(), "http://"+h.addr(0)+"/", nil)
	if r.err != nil || r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || !strings.Contains(r.body, "this resolver holds as many requests as it may") {
		t.Fatalf("status %d Retry-After %q body %q err %v; want 503 with Retry-After", r.status, r.header.Get("Retry-After"), r.body, r.err)
	}
	if v := testutil.ToFloat64(h.r.metrics.Rejected.WithLabelValues("ns", "web", ReasonResolverFull)); v != 1 {
		t.Errorf("rejected{resolver_full} = %v, want 1", v)
	}
}

// TestMisdirectedHostGets421: a request on web's resolver port whose Host
// names another Service of the cluster (another namespace, another Service
// of the same one, in any of the cluster's name forms) is answered 421,
// never held, never woken for and never forwarded, over keep-alive
// connections and h2c alike; web's own names, IP addresses and public
// names are served. This is what keeps a data plane that still routes a
// freed port from handing one Service's clients to another.
func TestMisdirectedHostGets421(t *testing.T) {
	h := newHarness(t, 1, nil)
	up := newRecordingUpstream(t)
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	// billing has had an ElastiService, so "<name>.billing" is a
	// Service's short name there.
	h.ports.Set(resolvertest.ElastiService("billing", "invoices", "invoices", nil))
	h.ready("websvc", "websvc-abc", "http", up.addr())
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		client *http.Client
	}{{"HTTP/1.1 keep-alive", h.client()}, {"h2c", h2cClient()}} {
		for _, host := range []string{"api", "api.ns", "invoices.billing", "invoices.billing.svc", "invoices.billing.svc.cluster.local:80", "web-0.api.ns.svc.cluster.local"} {
			r := get(c.client, ctx, "http://"+h.addr(0)+"/charge", map[string]string{"Host": host})
			if r.err != nil || r.status != http.StatusMisdirectedRequest {
				t.Errorf("%s, Host %s: status %d err %v, want 421", c.name, host, r.status, r.err)
			}
			if strings.Contains(r.body, "websvc") {
				t.Errorf("%s, Host %s: the 421 names the port's Service: %q", c.name, host, r.body)
			}
		}
		for _, host := range []string{"websvc", "websvc.ns", "websvc.ns.svc.cluster.local", "127.0.0.1", "shop.example.com"} {
			r := get(c.client, ctx, "http://"+h.addr(0)+"/ok", map[string]string{"Host": host})
			if r.err != nil || r.status != http.StatusOK {
				t.Errorf("%s, Host %s: status %d err %v, want 200 from websvc's pod", c.name, host, r.status, r.err)
			}
		}
	}
	for _, req := range up.requests() {
		if req.uri == "/charge" {
			t.Errorf("a misdirected request reached the pod: %+v", req)
		}
	}
	if got := len(up.requests()); got != 10 {
		t.Errorf("the pod got %d requests, want the 10 meant for it", got)
	}
	if v := testutil.ToFloat64(h.r.metrics.Rejected.WithLabelValues("ns", "web", ReasonMisdirected)); v != 12 {
		t.Errorf("misdirected rejections counted = %v, want 12", v)
	}
}
