package park

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/http/httpguts"

	"elasti.dev/elasti/internal/resolver/hold"
)

// headOf is what of a parsed request its re-read from requestHead must
// give back unchanged.
type headOf struct {
	Method, RequestURI, Proto, Host string
	Header                          http.Header
	ContentLength                   int64
	Close                           bool
}

// parsedHead takes what must survive the round trip from r. Header values
// are compared without surrounding spaces and tabs: HTTP field values do
// not include them, and every parser trims them, but textproto leaves a
// trailing space where an obsolete line folding continues a value with a
// blank line ("A: b\r\n \r\n" gives "b "), which no head on the wire
// can reproduce.
func parsedHead(r *http.Request) headOf {
	h := http.Header{}
	for name, values := range r.Header {
		for _, v := range values {
			h[name] = append(h[name], strings.Trim(v, " \t"))
		}
	}
	return headOf{r.Method, r.RequestURI, r.Proto, r.Host, h, r.ContentLength, r.Close}
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
		// Found by FuzzRequestHead: a value folded onto a blank line.
		"0 * HTTP/1.0\n0000:00000\n \n\n",
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

// tcpPair is both ends of one loopback TCP connection, closed when t ends.
func tcpPair(t *testing.T) (server, client net.Conn) {
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

// TestParkedWatch checks both ways a parked request's client is watched: the
// shared epoll set for sockets (Linux) and a read of its own for anything
// else (net.Pipe here). A client that closes ends the hold as gone; one that
// sends more is still there, and what it sent is kept for the server.
func TestParkedWatch(t *testing.T) {
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
				if !errors.Is(err, hold.ErrClientGone) {
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

// FuzzHeadParks checks that every first request the resolver would park on
// arrival (headParks) is one http.Server takes to its handler: parking one
// it answers 400 instead would hold it, and wake the target, for nothing.
func FuzzHeadParks(f *testing.F) {
	f.Add("GET /a?b HTTP/1.1\r\nHost: web\r\nX: 1\r\nX: 2\r\n\r\n")
	f.Add("GET / HTTP/1.0\r\n\r\n")
	f.Add("GET http://h/p HTTP/1.1\r\nHost: h\r\n\r\n")
	f.Add("GET / HTTP/1.1\r\nHost: a b\r\n\r\n")
	f.Add("GET / HTTP/1.1\r\nHost: web\r\nX\x01: v\r\n\r\n")
	f.Add("OPTIONS * HTTP/1.1\r\nHost: web\r\nExpect: 100-continue\r\n\r\n")
	f.Add("OPTIONS * HTTP/1.0\n00000:\n\n")
	f.Fuzz(func(t *testing.T, raw string) {
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil || !headParks(req) {
			return
		}
		if status := serveOne(t, raw); status != http.StatusNoContent {
			t.Fatalf("parked on arrival, but http.Server answers %d to %q", status, raw)
		}
	})
}

// serveOne has an http.Server read raw from a connection and returns the
// status of its answer: 204 from its handler, or the server's own.
func serveOne(t *testing.T, raw string) int {
	srv := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }),
		ReadHeaderTimeout: 5 * time.Second,
	}
	l := NewConnListener()
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	server, client := net.Pipe()
	defer client.Close()
	go l.Push(server)
	// The pipe is synchronous, and the server reads what follows the first
	// request only after answering it.
	go func() { _, _ = io.WriteString(client, raw) }()
	_ = client.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(client), nil)
	if err != nil {
		t.Fatalf("no answer from http.Server to %q: %v", raw, err)
	}
	res.Body.Close()
	return res.StatusCode
}
