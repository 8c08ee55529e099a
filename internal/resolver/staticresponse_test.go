package resolver

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/resolver/handler"
)

// kubeletRule answers kubelet-style probes of /healthz.
func kubeletRule() elastiv1alpha1.StaticResponse {
	return elastiv1alpha1.StaticResponse{
		Name: "kubelet",
		Match: elastiv1alpha1.StaticResponseMatch{
			Methods: []elastiv1alpha1.HTTPMethod{"GET", "HEAD"},
			Path:    &elastiv1alpha1.PathMatch{Exact: ptr.To("/healthz")},
			Headers: []elastiv1alpha1.HeaderMatch{{Name: "user-agent", Prefix: ptr.To("kube-probe/")}},
		},
		Respond: elastiv1alpha1.StaticReply{Status: 200, Body: "ok", Headers: map[string]elastiv1alpha1.StaticHeaderValue{"Cache-Control": "no-store"}},
		When:    elastiv1alpha1.StaticResponseAtZero,
	}
}

func staticProxy(rules ...elastiv1alpha1.StaticResponse) *elastiv1alpha1.ProxySpec {
	return &elastiv1alpha1.ProxySpec{StaticResponses: rules}
}

// do sends req on c and reads the whole answer; reused says whether the
// request went on a kept-alive connection.
func do(c *http.Client, req *http.Request) (r result, reused bool) {
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused }}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	resp, err := c.Do(req)
	if err != nil {
		return result{err: err}, reused
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	h := resp.Header.Clone()
	if resp.Close {
		h.Set("X-Test-Close", "true")
	}
	return result{status: resp.StatusCode, body: string(b), header: h, err: err}, reused
}

func newRequest(t *testing.T, method, url string, body io.Reader, hdr map[string]string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return req
}

// rawExchange sends raw bytes on a fresh connection and reads one answer.
func rawExchange(t *testing.T, addr, raw string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(waitTimeout))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read the answer to %q: %v", raw, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// assertNotTraffic checks that nothing about es counted as traffic: no
// activation call, no traffic report started, no hold, nothing forwarded.
func (h *harness) assertNotTraffic(es string) {
	h.t.Helper()
	key := types.NamespacedName{Namespace: "ns", Name: es}
	if n := h.act.count(key.String()); n != 0 {
		h.t.Errorf("%d activation calls for %s, want none", n, es)
	}
	if reported := h.r.hold.Reported(key); reported {
		h.t.Errorf("a traffic report was started for %s", es)
	}
	if n := h.held(es); n != 0 {
		h.t.Errorf("%d requests held for %s, want none", n, es)
	}
	m := h.r.metrics
	for name, n := range map[string]int{
		"held": testutil.CollectAndCount(m.Held), "hold_duration": testutil.CollectAndCount(m.HoldDuration),
		"forwarded": testutil.CollectAndCount(m.Forwarded), "activations": testutil.CollectAndCount(m.Activations),
	} {
		if n != 0 {
			h.t.Errorf("%s has %d series, want none", name, n)
		}
	}
}

func (h *harness) staticCount(es, rule string) float64 {
	return testutil.ToFloat64(h.r.metrics.StaticResponses.WithLabelValues("ns", es, rule))
}

