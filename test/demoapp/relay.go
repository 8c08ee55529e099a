package main

import (
	"context"
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
//
// The relay gives up on U after 5 s, or after timeout=D (a Go duration up
// to maxRelayTimeout): a request to a sleeping Service waits for the wake,
// which takes longer than 5 s on a busy machine.
func relayHandler() http.Handler {
	c := &http.Client{
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
		timeout := defaultRelayTimeout
		if s := r.URL.Query().Get("timeout"); s != "" {
			if timeout, err = time.ParseDuration(s); err != nil || timeout <= 0 || timeout > maxRelayTimeout {
				http.Error(w, fmt.Sprintf("relay: timeout must be a Go duration above 0 and at most %s", maxRelayTimeout), http.StatusBadRequest)
				return
			}
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.String(), nil)
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

// How long the relay waits for the URL it relays to, unless asked
// otherwise, and the longest it may be asked to wait.
const (
	defaultRelayTimeout = 5 * time.Second
	maxRelayTimeout     = 5 * time.Minute
)
