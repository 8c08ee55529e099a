package resolver

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"elasti.dev/elasti/internal/resolver/park"
)

// Held means watched: a held request or connection whose client left is
// never forwarded, whatever it had sent, and its slot is freed at once.

// unsent is how many bytes c's kernel holds that the peer has not
// acknowledged (SIOCOUTQ).
func unsent(t *testing.T, c *net.TCPConn) int {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var ioctlErr error
	if err := rc.Control(func(fd uintptr) { n, ioctlErr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) }); err != nil {
		t.Fatal(err)
	}
	if ioctlErr != nil {
		t.Fatalf("SIOCOUTQ: %v", ioctlErr)
	}
	return n
}

// dialRaw opens a plain TCP connection to the resolver.
func dialRaw(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(waitTimeout))
	return c.(*net.TCPConn)
}

// leave ends a client connection the way a client gives up.
var leave = map[string]func(c *net.TCPConn){
	"close": func(c *net.TCPConn) { c.Close() },
	"reset": func(c *net.TCPConn) { _ = c.SetLinger(0); c.Close() },
}

// probe sends one request through the resolver once the target is ready;
// it proves the path works, so that an upstream that saw nothing else saw
// nothing because nothing else was forwarded.
func probe(t *testing.T, h *harness) {
	t.Helper()
	r := get(h.client(), context.Background(), "http://"+h.addr(0)+"/probe", nil)
	if r.err != nil || r.status != http.StatusOK {
		t.Fatalf("probe: status %d err %v body %q", r.status, r.err, r.body)
	}
}

func TestHeldHTTP1ClientGoneIsNeverForwarded(t *testing.T) {
	const bound = 1024
	post := func(hdr string, length int) string {
		return fmt.Sprintf("POST /charge HTTP/1.1\r\nHost: websvc\r\n%sContent-Length: %d\r\n\r\n", hdr, length)
	}
	past := strings.Repeat("p", 1<<20) // far past the bound and the socket buffers
	whole := strings.Repeat("w", 64<<10)
	for _, tc := range []struct {
		name, raw, leave string
		// more is written after raw without waiting: it may block on the
		// resolver's backpressure until the client leaves.
		more string
		// afterHeld is sent once the request is held, before leaving.
		afterHeld string
		// inHandler holds bodiless requests in their handler, not parked.
		inHandler bool
		// queued: the close waits behind unread bytes.
		queued bool
	}{
		{name: "POST with a complete body, then close", raw: post("", 11) + "amount=1234", leave: "close"},
		{name: "POST with a complete body, then reset", raw: post("", 11) + "amount=1234", leave: "reset"},
		{name: "chunked POST, then close", raw: "POST /charge HTTP/1.1\r\nHost: websvc\r\nTransfer-Encoding: chunked\r\n\r\nb\r\namount=1234\r\n0\r\n\r\n", leave: "close"},
		{name: "POST cut short, then close", raw: post("", 100) + "amount=", leave: "close"},
		{name: "POST at the bound, then close", raw: post("", len(past)) + past[:bound], leave: "close"},
		{name: "POST past the bound, then close", raw: post("", len(past)), more: past, leave: "close"},
		// The whole body fits the socket buffers: the close is queued
		// behind bytes the resolver has not read, and the pod could get a
		// whole request if the resolver did not watch the body's end.
		{name: "POST past the bound, all of it sent, then close", raw: post("", len(whole)) + whole, leave: "close", queued: true},
		{name: "chunked POST past the bound, all of it sent, then close", raw: "POST /charge HTTP/1.1\r\nHost: websvc\r\nTransfer-Encoding: chunked\r\n\r\n" + fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(whole), whole), leave: "close", queued: true},
		{name: "POST past the bound, then reset", raw: post("", len(past)), more: past, leave: "reset"},
		{name: "POST waiting for 100 Continue, then close", raw: post("Expect: 100-continue\r\n", len(past)), leave: "close"},
		{name: "POST that stops waiting for 100 Continue, then close", raw: post("Expect: 100-continue\r\n", len(past)), more: past, leave: "close"},
		{name: "GET, then close", raw: "GET /charge HTTP/1.1\r\nHost: websvc\r\n\r\n", leave: "close"},
		{name: "GET, then reset", raw: "GET /charge HTTP/1.1\r\nHost: websvc\r\n\r\n", leave: "reset"},
		{name: "GET, a stray CRLF, then close", raw: "GET /charge HTTP/1.1\r\nHost: websvc\r\n\r\n", afterHeld: "\r\n", leave: "close"},
		{name: "GET, a pipelined GET, then close", raw: "GET /charge HTTP/1.1\r\nHost: websvc\r\n\r\n", afterHeld: "GET /again HTTP/1.1\r\nHost: websvc\r\n\r\n", leave: "close"},
		{name: "GET held in its handler, a stray CRLF, then close", raw: "GET /charge HTTP/1.1\r\nHost: websvc\r\n\r\n", afterHeld: "\r\n", leave: "close", inHandler: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 1, func(o *Options) {
				o.Hold.ReadAheadBytes = bound
				if tc.inHandler {
					o.Hold.Parking = park.HoldInHandler
				}
			})
			up := newRecordingUpstream(t)
			h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
			c := dialRaw(t, h.addr(0))
			if _, err := c.Write([]byte(tc.raw)); err != nil {
				t.Fatal(err)
			}
			if tc.more != "" {
				go func() { _, _ = c.Write([]byte(tc.more)) }()
			}
			h.eventually("the request is held", func() bool { return h.held("web") == 1 })
			if tc.afterHeld != "" {
				if _, err := c.Write([]byte(tc.afterHeld)); err != nil {
					t.Fatal(err)
				}
				time.Sleep(50 * time.Millisecond) // for a watch that would stop at the bytes
			}
			leave[tc.leave](c)
			if !tc.queued && (tc.more == "" || tc.leave == "reset") {
				h.waitReleased("web")
			}
			// A close queued behind unread bytes reaches the resolver
			// only as it reads them, after the wake.
			h.ready("websvc", "websvc-abc", "http", up.addr())
			probe(t, h)
			h.waitReleased("web")
			got := up.requests()
			if len(got) != 1 || got[0].uri != "/probe" {
				t.Fatalf("upstream executed %d requests, %v; want only the probe: the departed request must never be forwarded", len(got), uris(got))
			}
		})
	}
}

