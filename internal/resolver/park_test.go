package resolver

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/resolver/park"
)

// TestParkedRequestsKeepOneGoroutineEach holds bodiless requests, which the
// resolver parks, and checks that each costs one goroutine (its hold), not
// net/http's two (the serve loop and its background read), which is what
// makes a parked request cheap (park.go). The same requests held in their
// handler keep the two.
func TestParkedRequestsKeepOneGoroutineEach(t *testing.T) {
	for _, tc := range []struct {
		name      string
		inHandler bool
		atLeast   float64
		atMost    float64
	}{
		{"parked", false, 0.9, 1.2},
		{"in handler", true, 1.9, 2.2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 50
			h := newHarness(t, 1, func(o *Options) {
				if tc.inHandler {
					o.Hold.Parking = park.HoldInHandler
				}
			})
			up := newRecordingUpstream(t)
			h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
			settle()
			before := runtime.NumGoroutine()
			conns := make([]*net.TCPConn, n)
			for i := range conns {
				conns[i] = dialRaw(t, h.addr(0))
				if _, err := conns[i].Write([]byte("GET /held HTTP/1.1\r\nHost: websvc\r\n\r\n")); err != nil {
					t.Fatal(err)
				}
			}
			h.eventually("every request is held", func() bool { return h.held("web") == n })
			settle()
			perHeld := float64(runtime.NumGoroutine()-before) / n
			if perHeld < tc.atLeast || perHeld > tc.atMost {
				t.Fatalf("%.2f goroutines per held request; want %.1f to %.1f", perHeld, tc.atLeast, tc.atMost)
			}
			h.ready("websvc", "websvc-abc", "http", up.addr())
			for _, c := range conns {
				res, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(res.Body)
				if res.StatusCode != http.StatusOK || string(body) != "GET 0" {
					t.Fatalf("status %d body %q", res.StatusCode, body)
				}
			}
			if got := len(up.requests()); got != n {
				t.Fatalf("upstream executed %d requests; want %d", got, n)
			}
		})
	}
}

// TestParkedRequestSameAsHeldInHandler sends the same requests, with
// repeated, empty and oddly cased header fields, a query that is not valid
// escaping and a pipelined request behind them, held in their handler,
// parked from it and parked on arrival, and checks that the pod receives
// the same request every way, and that the client gets the same answer: the first request once, with
// Connection: close, and the pipelined one not at all (proxy mode asks
// every client to reconnect, and the unanswered request is the client's to
// send again on a new connection).
func TestParkedRequestSameAsHeldInHandler(t *testing.T) {
	const raw = "GET /first?a=1&a=2&b=%zz HTTP/1.1\r\nHost: websvc:80\r\nx-lower: v\r\nX-Empty:\r\n" +
		"Cookie: a=1\r\nCookie: b=2\r\nUser-Agent: test/1\r\n\r\n" +
		"GET /second HTTP/1.1\r\nHost: websvc\r\n\r\n"
	type seen struct {
		URI, Host string
		Header    http.Header
	}
	run := func(t *testing.T, parking park.Parking) (got []seen, answer string) {
		var mu sync.Mutex
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			hdr := r.Header.Clone()
			// Added by the proxy hop, the same either way but for the port.
			hdr.Del("X-Forwarded-For")
			got = append(got, seen{r.RequestURI, r.Host, hdr})
			_, _ = io.WriteString(w, "answer to "+r.RequestURI)
		}))
		t.Cleanup(up.Close)
		h := newHarness(t, 1, func(o *Options) { o.Hold.Parking = parking })
		h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
		c := dialRaw(t, h.addr(0))
		if _, err := c.Write([]byte(raw)); err != nil {
			t.Fatal(err)
		}
		h.eventually("the request is held", func() bool { return h.held("web") == 1 })
		h.ready("websvc", "websvc-abc", "http", upstreamAddr(up))
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		all, err := io.ReadAll(c)
		if err != nil {
			t.Fatalf("reading until the resolver closes: %v", err)
		}
		res, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(all)), nil)
		if err != nil {
			t.Fatalf("answer %q: %v", all, err)
		}
		body, _ := io.ReadAll(res.Body)
		answer = fmt.Sprintf("%s close=%t %s", res.Status, res.Close, body)
		if n := bytes.Count(all, []byte("HTTP/1.1 ")); n != 1 {
			t.Fatalf("%d responses on the connection; want 1:\n%s", n, all)
		}
		wantOnArrival := int64(0)
		if parking == park.ParkOnArrival {
			wantOnArrival = 1
		}
		if got := h.r.parker.ParkedOnArrival(); got != wantOnArrival {
			t.Fatalf("parking %d: %d requests parked on arrival; want %d", parking, got, wantOnArrival)
		}
		mu.Lock()
		defer mu.Unlock()
		return got, answer
	}
	inHandler, inHandlerAnswer := run(t, park.HoldInHandler)
	if len(inHandler) != 1 || inHandler[0].URI != "/first?a=1&a=2&b=%zz" {
		t.Fatalf("the pod saw %+v; want the first request once", inHandler)
	}
	if !strings.HasPrefix(inHandlerAnswer, "200 OK close=true answer to /first") {
		t.Fatalf("answer held in handler: %q", inHandlerAnswer)
	}
	for _, parking := range []park.Parking{park.ParkFromHandler, park.ParkOnArrival} {
		parked, parkedAnswer := run(t, parking)
		if d := cmp.Diff(inHandler, parked); d != "" {
			t.Fatalf("parking %d: the pod saw a parked request differently (-in handler +parked):\n%s", parking, d)
		}
		if parkedAnswer != inHandlerAnswer {
			t.Fatalf("answers: in handler %q, parking %d %q", inHandlerAnswer, parking, parkedAnswer)
		}
	}
}