// TestStaticResponseAtZeroNeitherWakesNorCounts: kubelet-style probes on a
// kept-alive connection are answered while the target is at zero, and
// nothing wakes or counts them; a request no rule matches is held and
// woken as before.
func TestStaticResponseAtZeroNeitherWakesNorCounts(t *testing.T) {
	// A fake clock that nobody steps: a traffic report, once started,
	// would stay on record.
	h := newHarness(t, 1, func(o *Options) { o.Clock = clocktesting.NewFakeClock(time.Now()) })
	up := newRecordingUpstream(t)
	h.mapPort("web", "websvc", staticProxy(kubeletRule()), h.proxyPort(0, "http", ""))
	c := h.client()
	url := "http://" + h.addr(0) + "/healthz"
	probe := map[string]string{"User-Agent": "kube-probe/1.37"}

	for i := range 5 {
		r, reused := do(c, newRequest(t, http.MethodGet, url, nil, probe))
		got := map[string]string{
			"status": http.StatusText(r.status), "body": r.body, "rule": r.header.Get(handler.HeaderStaticResponse),
			"cache": r.header.Get("Cache-Control"), "type": r.header.Get("Content-Type"), "close": r.header.Get("X-Test-Close"),
		}
		want := map[string]string{"status": "OK", "body": "ok", "rule": "kubelet", "cache": "no-store", "type": "text/plain; charset=utf-8", "close": ""}
		if r.err != nil {
			t.Fatalf("probe %d: %v", i, r.err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("probe %d (-want +got):\n%s", i, diff)
		}
		if i > 0 && !reused {
			t.Errorf("probe %d did not reuse the kept-alive connection", i)
		}
	}
	if r, _ := do(c, newRequest(t, http.MethodHead, url, nil, probe)); r.err != nil || r.status != http.StatusOK || r.body != "" || r.header.Get(handler.HeaderStaticResponse) != "kubelet" {
		t.Fatalf("HEAD probe: %+v", r)
	}
	h.assertNotTraffic("web")
	if v := h.staticCount("web", "kubelet"); v != 6 {
		t.Errorf("static_responses_total = %v, want 6", v)
	}

	// A browser on the same connection matches no rule: held, woken,
	// forwarded.
	done := make(chan result, 1)
	go func() {
		r, _ := do(c, newRequest(t, http.MethodGet, url, nil, map[string]string{"User-Agent": "Mozilla/5.0"}))
		done <- r
	}()
	if got := h.act.waitCalled(t); got != "ns/web" {
		t.Fatalf("activation for %q, want ns/web", got)
	}
	h.eventually("the browser's request is held", func() bool { return h.held("web") == 1 })
	h.ready("websvc", "websvc-abc", "http", up.addr())
	r := <-done
	if r.err != nil || r.status != http.StatusOK || r.header.Get(handler.HeaderStaticResponse) != "" {
		t.Fatalf("held request: %+v; want the pod's answer", r)
	}
	if diff := cmp.Diff([]seenRequest{{method: "GET", uri: "/healthz", proto: "HTTP/1.1"}}, up.requests(), cmp.AllowUnexported(seenRequest{})); diff != "" {
		t.Errorf("requests the pod executed (-want +got):\n%s", diff)
	}
}

// TestStaticResponseAtZeroOrAlways: once the target has a ready endpoint,
// an AtZero rule stands aside and the request is forwarded, while an
// Always rule still answers, asking the client to reconnect; neither
// answer is reported as traffic.
func TestStaticResponseAtZeroOrAlways(t *testing.T) {
	h := newHarness(t, 1, func(o *Options) { o.Clock = clocktesting.NewFakeClock(time.Now()) })
	up := newRecordingUpstream(t)
	rules := []elastiv1alpha1.StaticResponse{
		{Name: "zero", Match: elastiv1alpha1.StaticResponseMatch{Path: &elastiv1alpha1.PathMatch{Exact: ptr.To("/a")}},
			Respond: elastiv1alpha1.StaticReply{Status: 200, Body: "asleep"}, When: elastiv1alpha1.StaticResponseAtZero},
		{Name: "always", Match: elastiv1alpha1.StaticResponseMatch{Path: &elastiv1alpha1.PathMatch{Prefix: ptr.To("/b/")}},
			Respond: elastiv1alpha1.StaticReply{Status: 503, Body: "maintenance"}, When: elastiv1alpha1.StaticResponseAlways},
	}
	h.mapPort("web", "websvc", staticProxy(rules...), h.proxyPort(0, "http", ""))
	c := h.client()
	base := "http://" + h.addr(0)
	answered := func(when, path, rule string, status int, body string) result {
		t.Helper()
		r, _ := do(c, newRequest(t, http.MethodGet, base+path, nil, nil))
		if r.err != nil || r.status != status || r.body != body || r.header.Get(handler.HeaderStaticResponse) != rule {
			t.Fatalf("%s, GET %s: status %d body %q rule %q err %v; want %d %q from rule %q",
				when, path, r.status, r.body, r.header.Get(handler.HeaderStaticResponse), r.err, status, body, rule)
		}
		return r
	}

	if r := answered("at zero", "/a", "zero", 200, "asleep"); r.header.Get("X-Test-Close") != "" {
		t.Error("at zero, the static answer closed the connection")
	}
	answered("at zero", "/b/x", "always", 503, "maintenance")
	h.assertNotTraffic("web")

	h.ready("websvc", "websvc-abc", "http", up.addr())
	if r := answered("ready", "/b/x", "always", 503, "maintenance"); r.header.Get("X-Test-Close") != "true" {
		t.Error("with a ready endpoint, the static answer did not ask the client to reconnect")
	}
	h.assertNotTraffic("web")
	answered("ready", "/a", "", 200, "GET 0")
	if diff := cmp.Diff([]seenRequest{{method: "GET", uri: "/a", proto: "HTTP/1.1"}}, up.requests(), cmp.AllowUnexported(seenRequest{})); diff != "" {
		t.Errorf("requests the pod executed (-want +got):\n%s", diff)
	}
	// The forwarded request is traffic, and reported: the check above
	// would have seen a report of the static answers.
	h.eventually("the forwarded request is reported", func() bool { return h.act.count("ns/web") == 1 })
	for rule, want := range map[string]float64{"zero": 1, "always": 2} {
		if v := h.staticCount("web", rule); v != want {
			t.Errorf("static_responses_total{rule=%q} = %v, want %v", rule, v, want)
		}
	}
}

// TestStaticResponseHeaderMatching: header names match whatever their case
// on the wire, values exactly as written; exact, prefix and contains each
// match any value of a repeated header. The target is ready and the rules
// are Always, so a request no rule matches reaches the pod.
func TestStaticResponseHeaderMatching(t *testing.T) {
	h := newHarness(t, 1, nil)
	up := echoUpstream(t)
	header := func(name, rule string, m elastiv1alpha1.HeaderMatch) elastiv1alpha1.StaticResponse {
		m.Name = name
		return elastiv1alpha1.StaticResponse{
			Name:  rule,
			Match: elastiv1alpha1.StaticResponseMatch{Headers: []elastiv1alpha1.HeaderMatch{m}},
			When:  elastiv1alpha1.StaticResponseAlways,
		}
	}
	h.mapPort("web", "websvc", staticProxy(
		header("x-probe", "exact", elastiv1alpha1.HeaderMatch{Exact: ptr.To("Yes")}),
		header("USER-AGENT", "prefix", elastiv1alpha1.HeaderMatch{Prefix: ptr.To("kube-probe/")}),
		header("User-Agent", "contains", elastiv1alpha1.HeaderMatch{Contains: ptr.To("UptimeRobot")}),
	), h.proxyPort(0, "http", ""))
	h.ready("websvc", "websvc-abc", "http", upstreamAddr(up))

	for _, tc := range []struct {
		name, headers, want string // want: the rule, or "" for the pod
	}{
		{"exact, lower-case name", "x-probe: Yes\r\n", "exact"},
		{"exact, upper-case name", "X-PROBE: Yes\r\n", "exact"},
		{"exact is case-sensitive in the value", "X-Probe: yes\r\n", ""},
		{"exact is not a prefix", "X-Probe: Yes!\r\n", ""},
		{"prefix", "user-agent: kube-probe/1.37\r\n", "prefix"},
		{"prefix only at the start", "User-Agent: Mozilla/5.0 kube-probe/1.37\r\n", ""},
		{"contains", "USER-AGENT: Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)\r\n", "contains"},
		{"any value of a repeated header", "User-Agent: curl/8\r\nUser-Agent: kube-probe/1.37\r\n", "prefix"},
		{"first rule wins", "User-Agent: kube-probe/1 UptimeRobot\r\nX-Probe: Yes\r\n", "exact"},
		{"no header", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := rawExchange(t, h.addr(0), "GET /status HTTP/1.1\r\nHost: websvc\r\n"+tc.headers+"\r\n")
			got := resp.Header.Get(handler.HeaderStaticResponse)
			if got != tc.want || resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d, answered by rule %q (body %q); want rule %q", resp.StatusCode, got, body, tc.want)
			}
			if tc.want == "" && body != "GET /status " {
				t.Errorf("body %q, want the pod's echo", body)
			}
		})
	}
}

