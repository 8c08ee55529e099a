package main

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// relayHandler serves GET /relay?url=U: the app GETs U itself, from its own
// pod, and answers 200 with U's status line and body, or 502 with the
// dial or read error. Tests use it as an in-cluster client whose source
// address is a pod's, so that NetworkPolicies apply to it (a client on the
// node is always let through). Off unless --relay is given.
func relayHandler() http.Handler {
	c := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
		// Report a redirect instead of following it.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target, err := url.Parse(r.URL.Query().Get("url"))
		if err != nil || (target.Scheme != "http") || target.Host == "" {
			http.Error(w, "relay: url must be an absolute http:// URL", http.StatusBadRequest)
			return
		}
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, target.String(), nil)
		if err != nil {
			http.Error(w, "relay: "+err.Error(), http.StatusBadRequest)
			return
		}
		resp, err := c.Do(req)
		if err != nil {
			http.Error(w, "relay: "+err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if err != nil {
			http.Error(w, "relay: read body: "+err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "%s\n%s", resp.Status, body)
	})
}