// TestParkedTwiceOnOneConnection parks a request until its hold times out
// (504, and the connection stays open), then sends a second request on the
// same keep-alive connection, which is parked again and forwarded once the
// target is ready: a connection that came back from a hold can be held
// again, and the pod sees only the second request.
func TestParkedTwiceOnOneConnection(t *testing.T) {
	h := newHarness(t, 1, nil)
	up := newRecordingUpstream(t)
	h.mapPort("web", "websvc", &elastiv1alpha1.ProxySpec{HoldTimeout: "300ms"}, h.proxyPort(0, "http", ""))
	c := dialRaw(t, h.addr(0))
	br := bufio.NewReader(c)
	write := func(path string) {
		t.Helper()
		if _, err := c.Write([]byte("GET " + path + " HTTP/1.1\r\nHost: websvc\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
	}
	read := func(path string) *http.Response {
		t.Helper()
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	write("/timed-out")
	if res := read("/timed-out"); res.StatusCode != http.StatusGatewayTimeout || res.Close {
		t.Fatalf("first request: status %d, close %t; want 504 on a connection kept open", res.StatusCode, res.Close)
	}
	write("/second")
	h.eventually("the second request is held", func() bool { return h.held("web") == 1 })
	h.ready("websvc", "websvc-abc", "http", up.addr())
	if res := read("/second"); res.StatusCode != http.StatusOK {
		t.Fatalf("second request: status %d", res.StatusCode)
	}
	got := up.requests()
	if len(got) != 1 || got[0].uri != "/second" {
		t.Fatalf("upstream executed %+v; want only /second", got)
	}
}

// TestParkOnArrivalLeavesTheRestToTheServer sends first requests to a target
// at zero, parked on arrival and parked from their handler only, and checks
// that the client gets the same answer either way, that the same requests
// are held, wake the target and reach the pod, and that only requests the
// server would take to the hold were parked on arrival. Malformed and
// oversized heads, requests the handlers before the hold answer, requests
// with a body or an upgrade, and heads that come in pieces, late or never
// are among them.
func TestParkOnArrivalLeavesTheRestToTheServer(t *testing.T) {
	const get = "GET /a HTTP/1.1\r\nHost: websvc\r\n\r\n"
	for _, tc := range []struct {
		name  string
		proxy *elastiv1alpha1.ProxySpec
		send  []string
		// closeWrite half-closes the connection after send.
		closeWrite bool
		held       bool
		// wakes is set where the target is woken without a held request.
		wakes bool
		// status is the answer; 0 is a connection closed without one.
		status    int
		onArrival int64
	}{
		{name: "GET", send: []string{get}, held: true, status: 200, onArrival: 1},
		{name: "head in pieces", send: []string{"GET /slow HT", "TP/1.1\r\nHo", "st: websvc\r\n\r\n"}, held: true, status: 200, onArrival: 1},
		{name: "HTTP/1.0 without Host", send: []string{"GET /old HTTP/1.0\r\n\r\n"}, held: true, status: 200, onArrival: 1},
		{name: "absolute form", send: []string{"GET http://websvc/abs HTTP/1.1\r\nHost: websvc\r\n\r\n"}, held: true, status: 200},
		{name: "with a body", send: []string{"POST /p HTTP/1.1\r\nHost: websvc\r\nContent-Length: 4\r\n\r\nbody"}, held: true, status: 200},
		{name: "upgrade", send: []string{"GET /ws HTTP/1.1\r\nHost: websvc\r\nConnection: Upgrade\r\nUpgrade: foo\r\n\r\n"}, held: true, status: 200},
		{name: "invalid header name", send: []string{"GET /x HTTP/1.1\r\nHost: websvc\r\nBad Name: v\r\n\r\n"}, status: 400},
		{name: "HTTP/1.1 without Host", send: []string{"GET /x HTTP/1.1\r\n\r\n"}, status: 400},
		{name: "two Host fields", send: []string{"GET /x HTTP/1.1\r\nHost: websvc\r\nHost: other\r\n\r\n"}, status: 400},
		{name: "not HTTP", send: []string{"NONSENSE\r\n\r\n"}, status: 400},
		{name: "header over the limit", send: []string{"GET /x HTTP/1.1\r\nHost: websvc\r\nX-Big: " + strings.Repeat("a", 8<<10) + "\r\n\r\n"}, status: 431},
		{name: "CONNECT", send: []string{"CONNECT web:443 HTTP/1.1\r\nHost: web:443\r\n\r\n"}, status: 405},
		{name: "OPTIONS *", send: []string{"OPTIONS * HTTP/1.1\r\nHost: websvc\r\n\r\n"}, status: 200},
		{name: "Expect", send: []string{"GET /x HTTP/1.1\r\nHost: websvc\r\nExpect: something\r\n\r\n"}, status: 417},
		{name: "static response", proxy: staticProxy(kubeletRule()), send: []string{"GET /healthz HTTP/1.1\r\nHost: websvc\r\nUser-Agent: kube-probe/1.37\r\n\r\n"}, status: 200},
		{name: "no static response matches", proxy: staticProxy(kubeletRule()), send: []string{get}, held: true, status: 200, onArrival: 1},
		{name: "waking page", proxy: pageProxy(5, ""), send: []string{"GET / HTTP/1.1\r\nHost: websvc\r\nAccept: text/html\r\n\r\n"}, wakes: true, status: 503},
		{name: "not a page load", proxy: pageProxy(5, ""), send: []string{get}, held: true, status: 200, onArrival: 1},
		{name: "closes before a head", closeWrite: true},
		{name: "closes within the head", send: []string{"GET /x HTTP/1.1\r\nHo"}, closeWrite: true, status: 400},
		{name: "never sends a head", send: []string{"GET /x HTTP/1.1\r\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			type outcome struct {
				Status      int
				Held        bool
				Activations int
				Pod         []string
			}
			run := func(parking park.Parking) outcome {
				h := newHarness(t, 1, func(o *Options) {
					o.Hold.Parking = parking
					// The "never sends a head" case waits this long.
					o.HTTP.ReadHeaderTimeout = 300 * time.Millisecond
					o.HTTP.MaxHeaderBytes = 1 << 10
				})
				up := newRecordingUpstream(t)
				h.mapPort("web", "websvc", tc.proxy, h.proxyPort(0, "http", ""))
				c := dialRaw(t, h.addr(0))
				for i, chunk := range tc.send {
					if i > 0 {
						time.Sleep(50 * time.Millisecond)
					}
					if _, err := c.Write([]byte(chunk)); err != nil {
						t.Fatal(err)
					}
				}
				if tc.closeWrite {
					_ = c.CloseWrite()
				}
				var o outcome
				if tc.held || tc.wakes {
					// The activation call is made asynchronously.
					h.eventually("the target is woken", func() bool { return h.act.count("ns/web") > 0 })
				}
				if tc.held {
					h.eventually("the request is held", func() bool { return h.held("web") == 1 })
					o.Held = true
					h.ready("websvc", "websvc-abc", "http", up.addr())
				}
				_ = c.SetReadDeadline(time.Now().Add(waitTimeout))
				if res, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
					o.Status = res.StatusCode
					_, _ = io.Copy(io.Discard, res.Body)
				} else if park.IsTimeout(err) {
					t.Fatalf("parking %d: no answer and the connection still open", parking)
				}
				o.Activations = h.act.count("ns/web")
				for _, r := range up.requests() {
					o.Pod = append(o.Pod, r.method+" "+r.uri)
				}
				want := tc.onArrival
				if parking != park.ParkOnArrival {
					want = 0
				}
				if got := h.r.parker.ParkedOnArrival(); got != want {
					t.Fatalf("parking %d: %d requests parked on arrival; want %d", parking, got, want)
				}
				return o
			}
			fromHandler := run(park.ParkFromHandler)
			if fromHandler.Status != tc.status {
				t.Fatalf("parked from the handler: status %d; want %d", fromHandler.Status, tc.status)
			}
			if d := cmp.Diff(fromHandler, run(park.ParkOnArrival)); d != "" {
				t.Fatalf("parked on arrival, the outcome differs (-from handler +on arrival):\n%s", d)
			}
		})
	}
}

// TestDrainWithAHeadHalfSent: a drain does not wait for a client that sent
// part of a request head when the ports closed. Its connection goes to the
// server, as if the server had read those bytes, and the server's Shutdown
// closes it as a connection that never sent a request (after net/http's 5 s
// for those), long before the ReadHeaderTimeout would.
func TestDrainWithAHeadHalfSent(t *testing.T) {
	h := newHarness(t, 1, func(o *Options) { o.HTTP.ReadHeaderTimeout = 10 * time.Minute })
	up := newRecordingUpstream(t)
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	c := dialRaw(t, h.addr(0))
	if _, err := c.Write([]byte("GET /half HTTP/1.1\r\nHo")); err != nil {
		t.Fatal(err)
	}
	settle()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	periodEnd := make(chan struct{})
	close(periodEnd)
	h.r.drain(ctx, periodEnd)
	if ctx.Err() != nil {
		t.Fatal("the drain waited until its timeout")
	}
	_ = c.SetReadDeadline(time.Now().Add(waitTimeout))
	if got, err := io.ReadAll(c); err != nil || len(got) != 0 {
		t.Fatalf("the client read %q, %v; want the connection closed without an answer", got, err)
	}
	if got := up.requests(); len(got) != 0 {
		t.Fatalf("the pod saw %+v", got)
	}
}
