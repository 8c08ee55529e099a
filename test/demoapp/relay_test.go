package main

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestRelay(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(300 * time.Millisecond)
		}
		w.WriteHeader(http.StatusTeapot)
		_, _ = io.WriteString(w, "from upstream")
	}))
	defer upstream.Close()
	relay := httptest.NewServer(relayHandler())
	defer relay.Close()

	// A port nothing listens on: bind one, note it, close it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/"
	l.Close()

	for _, tc := range []struct {
		target, timeout string
		wantStatus      int
		wantBody        string
	}{
		{upstream.URL + "/x", "", http.StatusOK, "418 I'm a teapot\nfrom upstream"},
		{closed, "", http.StatusBadGateway, "connection refused"},
		{"/relative", "", http.StatusBadRequest, "absolute http://"},
		{"ftp://127.0.0.1/", "", http.StatusBadRequest, "absolute http://"},
		{upstream.URL + "/slow", "2s", http.StatusOK, "from upstream"},
		{upstream.URL + "/slow", "100ms", http.StatusBadGateway, "deadline exceeded"},
		{upstream.URL + "/x", "1h", http.StatusBadRequest, "timeout must be"},
		{upstream.URL + "/x", "soon", http.StatusBadRequest, "timeout must be"},
	} {
		q := url.Values{"url": {tc.target}}
		if tc.timeout != "" {
			q.Set("timeout", tc.timeout)
		}
		resp, err := http.Get(relay.URL + "/?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.wantStatus || !strings.Contains(string(body), tc.wantBody) {
			t.Errorf("relay %s (timeout %q): %s %q, want %d with %q", tc.target, tc.timeout, resp.Status, body, tc.wantStatus, tc.wantBody)
		}
	}
}

// TestRelayCounted: relayed requests count in http_requests_total, failed
// ones included, so that an HPA can scale the app behind the relay on the
// relay's request rate even while that app has no pod.
func TestRelayCounted(t *testing.T) {
	srv := httptest.NewServer(newHTTPHandler("front", false, true, nil, nil))
	defer srv.Close()
	for range 3 {
		resp, err := http.Get(srv.URL + "/relay?url=" + url.QueryEscape("http://127.0.0.1:1/"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway {
			t.Fatalf("relay to a closed port: %s, want 502", resp.Status)
		}
	}
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `http_requests_total{code="502",method="get"} 3`; !strings.Contains(string(body), want) {
		t.Errorf("metrics do not count the relayed requests: want %q in\n%s", want, body)
	}
}