func uris(seen []seenRequest) []string {
	var out []string
	for _, r := range seen {
		out = append(out, r.method+" "+r.uri)
	}
	return out
}

func TestHeldH2CClientGoneIsNeverForwarded(t *testing.T) {
	for _, tc := range []struct {
		name string
		body func() io.Reader
	}{
		{"stream still open", func() io.Reader {
			pr, pw := io.Pipe()
			go func() { _, _ = pw.Write([]byte("amount=")) }() // and never ends
			return pr
		}},
		{"complete body", func() io.Reader { return strings.NewReader("amount=1234") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 1, nil)
			up := newRecordingUpstream(t)
			h.mapPort("web", "websvc", nil, h.proxyPort(0, "h2c", ""))
			c := h2cClient()
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+h.addr(0)+"/charge", tc.body())
			done := make(chan error, 1)
			go func() {
				resp, err := c.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				done <- err
			}()
			h.eventually("the request is held", func() bool { return h.held("web") == 1 })
			cancel() // RST_STREAM; the connection stays
			if err := <-done; err == nil {
				t.Fatal("the cancelled held request got an answer")
			}
			h.waitReleased("web")

			h.ready("websvc", "websvc-abc", "h2c", up.addr())
			resp, err := c.Get("http://" + h.addr(0) + "/probe")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			got := up.requests()
			if len(got) != 1 || got[0].uri != "/probe" {
				t.Fatalf("upstream executed %+v; want only the probe", got)
			}
		})
	}
}

