package resolver

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/resolver/endpoints"
	"elasti.dev/elasti/internal/resolver/park"
	"elasti.dev/elasti/internal/resolver/ports"
	"elasti.dev/elasti/internal/resolver/resolvertest"
	"elasti.dev/elasti/internal/resolver/route"
)

// FuzzHTTPEntry feeds arbitrary bytes to the L7 entry path as one client
// connection on a mapped HTTP port whose target is ready, and checks that
// nothing panics and that whatever comes back as HTTP/1.x is a well-formed
// response. The port's ElastiService has static response rules, so that
// requests are classified against them too (staticresponse.go).
func FuzzHTTPEntry(f *testing.F) {
	for _, seed := range []string{
		"GET / HTTP/1.1\r\nHost: websvc\r\n\r\n",
		"POST /x HTTP/1.1\r\nHost: websvc\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"GET /ws HTTP/1.1\r\nHost: websvc\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
		"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00",
		"GET http://169.254.169.254/latest HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n",
		"CONNECT 10.0.0.1:22 HTTP/1.1\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
		"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03",
		"",
		"GET /healthz?probe&kind=a%zz HTTP/1.1\r\nHost: websvc\r\nuser-agent: kube-probe/1.37\r\n\r\nHEAD /healthz HTTP/1.1\r\nHost: websvc\r\nUser-Agent: x UptimeRobot\r\n\r\n",
		"POST /hook HTTP/1.1\r\nHost: websvc\r\nContent-Length: 5\r\n\r\nhelloPOST /hook HTTP/1.1\r\nHost: websvc\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
	} {
		f.Add([]byte(seed))
	}

	var panicked atomic.Value
	log := funcr.New(func(_, args string) {
		if strings.Contains(args, "panic") {
			panicked.Store(args)
		}
	}, funcr.Options{Verbosity: 1})

	upstream := echoUpstream(f)
	pm, eps := ports.NewPortMap(), endpoints.New()
	r, err := New(pm, eps, Options{
		Ports: PortOptions{PortRangeStart: 1, PortRangeEnd: 1}, // never opened: connections are handed in directly
		HTTP:  HTTPOptions{ReadHeaderTimeout: 2 * time.Second},
		Log:   log,
	})
	if err != nil {
		f.Fatal(err)
	}
	go func() { _ = r.server.Serve(r.httpConns) }()
	f.Cleanup(r.Close)
	target := route.Target{
		ElastiService: types.NamespacedName{Namespace: "ns", Name: "web"},
		Service:       types.NamespacedName{Namespace: "ns", Name: "websvc"},
		PortName:      "http", Port: 80,
		Static: &route.StaticRules{Rules: []elastiv1alpha1.StaticResponse{
			{Name: "probe", When: elastiv1alpha1.StaticResponseAlways, Match: elastiv1alpha1.StaticResponseMatch{
				Path:    &elastiv1alpha1.PathMatch{Prefix: ptr.To("/health")},
				Headers: []elastiv1alpha1.HeaderMatch{{Name: "User-Agent", Contains: ptr.To("probe")}},
				Query:   []elastiv1alpha1.QueryMatch{{Name: "probe"}},
			}},
			{Name: "hook", When: elastiv1alpha1.StaticResponseAlways, Match: elastiv1alpha1.StaticResponseMatch{
				Methods: []elastiv1alpha1.HTTPMethod{"POST", "HEAD"},
			}, Respond: elastiv1alpha1.StaticReply{Status: 204, Body: "dropped: 204 has no body"}},
		}},
	}
	host, port, _ := net.SplitHostPort(upstreamAddr(upstream))
	var p int32
	_, _ = fmt.Sscan(port, &p)
	eps.Update(resolvertest.Slice("ns", "websvc-1", "websvc", "http", p, resolvertest.ReadyEP(host)))

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { l.Close() })

	f.Fuzz(func(t *testing.T, data []byte) {
		client, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		server, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		r.httpConns.Push(&park.Conn{Conn: server, Route: route.Route{Target: target, Mapped: true}})
		_ = client.SetDeadline(time.Now().Add(30 * time.Second))
		go func() {
			_, _ = client.Write(data)
			_ = client.(*net.TCPConn).CloseWrite()
		}()
		out, _ := io.ReadAll(client)
		if v := panicked.Load(); v != nil {
			t.Fatalf("panic while serving %q: %v", data, v)
		}
		if !bytes.HasPrefix(out, []byte("HTTP/1.")) {
			return // nothing, or HTTP/2 frames: not ours to parse here
		}
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(out)), nil)
		if err != nil {
			t.Fatalf("malformed response to %q: %v\n%q", data, err, out)
		}
		if resp.StatusCode < 100 || resp.StatusCode > 599 {
			t.Fatalf("status %d in response to %q", resp.StatusCode, data)
		}
	})
}