// TestStaticResponsePOSTWithBody: a POST a rule matches is answered at
// zero; its body is read and dropped so the connection carries the next
// request, up to the read-ahead bound. A longer body is left unread and
// the answer closes the connection. Nothing wakes the target.
func TestStaticResponsePOSTWithBody(t *testing.T) {
	h := newHarness(t, 1, func(o *Options) {
		o.Clock = clocktesting.NewFakeClock(time.Now())
		o.Hold.ReadAheadBytes = 4096
	})
	rule := elastiv1alpha1.StaticResponse{
		Name: "hook",
		Match: elastiv1alpha1.StaticResponseMatch{
			Methods: []elastiv1alpha1.HTTPMethod{"POST"},
			Path:    &elastiv1alpha1.PathMatch{Exact: ptr.To("/hook")},
		},
		Respond: elastiv1alpha1.StaticReply{Status: 202, Body: `{"queued":false}`, Headers: map[string]elastiv1alpha1.StaticHeaderValue{"Content-Type": "application/json"}},
	}
	h.mapPort("web", "websvc", staticProxy(rule), h.proxyPort(0, "http", ""))
	c := h.client()
	url := "http://" + h.addr(0) + "/hook"
	post := func(body io.Reader) (result, bool) {
		return do(c, newRequest(t, http.MethodPost, url, body, map[string]string{"Content-Type": "text/plain"}))
	}
	check := func(what string, r result, wantClose string) {
		t.Helper()
		if r.err != nil || r.status != http.StatusAccepted || r.body != `{"queued":false}` ||
			r.header.Get("Content-Type") != "application/json" || r.header.Get("X-Test-Close") != wantClose {
			t.Fatalf("%s: status %d body %q header %v err %v", what, r.status, r.body, r.header, r.err)
		}
	}

	r, _ := post(strings.NewReader(strings.Repeat("a", 1024)))
	check("a 1 KiB body", r, "")
	r, reused := post(io.MultiReader(strings.NewReader(strings.Repeat("b", 2048)))) // chunked: no length
	check("a chunked body", r, "")
	if !reused {
		t.Error("the request after a drained body did not reuse the connection")
	}
	r, _ = post(strings.NewReader(strings.Repeat("c", 4096)))
	check("a body at the bound", r, "")
	r, _ = post(strings.NewReader(strings.Repeat("d", 100<<10)))
	check("a body past the bound", r, "true")
	r, _ = post(io.MultiReader(strings.NewReader(strings.Repeat("e", 100<<10))))
	check("a chunked body past the bound", r, "true")
	h.assertNotTraffic("web")
	if v := h.staticCount("web", "hook"); v != 5 {
		t.Errorf("static_responses_total = %v, want 5", v)
	}
}

