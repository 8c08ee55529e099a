//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// TestStaticResponseAtZeroDoesNotWake: an uptime monitor and a kubelet-style
// probe, each on a keep-alive connection, ask a sleeping Service over and
// over; the resolver answers them from spec.proxy.staticResponses and the
// target stays at zero. The first ordinary request on the same connection
// is held and wakes it, and once the target is up the AtZero rule no longer
// answers: the probe reaches the app.
func TestStaticResponseAtZeroDoesNotWake(t *testing.T) {
	t.Parallel()
	e := Get(t)
	ns, ip := demoApp(t, e)
	url := httpURL(ip, DemoHTTPPort)
	answers(t, e, url, 30*time.Second)
	es := e.ElastiServiceFor(ns, "demoapp", IdleQuery)
	healthz, monitor := "/healthz", "UptimeRobot"
	es.Spec.Proxy = &elastiv1alpha1.ProxySpec{StaticResponses: []elastiv1alpha1.StaticResponse{
		{
			Name:    "probe",
			Match:   elastiv1alpha1.StaticResponseMatch{Methods: []elastiv1alpha1.HTTPMethod{"GET", "HEAD"}, Path: &elastiv1alpha1.PathMatch{Exact: &healthz}},
			Respond: elastiv1alpha1.StaticReply{Body: "asleep and fine\n"},
		},
		{
			Name:    "monitor",
			Match:   elastiv1alpha1.StaticResponseMatch{Headers: []elastiv1alpha1.HeaderMatch{{Name: "user-agent", Contains: &monitor}}},
			Respond: elastiv1alpha1.StaticReply{Status: http.StatusOK, Body: "up\n"},
		},
	}}
	e.Create(t, es)
	e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)
	ctx := context.Background()
	before, err := e.GetElastiService(ctx, ns, "demoapp")
	if err != nil {
		t.Fatal(err)
	}

	// One keep-alive connection each, as a prober and a monitor keep them.
	keepAlive := func() *http.Client {
		return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DialContext: e.Dialer.DialContext, MaxConnsPerHost: 1}}
	}
	probe, mon := keepAlive(), keepAlive()
	// get returns the status, the static response rule that answered ("" for
	// none) and the body, or the error of a request that got no answer.
	get := func(c *http.Client, path, userAgent string) (int, string, string, error) {
		req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(url, "/")+path, nil)
		if err != nil {
			return 0, "", "", err
		}
		req.Header.Set("User-Agent", userAgent)
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", "", fmt.Errorf("GET %s as %q: %w", path, userAgent, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Elasti-Static-Response"), string(body), nil
	}
	// 15 s of probes every 500 ms: three times the cooldown, so a probe
	// that woke the target or counted as traffic would show.
	for i := range 30 {
		if code, rule, body, err := get(probe, healthz, "kube-probe/1.37"); err != nil || code != http.StatusOK || rule != "probe" || body != "asleep and fine\n" {
			t.Fatalf("probe %d at zero: %d, rule %q, body %q (%v); want 200 from rule probe", i, code, rule, body, err)
		}
		if code, rule, body, err := get(mon, "/", "Mozilla/5.0+(compatible; UptimeRobot/2.0; http://www.uptimerobot.com/)"); err != nil || code != http.StatusOK || rule != "monitor" || body != "up\n" {
			t.Fatalf("monitor %d at zero: %d, rule %q, body %q (%v); want 200 from rule monitor", i, code, rule, body, err)
		}
		if n, _, err := e.Replicas(ctx, ns, "demoapp"); err != nil || n != 0 {
			t.Fatalf("after %d probes the target has %d replicas (%v), want 0", i+1, n, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err := e.Asleep(ctx, ns, "demoapp"); err != nil {
		t.Fatalf("after 30 probes and 30 monitor checks: %v", err)
	}
	after, err := e.GetElastiService(ctx, ns, "demoapp")
	if err != nil {
		t.Fatal(err)
	}
	if !after.Status.LastScaledUpTime.Equal(before.Status.LastScaledUpTime) {
		t.Errorf("status.lastScaledUpTime moved from %v to %v: a static answer woke the target", before.Status.LastScaledUpTime, after.Status.LastScaledUpTime)
	}
	t.Log("60 static answers at zero, the target stayed at zero")

	// An ordinary request on the prober's connection is held and wakes it.
	e.SetQuery(t, ns, "demoapp", BusyQuery)
	if code, rule, body, err := get(probe, "/", "curl/8"); err != nil || code != http.StatusOK || rule != "" || !strings.Contains(body, "hello from demoapp-") {
		t.Fatalf("ordinary request at zero: %d, rule %q, body %q (%v); want the app's answer", code, rule, body, err)
	}
	e.WaitAwake(t, ns, "demoapp", 2*time.Minute)
	// Awake, the AtZero rule does not answer: the probe reaches the app's
	// own /healthz, whichever way the request is routed. While routing
	// converges a request can also fail to connect; it is tried again, and
	// logged.
	Eventually(t, 30*time.Second, 200*time.Millisecond, func(context.Context) error {
		code, rule, body, err := get(probe, healthz, "kube-probe/1.37")
		if err != nil {
			t.Logf("probe with the target awake, just after the switch to serve: %v", err)
			return err
		}
		if code != http.StatusOK || rule != "" || body != "ok\n" {
			return fmt.Errorf("probe with the target awake: %d, rule %q, body %q; want the app's ok", code, rule, body)
		}
		return nil
	})
}
