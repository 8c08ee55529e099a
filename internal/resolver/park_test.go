package resolver

import (
	"bufio"
	"bytes"
	"errors"
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
	"golang.org/x/net/http/httpguts"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// headOf is what of a parsed request its re-read from requestHead must
// give back unchanged.
type headOf struct {
	Method, RequestURI, Proto, Host string
	Header                          http.Header
	ContentLength                   int64
	Close                           bool
}

func parsedHead(r *http.Request) headOf {
	return headOf{r.Method, r.RequestURI, r.Proto, r.Host, r.Header, r.ContentLength, r.Close}
}

// checkHeadRoundTrip parses raw as the server would, and if it is a request
// the resolver parks, checks that requestHead gives back a request that
// parses to the same thing.
func checkHeadRoundTrip(t *testing.T, raw string) {
	req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
	if err != nil || req.ProtoMajor != 1 || req.ContentLength != 0 || len(req.TransferEncoding) != 0 {
		return
	}
	// What http.Server answers 400 before any handler runs.
	if !httpguts.ValidHostHeader(req.Host) {
		return
	}
	for name, values := range req.Header {
		if !httpguts.ValidHeaderFieldName(name) {
			return
		}
		for _, v := range values {
			if !httpguts.ValidHeaderFieldValue(v) {
				return
			}
		}
	}
	head := requestHead(req)
	again, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
	if err != nil {
		t.Fatalf("request head of %q does not parse: %v\n%s", raw, err, head)
	}
	if d := cmp.Diff(parsedHead(req), parsedHead(again)); d != "" {
		t.Fatalf("request head of %q parses differently (-first +again):\n%s\nhead:\n%s", raw, d, head)
	}
}

func TestRequestHeadRoundTrip(t *testing.T) {
	for _, raw := range []string{
		"GET / HTTP/1.1\r\nHost: web\r\n\r\n",
		"GET /a%2Fb?x=1&x=2&y=%zz HTTP/1.1\r\nHost: web:8080\r\nAccept: text/html\r\nAccept: */*\r\n\r\n",
		"GET http://web.ns.svc/abs?q HTTP/1.1\r\nHost: web.ns.svc\r\n\r\n",
		"OPTIONS * HTTP/1.1\r\nHost: web\r\n\r\n",
		"HEAD /x HTTP/1.0\r\n\r\n",
		"GET /x HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
		"DELETE /item/7 HTTP/1.1\r\nhost: web\r\nx-lower: v\r\nX-Empty:\r\nCookie: a=1\r\nCookie: b=2\r\nConnection: close\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: web\r\nContent-Length: 0\r\nX-Spaces:   padded value  \r\n\r\n",
		"GET / HTTP/1.1\r\nHost: web\r\nUser-Agent: kube-probe/1.37\r\n\r\n",
	} {
		checkHeadRoundTrip(t, raw)
	}
}

// FuzzRequestHead checks that any request the resolver would park parses
// back, from the head it writes for it, to the same method, target,
// version, host and header fields.
func FuzzRequestHead(f *testing.F) {
	f.Add("GET /a?b HTTP/1.1\r\nHost: web\r\nX: 1\r\nX: 2\r\n\r\n")
	f.Add("GET http://h/p HTTP/1.0\r\n\r\n")
	f.Add("PUT /x HTTP/1.1\r\nHost: web\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
	f.Fuzz(func(t *testing.T, raw string) { checkHeadRoundTrip(t, raw) })
}

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
					o.Parking = HoldInHandler
				}
			})
			up := newRecordingUpstream(t)
			h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
			settle()
			before := runtime.NumGoroutine()
			conns := make([]*net.TCPConn, n)
			for i := range conns {
				conns[i] = dialRaw(t, h.addr(0))
				if _, err := conns[i].Write([]byte("GET /held HTTP/1.1\r\nHost: web\r\n\r\n")); err != nil {
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
// escaping and a pipelined request behind them, held in their handler and
// parked, and checks that the pod receives the same request either way, and
// that the client gets the same answer: the first request once, with
// Connection: close, and the pipelined one not at all (proxy mode asks
// every client to reconnect, and the unanswered request is the client's to
// send again on a new connection).
func TestParkedRequestSameAsHeldInHandler(t *testing.T) {
	const raw = "GET /first?a=1&a=2&b=%zz HTTP/1.1\r\nHost: web:80\r\nx-lower: v\r\nX-Empty:\r\n" +
		"Cookie: a=1\r\nCookie: b=2\r\nUser-Agent: test/1\r\n\r\n" +
		"GET /second HTTP/1.1\r\nHost: web\r\n\r\n"
	type seen struct {
		URI, Host string
		Header    http.Header
	}
	run := func(t *testing.T, inHandler bool) (got []seen, answer string) {
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
		h := newHarness(t, 1, func(o *Options) {
			if inHandler {
				o.Parking = HoldInHandler
			}
		})
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
		mu.Lock()
		defer mu.Unlock()
		return got, answer
	}
	inHandler, inHandlerAnswer := run(t, true)
	parked, parkedAnswer := run(t, false)
	if len(parked) != 1 || parked[0].URI != "/first?a=1&a=2&b=%zz" {
		t.Fatalf("the pod saw %+v; want the first request once", parked)
	}
	if d := cmp.Diff(inHandler, parked); d != "" {
		t.Fatalf("the pod saw a parked request differently (-in handler +parked):\n%s", d)
	}
	if inHandlerAnswer != parkedAnswer || !strings.HasPrefix(parkedAnswer, "200 OK close=true answer to /first") {
		t.Fatalf("answers: in handler %q, parked %q", inHandlerAnswer, parkedAnswer)
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
		if _, err := c.Write([]byte("GET " + path + " HTTP/1.1\r\nHost: web\r\n\r\n")); err != nil {
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

// TestParkedWatch checks both ways a parked request's client is watched: the
// shared epoll set for sockets (Linux) and a read of its own for anything
// else (net.Pipe here). A client that closes ends the hold as gone; one that
// sends more is still there, and what it sent is kept for the server.
func TestParkedWatch(t *testing.T) {
	tcpPair := func(t *testing.T) (server, client net.Conn) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		client, err = net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		server, err = l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { server.Close(); client.Close() })
		return server, client
	}
	pipePair := func(t *testing.T) (server, client net.Conn) {
		server, client = net.Pipe()
		t.Cleanup(func() { server.Close(); client.Close() })
		return server, client
	}
	for _, tc := range []struct {
		name string
		pair func(*testing.T) (net.Conn, net.Conn)
	}{{"socket", tcpPair}, {"pipe", pipePair}} {
		newParked := func(c net.Conn) *parked {
			return &parked{conn: c, rest: c, head: []byte("HEAD"), done: func() {}, left: make(chan struct{})}
		}
		t.Run(tc.name+": client closes", func(t *testing.T) {
			server, client := tc.pair(t)
			p := newParked(server)
			gone := p.watch()
			client.Close()
			select {
			case err := <-gone:
				if !errors.Is(err, ErrClientGone) {
					t.Fatalf("watch reported %v; want ErrClientGone", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the watch did not see the client close")
			}
			select {
			case <-p.left:
			default:
				t.Fatal("left is not closed after the client left")
			}
			p.stopWatch()
		})
		t.Run(tc.name+": client sends more", func(t *testing.T) {
			server, client := tc.pair(t)
			p := newParked(server)
			gone := p.watch()
			go func() { _, _ = client.Write([]byte("GET /next HTTP/1.1\r\n")) }()
			// The watch ends, or keeps watching, without calling the
			// client gone.
			select {
			case err := <-gone:
				t.Fatalf("a client that sent more was reported gone: %v", err)
			case <-time.After(200 * time.Millisecond):
			}
			p.stopWatch()
			// Whatever the watch read is in head; the rest is still
			// on the connection: together they are what was sent.
			_ = server.SetReadDeadline(time.Now().Add(10 * time.Second))
			rest := make([]byte, len("GET /next HTTP/1.1\r\n")+len("HEAD")-len(p.head))
			if _, err := io.ReadFull(server, rest); err != nil {
				t.Fatalf("reading the rest after the watch: %v", err)
			}
			if got := string(p.head) + string(rest); got != "HEADGET /next HTTP/1.1\r\n" {
				t.Fatalf("head and rest are %q", got)
			}
		})
	}
}