// TestStaticResponseMalformedBody: a matching request whose body is
// malformed or breaks off gets a 4xx, never the static answer.
func TestStaticResponseMalformedBody(t *testing.T) {
	h := newHarness(t, 1, nil)
	rule := elastiv1alpha1.StaticResponse{Name: "hook", Match: elastiv1alpha1.StaticResponseMatch{Path: &elastiv1alpha1.PathMatch{Prefix: ptr.To("/")}}}
	h.mapPort("web", "websvc", staticProxy(rule), h.proxyPort(0, "http", ""))
	for _, raw := range []string{
		"POST /hook HTTP/1.1\r\nHost: websvc\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
		"POST /hook HTTP/1.1\r\nHost: websvc\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX\r\n0\r\n\r\n",
	} {
		resp, body := rawExchange(t, h.addr(0), raw)
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get(handler.HeaderStaticResponse) != "" || !resp.Close {
			t.Errorf("%q: status %d body %q header %v; want a closing 400", raw, resp.StatusCode, body, resp.Header)
		}
	}

	// A body that breaks off: the client half-closes after 3 of 10 bytes.
	conn, err := net.Dial("tcp", h.addr(0))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(waitTimeout))
	_, _ = io.WriteString(conn, "POST /hook HTTP/1.1\r\nHost: websvc\r\nContent-Length: 10\r\n\r\nabc")
	_ = conn.(*net.TCPConn).CloseWrite()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get(handler.HeaderStaticResponse) != "" {
		t.Errorf("a body cut short: status %d, header %v; want 400", resp.StatusCode, resp.Header)
	}
	if v := testutil.ToFloat64(h.r.metrics.Rejected.WithLabelValues("ns", "web", ReasonBadRequest)); v != 3 {
		t.Errorf("rejected_total{reason=bad_request} = %v, want 3", v)
	}
	if v := h.staticCount("web", "hook"); v != 0 {
		t.Errorf("static_responses_total = %v, want 0", v)
	}
}

// TestStaticResponseOverH2C: the same rules answer cleartext HTTP/2 (h2c,
// gRPC ports), stream after stream on one connection, without waking.
func TestStaticResponseOverH2C(t *testing.T) {
	h := newHarness(t, 1, func(o *Options) { o.Clock = clocktesting.NewFakeClock(time.Now()) })
	h.mapPort("web", "websvc", staticProxy(kubeletRule()), h.proxyPort(0, "h2c", "kubernetes.io/h2c"))
	c := h2cClient()
	for i := range 3 {
		r, reused := do(c, newRequest(t, http.MethodGet, "http://"+h.addr(0)+"/healthz", nil, map[string]string{"User-Agent": "kube-probe/1.37"}))
		if r.err != nil || r.status != http.StatusOK || r.body != "ok" || r.header.Get(handler.HeaderStaticResponse) != "kubelet" {
			t.Fatalf("h2c probe %d: %+v", i, r)
		}
		if i > 0 && !reused {
			t.Errorf("h2c probe %d opened a new connection", i)
		}
	}
	h.assertNotTraffic("web")
}