func TestHeldPOSTDeliveredOnceWithFullBody(t *testing.T) {
	t.Run("whole body while held", func(t *testing.T) {
		h := newHarness(t, 1, nil)
		up := newRecordingUpstream(t)
		h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
		body := bytes.Repeat([]byte("0123456789abcdef"), 3<<10) // 48 KiB, under the default bound
		done := make(chan result, 1)
		go func() {
			resp, err := h.client().Post("http://"+h.addr(0)+"/charge", "application/octet-stream", bytes.NewReader(body))
			if err != nil {
				done <- result{err: err}
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			done <- result{status: resp.StatusCode, body: string(b)}
		}()
		h.eventually("the request is held", func() bool { return h.held("web") == 1 })
		h.ready("websvc", "websvc-abc", "http", up.addr())
		r := <-done
		if r.err != nil || r.status != http.StatusOK {
			t.Fatalf("status %d err %v", r.status, r.err)
		}
		want := []seenRequest{{method: "POST", uri: "/charge", proto: "HTTP/1.1", body: string(body)}}
		if diff := cmp.Diff(want, up.requests(), cmp.AllowUnexported(seenRequest{})); diff != "" {
			t.Errorf("upstream executed (-want +got):\n%s", diff)
		}
	})

	// The rest of a body that arrives after the release streams on, beyond
	// the read-ahead bound too; a body of exactly the bound is held.
	chunk := func(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }
	a, b := strings.Repeat("a", 500), strings.Repeat("b", 2499)+"!"
	exact := strings.Repeat("x", 1023) + "!"
	for _, tc := range []struct {
		name            string
		whileHeld, rest string
		body            string
	}{
		{
			"rest after the release, past the bound",
			"POST /charge HTTP/1.1\r\nHost: websvc\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(a),
			chunk(b[:1000]) + chunk(b[1000:]) + "0\r\n\r\n",
			a + b,
		},
		{
			"exactly the bound",
			"POST /charge HTTP/1.1\r\nHost: websvc\r\nContent-Length: 1024\r\n\r\n" + exact,
			"",
			exact,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 1, func(o *Options) { o.Hold.ReadAheadBytes = 1024 })
			up := newRecordingUpstream(t)
			h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
			c := dialRaw(t, h.addr(0))
			if _, err := c.Write([]byte(tc.whileHeld)); err != nil {
				t.Fatal(err)
			}
			h.eventually("the request is held", func() bool { return h.held("web") == 1 })
			h.ready("websvc", "websvc-abc", "http", up.addr())
			h.waitReleased("web")
			if _, err := c.Write([]byte(tc.rest)); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK || string(got) != fmt.Sprintf("POST %d", len(tc.body)) {
				t.Fatalf("status %d body %q", resp.StatusCode, got)
			}
			seen := up.requests()
			if len(seen) != 1 || seen[0].body != tc.body {
				t.Fatalf("upstream executed %d requests (want 1), body intact: %v", len(seen), len(seen) == 1 && seen[0].body == tc.body)
			}
		})
	}
}

func TestHeldTCPClientGoneIsNeverDialed(t *testing.T) {
	// Past the bound and the socket buffers, a close waits behind the bytes
	// the resolver has not read, and is seen only when it reads them, at
	// the release, before it dials (docs/resolver.md, "Held means
	// watched"); a reset is seen at once.
	for _, how := range []string{"close", "reset", "half-close", "past the bound, then close", "past the bound, then reset"} {
		t.Run(how, func(t *testing.T) {
			h := newHarness(t, 1, func(o *Options) { o.Hold.ReadAheadBytes = 1024 })
			up := newTCPRecorder(t)
			h.mapPort("db", "dbsvc", nil, h.proxyPort(0, "postgres", ""))
			c := dialRaw(t, h.addr(0))
			h.eventually("the connection is held", func() bool { return h.held("db") == 1 })
			if _, err := c.Write([]byte("INSERT INTO charges VALUES (1234)")); err != nil {
				t.Fatal(err)
			}
			queued := false
			if rest, ok := strings.CutPrefix(how, "past the bound, then "); ok {
				// Far more than the read-ahead bound, so that the close
				// queues behind unread data; less than half of
				// park.MaxBacklog, so that the drain at release reaches
				// the close. (8 MiB, as before, could outgrow the drain's
				// bound once loopback's autotuned buffers held most of it,
				// and the connection was then dialed: seen on a busy
				// machine.)
				go func() { _, _ = c.Write(bytes.Repeat([]byte("z"), park.MaxBacklog/2)) }()
				// Until the client's kernel keeps bytes the resolver has
				// not taken (its receive buffer is full), on two looks in
				// a row, so that the close queues behind them. A fixed
				// 100 ms was not enough on a busy machine: once the
				// writer had not run by then, the close went first, and
				// the release came before the watch saw it.
				backedUp := 0
				h.eventually("the client's send queue backed up", func() bool {
					if unsent(t, c) > 0 {
						backedUp++
					} else {
						backedUp = 0
					}
					return backedUp >= 2
				})
				how, queued = rest, rest == "close"
			}
			if how == "half-close" {
				// Looks the same as a close on the wire.
				_ = c.CloseWrite()
			} else {
				leave[how](c)
			}
			if !queued {
				h.waitReleased("db")
			}

			h.ready("dbsvc", "dbsvc-abc", "postgres", up.addr())
			h.waitReleased("db")
			p := dialRaw(t, h.addr(0))
			if _, err := p.Write([]byte("probe")); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 5)
			if _, err := io.ReadFull(p, buf); err != nil || string(buf) != "probe" {
				t.Fatalf("probe echo = %q, %v", buf, err)
			}
			if n := up.connections(); n != 1 {
				t.Fatalf("upstream accepted %d connections; want only the probe's", n)
			}
		})
	}
}

