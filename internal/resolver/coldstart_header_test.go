package resolver

import (
	"context"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"elasti.dev/elasti/internal/resolver/upstream"
)

var coldStartShape = regexp.MustCompile(`^[0-9]+\.[0-9]{3}s$`)

// checkColdStart fails unless v is a cold-start header value: seconds with
// milliseconds, which time.ParseDuration reads back, and not more than the
// test could have waited.
func checkColdStart(t *testing.T, what, v string) {
	t.Helper()
	d, err := time.ParseDuration(v)
	if !coldStartShape.MatchString(v) || err != nil || d < 0 || d > waitTimeout {
		t.Errorf("%s: %s = %q, want a hold such as 1.234s", what, upstream.HeaderColdStart, v)
	}
}

// TestColdStartHeaderOnlyAfterAHold: an HTTP/1.1 and an h2c request held
// until the target woke get Elasti-Cold-Start; requests forwarded at once
// do not, nor does a held request that a fallback Service answered.
func TestColdStartHeaderOnlyAfterAHold(t *testing.T) {
	h := newHarness(t, 2, nil)
	up := newRecordingUpstream(t)
	fallback := newRecordingUpstream(t)
	h.mapPort("web", "websvc", nil, h.proxyPort(0, "http", ""))
	h.ready("apisvc-static", "apisvc-static-abc", "http", fallback.addr())
	toStatic := fallbackProxy("100ms")
	toStatic.Fallback.Service = "apisvc-static"
	h.mapPort("api", "apisvc", toStatic, h.proxyPort(1, "http", ""))
	url := "http://" + h.addr(0) + "/"

	h1, h2 := make(chan result, 1), make(chan result, 1)
	go func() { h1 <- get(h.client(), context.Background(), url, nil) }()
	go func() { h2 <- get(h2cClient(), context.Background(), url, nil) }()
	h.eventually("both requests are held", func() bool { return h.held("web") == 2 })
	h.ready("websvc", "websvc-abc", "http", up.addr())
	for proto, ch := range map[string]chan result{"HTTP/1.1": h1, "h2c": h2} {
		r := <-ch
		if r.err != nil || r.status != http.StatusOK {
			t.Fatalf("held %s request: status %d err %v", proto, r.status, r.err)
		}
		checkColdStart(t, "held "+proto+" request", r.header.Get(upstream.HeaderColdStart))
	}

	for name, c := range map[string]*http.Client{"HTTP/1.1": h.client(), "h2c": h2cClient()} {
		r := get(c, context.Background(), url, nil)
		if r.err != nil || r.status != http.StatusOK {
			t.Fatalf("direct %s request: status %d err %v", name, r.status, r.err)
		}
		if v := r.header.Get(upstream.HeaderColdStart); v != "" {
			t.Errorf("a %s request forwarded at once has %s = %q", name, upstream.HeaderColdStart, v)
		}
	}

	r := get(h.client(), context.Background(), "http://"+h.addr(1)+"/", nil)
	if r.err != nil || r.status != http.StatusOK || len(fallback.requests()) != 1 {
		t.Fatalf("held request for the fallback: status %d err %v, fallback saw %d", r.status, r.err, len(fallback.requests()))
	}
	if v := r.header.Get(upstream.HeaderColdStart); v != "" {
		t.Errorf("the fallback's answer has %s = %q; the target never served it", upstream.HeaderColdStart, v)
	}
}

// TestColdStartHeaderOnWebSocketAndGRPC: the header rides on a held
// WebSocket's 101 and on held gRPC calls, a trailers-only error included,
// and each still works.
func TestColdStartHeaderOnWebSocketAndGRPC(t *testing.T) {
	t.Run("WebSocket", func(t *testing.T) {
		h := newHarness(t, 1, nil)
		upgrader := websocket.Upgrader{}
		up := startH2C(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, err := upgrader.Upgrade(w, r, nil)
			if err != nil {
				return
			}
			defer c.Close()
			mt, msg, err := c.ReadMessage()
			if err == nil {
				_ = c.WriteMessage(mt, append([]byte("echo: "), msg...))
			}
		}))
		h.mapPort("web", "websvc", nil, h.proxyPort(0, "ws", ""))
		type dialed struct {
			c    *websocket.Conn
			resp *http.Response
			err  error
		}
		done := make(chan dialed, 1)
		go func() {
			d := websocket.Dialer{HandshakeTimeout: waitTimeout}
			c, resp, err := d.Dial("ws://"+h.addr(0)+"/socket", nil)
			done <- dialed{c, resp, err}
		}()
		h.eventually("the upgrade is held", func() bool { return h.held("web") == 1 })
		h.ready("websvc", "websvc-abc", "ws", upstreamAddr(up))
		d := <-done
		if d.err != nil {
			t.Fatalf("websocket dial: %v", d.err)
		}
		defer d.c.Close()
		checkColdStart(t, "101 Switching Protocols", d.resp.Header.Get(upstream.HeaderColdStart))
		_ = d.c.SetReadDeadline(time.Now().Add(waitTimeout))
		if err := d.c.WriteMessage(websocket.TextMessage, []byte("hi")); err != nil {
			t.Fatal(err)
		}
		if _, got, err := d.c.ReadMessage(); err != nil || string(got) != "echo: hi" {
			t.Fatalf("echo = %q, %v", got, err)
		}
	})

	t.Run("gRPC", func(t *testing.T) {
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

		type checked struct {
			code            codes.Code
			status          healthpb.HealthCheckResponse_ServingStatus
			header, trailer metadata.MD
		}
		call := func(service string, out chan<- checked) {
			var c checked
			resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: service}, grpc.Header(&c.header), grpc.Trailer(&c.trailer))
			c.code, c.status = status.Code(err), resp.GetStatus()
			out <- c
		}
		ok, missing := make(chan checked, 1), make(chan checked, 1)
		go call("demo", ok)
		go call("nope", missing) // answered trailers-only: NotFound
		h.eventually("both calls are held", func() bool { return h.held("web") == 2 })
		h.ready("grpcsvc", "grpcsvc-abc", "api", upAddr)

		c := <-ok
		if c.code != codes.OK || c.status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("held Check = %v %v, want OK SERVING", c.code, c.status)
		}
		if v := c.header.Get("elasti-cold-start"); len(v) != 1 {
			t.Errorf("held call's header metadata %v lacks elasti-cold-start", c.header)
		} else {
			checkColdStart(t, "held gRPC call", v[0])
		}
		c = <-missing
		if c.code != codes.NotFound {
			t.Fatalf("held Check(unknown) = %v, want NotFound from a trailers-only answer", c.code)
		}
		if v := append(c.header.Get("elasti-cold-start"), c.trailer.Get("elasti-cold-start")...); len(v) != 1 {
			t.Errorf("held trailers-only call: metadata %v / %v lacks elasti-cold-start", c.header, c.trailer)
		}
	})
}