func TestHeldTCPDataReplayedInOrder(t *testing.T) {
	h := newHarness(t, 1, nil)
	up := newTCPRecorder(t)
	h.mapPort("db", "dbsvc", nil, h.proxyPort(0, "redis", ""))
	c := dialRaw(t, h.addr(0))
	h.eventually("the connection is held", func() bool { return h.held("db") == 1 })
	// 60 KiB in three writes: more than one read, under the default bound.
	var sent []byte
	for i := range 3 {
		part := bytes.Repeat([]byte{byte('a' + i)}, 20<<10)
		sent = append(sent, part...)
		if _, err := c.Write(part); err != nil {
			t.Fatal(err)
		}
	}
	h.ready("dbsvc", "dbsvc-abc", "redis", up.addr())
	got := make([]byte, len(sent))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, sent) {
		t.Fatalf("echo of the held bytes: equal %v, err %v", bytes.Equal(got, sent), err)
	}
	// Once spliced, a half-close is passed on, and the pod's close back.
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if rest, err := io.ReadAll(c); err != nil || len(rest) != 0 {
		t.Fatalf("after half-close: %q, %v; want EOF", rest, err)
	}
	if n := up.connections(); n != 1 {
		t.Errorf("upstream accepted %d connections, want 1", n)
	}
}

// TestHeldTCPBacklogEchoedAsItIsSent: a held connection's backlog (here
// 6 MiB, drained at release) goes to a pod that answers as it reads (an
// echo) while the answers already flow back. With small socket buffers on
// the resolver's side of the pod connection, writing the whole backlog
// before reading any answer deadlocked: the pod stopped reading while its
// echo waited, and the resolver's write waited for the pod.
func TestHeldTCPBacklogEchoedAsItIsSent(t *testing.T) {
	const size = 6 << 20
	h := newHarness(t, 1, func(o *Options) {
		o.Upstream.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetReadBuffer(64 << 10)
				_ = tc.SetWriteBuffer(64 << 10)
			}
			return c, err
		}
	})
	// An echo pod with small socket buffers too.
	pod := tcpPod(t, func(c net.Conn) {
		_ = c.(*net.TCPConn).SetReadBuffer(64 << 10)
		_ = c.(*net.TCPConn).SetWriteBuffer(64 << 10)
		_, _ = io.Copy(c, c)
	})
	h.mapPort("db", "dbsvc", nil, h.proxyPort(0, "postgres", ""))
	c := dialRaw(t, h.addr(0))
	h.eventually("the connection is held", func() bool { return h.held("db") == 1 })
	sent := make(chan error, 1)
	go func() {
		// No half-close: while held, that reads as a client that left.
		_, err := c.Write(bytes.Repeat([]byte("e"), size))
		sent <- err
	}()
	// The client's send settles on what the resolver and the sockets
	// take before the wake.
	time.Sleep(300 * time.Millisecond)
	h.ready("dbsvc", "dbsvc-abc", "postgres", pod)
	_ = c.SetReadDeadline(time.Now().Add(waitTimeout))
	n, err := io.CopyN(io.Discard, c, size)
	if err != nil {
		t.Fatalf("echoed %d of %d bytes, %v", n, size, err)
	}
	if err := <-sent; err != nil {
		t.Errorf("send: %v", err)
	}
}
