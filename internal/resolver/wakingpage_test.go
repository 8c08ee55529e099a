package resolver

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/resolver/handler"
	"elasti.dev/elasti/internal/resolver/ports"
	"elasti.dev/elasti/internal/resolver/resolvertest"
	"elasti.dev/elasti/internal/resolver/upstream"
)

// pageProxy is a spec.proxy with a waking page.
func pageProxy(refresh int32, html string) *elastiv1alpha1.ProxySpec {
	return &elastiv1alpha1.ProxySpec{WakingPage: &elastiv1alpha1.WakingPage{RefreshSeconds: refresh, HTML: html}}
}

// withProgress sets es's status.wakeProgress as the operator would.
func withProgress(es *elastiv1alpha1.ElastiService, phase elastiv1alpha1.WakePhase, message string, start time.Time) *elastiv1alpha1.ElastiService {
	es = es.DeepCopy()
	es.Status.WakeProgress = &elastiv1alpha1.WakeProgress{
		Phase: phase, Message: message, Pod: "web-7d9f-abcde",
		StartTime: metav1.NewTime(start), PhaseTime: metav1.NewTime(start),
	}
	return es
}

// pageHeaders picks the headers a waking page is made of.
func pageHeaders(r result) map[string]string {
	out := map[string]string{"status": http.StatusText(r.status)}
	for _, k := range []string{"Content-Type", "Cache-Control", "Retry-After", "Refresh", handler.HeaderWakingPage, upstream.HeaderColdStart} {
		out[k] = r.header.Get(k)
	}
	return out
}

func (h *harness) pageCount(es string, phase elastiv1alpha1.WakePhase) float64 {
	return testutil.ToFloat64(h.r.metrics.WakingPages.WithLabelValues("ns", es, string(phase)))
}

var browser = map[string]string{"Accept": resolvertest.BrowserAccept}

// TestWakingPageAtZero: a browser's page load at zero gets the page at once,
// with the phase the operator reported, and wakes the target without being
// held; a status-only change of the phase shows on the next load; once the
// target is ready the browser gets the pod's answer.
func TestWakingPageAtZero(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 7, 6, 9, 0, 0, 0, time.UTC))
	h := newHarness(t, 1, func(o *Options) { o.Clock = clk })
	up := newRecordingUpstream(t)
	es := resolvertest.ElastiService("ns", "web", "websvc", pageProxy(3, ""), h.proxyPort(0, "http", ""))
	pulling := withProgress(es, elastiv1alpha1.WakePhasePullingImage, `pulling image "shop:1.2"`, clk.Now().Add(-42*time.Second))
	h.ports.Set(pulling)
	c := h.client()
	url := "http://" + h.addr(0) + "/cart"

	r, _ := do(c, newRequest(t, http.MethodGet, url, nil, browser))
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := map[string]string{
		"status": "Service Unavailable", "Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store",
		"Retry-After": "3", "Refresh": "3", handler.HeaderWakingPage: "PullingImage", upstream.HeaderColdStart: "",
	}
	if diff := cmp.Diff(want, pageHeaders(r)); diff != "" {
		t.Fatalf("page headers (-want +got):\n%s", diff)
	}
	for _, part := range []string{
		`<meta http-equiv="refresh" content="3">`,
		`<h1>websvc is starting</h1>`,
		`<p id="elasti-phase" data-phase="PullingImage">Pulling the image</p>`,
		`<li class="done">Scaling up</li>`,
		`<li class="done">Scheduling the pod</li>`,
		`<li class="now" aria-current="step">Pulling the image</li>`,
		`<li>Starting the container</li>`,
		`<li>Ready</li>`,
		`pulling image &#34;shop:1.2&#34;`,
		`<span id="elasti-elapsed">42</span>`,
	} {
		if !strings.Contains(r.body, part) {
			t.Errorf("the page lacks %s:\n%s", part, r.body)
		}
	}
	for _, external := range []string{"src=", "href=", "<script", "@import", "url("} {
		if strings.Contains(r.body, external) {
			t.Errorf("the page is not self-contained: it has %q", external)
		}
	}

	// The page load woke the target, as a held request would, but was
	// never held nor forwarded.
	if got := h.act.waitCalled(t); got != "ns/web" {
		t.Fatalf("activation for %q, want ns/web", got)
	}
	if n := h.held("web"); n != 0 {
		t.Errorf("%d requests held, want none", n)
	}
	if n := testutil.CollectAndCount(h.r.metrics.HoldDuration); n != 0 {
		t.Errorf("the page was observed as a hold (%d series)", n)
	}
	if got := h.pageCount("web", elastiv1alpha1.WakePhasePullingImage); got != 1 {
		t.Errorf("waking_pages_total{phase=PullingImage} = %v, want 1", got)
	}

	// The operator moves the phase on in the status alone.
	starting := withProgress(es, elastiv1alpha1.WakePhaseStarting, "", clk.Now().Add(-50*time.Second))
	h.ports.Set(starting)
	r, reused := do(c, newRequest(t, http.MethodHead, url, nil, browser))
	if r.err != nil || r.status != http.StatusServiceUnavailable || r.header.Get(handler.HeaderWakingPage) != "Starting" || r.body != "" {
		t.Fatalf("HEAD: status %d phase %q body %q err %v; want 503 Starting without a body", r.status, r.header.Get(handler.HeaderWakingPage), r.body, r.err)
	}
	if !reused {
		t.Error("the page closed the kept-alive connection; a reload should reuse it")
	}
	r, _ = do(c, newRequest(t, http.MethodGet, url, nil, browser))
	for _, part := range []string{`data-phase="Starting">Starting the container</p>`, `<li class="done">Pulling the image</li>`, `<span id="elasti-elapsed">50</span>`} {
		if !strings.Contains(r.body, part) {
			t.Errorf("after the status change the page lacks %s", part)
		}
	}
	if strings.Contains(r.body, "elasti-message") {
		t.Error("an empty message is shown")
	}
	if len(up.requests()) != 0 {
		t.Fatalf("the pod executed %+v while the page was shown", up.requests())
	}

	// Ready: the same page load is forwarded, no page, no cold start.
	h.ready("websvc", "websvc-abc", "http", up.addr())
	r, _ = do(c, newRequest(t, http.MethodGet, url, nil, browser))
	if r.err != nil || r.status != http.StatusOK || r.body != "GET 0" {
		t.Fatalf("once ready: status %d body %q err %v; want the pod's 200", r.status, r.body, r.err)
	}
	if r.header.Get(handler.HeaderWakingPage) != "" || r.header.Get(upstream.HeaderColdStart) != "" {
		t.Errorf("a direct forward carries %s=%q %s=%q", handler.HeaderWakingPage, r.header.Get(handler.HeaderWakingPage), upstream.HeaderColdStart, r.header.Get(upstream.HeaderColdStart))
	}
	if got := up.requests(); len(got) != 1 || got[0].uri != "/cart" {
		t.Errorf("the pod executed %+v, want the one page load", got)
	}
}

// TestWakingPageOnlyForPageLoads: with a waking page, every request that is
// not a browser's page load is held and forwarded as without it, and gets
// the cold-start header.
func TestWakingPageOnlyForPageLoads(t *testing.T) {
	h := newHarness(t, 1, nil)
	up := newRecordingUpstream(t)
	h.mapPort("web", "websvc", pageProxy(2, ""), h.proxyPort(0, "http", ""))
	url := "http://" + h.addr(0)
	reqs := map[string]*http.Request{
		"/api":    newRequest(t, http.MethodGet, url+"/api", nil, map[string]string{"Accept": "application/json"}),
		"/curl":   newRequest(t, http.MethodGet, url+"/curl", nil, map[string]string{"Accept": "*/*"}),
		"/none":   newRequest(t, http.MethodGet, url+"/none", nil, nil),
		"/form":   newRequest(t, http.MethodPost, url+"/form", strings.NewReader("a=1"), browser),
		"/socket": newRequest(t, http.MethodGet, url+"/socket", nil, map[string]string{"Accept": resolvertest.BrowserAccept, "Connection": "Upgrade", "Upgrade": "websocket"}),
	}
	done := make(chan result, len(reqs))
	for _, req := range reqs {
		go func() {
			r, _ := do(h.client(), req)
			done <- r
		}()
	}
	h.eventually("every request is held", func() bool { return h.held("web") == len(reqs) })
	if got := h.act.waitCalled(t); got != "ns/web" {
		t.Fatalf("activation for %q, want ns/web", got)
	}
	h.ready("websvc", "websvc-abc", "http", up.addr())
	for range reqs {
		r := <-done
		if r.err != nil || r.status != http.StatusOK {
			t.Fatalf("held request: status %d body %q err %v; want the pod's 200", r.status, r.body, r.err)
		}
		if r.header.Get(handler.HeaderWakingPage) != "" || r.header.Get(upstream.HeaderColdStart) == "" {
			t.Errorf("held request answered with %s=%q %s=%q; want no page and a cold start", handler.HeaderWakingPage, r.header.Get(handler.HeaderWakingPage), upstream.HeaderColdStart, r.header.Get(upstream.HeaderColdStart))
		}
	}
	var uris []string
	for _, s := range up.requests() {
		uris = append(uris, s.uri)
	}
	if len(uris) != len(reqs) {
		t.Errorf("the pod executed %v; want each held request once", uris)
	}
	if n := testutil.CollectAndCount(h.r.metrics.WakingPages); n != 0 {
		t.Errorf("%d waking page series; no request was a page load", n)
	}
}

// TestWakingPageCustomHTML: the ElastiService's own page gets its
// placeholders replaced by escaped values; an unknown one is left alone.
func TestWakingPageCustomHTML(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 7, 6, 9, 0, 0, 0, time.UTC))
	h := newHarness(t, 1, func(o *Options) { o.Clock = clk })
	page := `<title>{{service}}</title><b>{{phase}}</b><i>{{message}}</i><span>{{elapsed}}/{{refresh}}</span>{{other}}`
	es := resolvertest.ElastiService("ns", "web", "websvc", pageProxy(5, page), h.proxyPort(0, "http", ""))
	h.ports.Set(withProgress(es, elastiv1alpha1.WakePhaseScheduling, `<script>alert("x")</script> & more`, clk.Now().Add(-7*time.Second)))

	r, _ := do(h.client(), newRequest(t, http.MethodGet, "http://"+h.addr(0)+"/", nil, browser))
	want := `<title>websvc</title><b>Scheduling</b><i>&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; more</i><span>7/5</span>{{other}}`
	if r.err != nil || r.status != http.StatusServiceUnavailable {
		t.Fatalf("status %d err %v, want 503", r.status, r.err)
	}
	if diff := cmp.Diff(want, r.body); diff != "" {
		t.Errorf("custom page (-want +got):\n%s", diff)
	}
	if got := r.header.Get("Refresh"); got != "5" {
		t.Errorf("Refresh = %q, want 5 with a custom page too", got)
	}
	if got := r.header.Get(handler.HeaderWakingPage); got != "Scheduling" {
		t.Errorf("%s = %q, want Scheduling", handler.HeaderWakingPage, got)
	}
}

// TestWakingPageWithoutProgress: before the operator reports anything, the
// page shows Scaling and the time since this replica's first page of the
// wake; that time starts again after the target has been ready.
func TestWakingPageWithoutProgress(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 7, 6, 9, 0, 0, 0, time.UTC))
	h := newHarness(t, 1, func(o *Options) { o.Clock = clk })
	up := newRecordingUpstream(t)
	h.mapPort("web", "websvc", pageProxy(0, ""), h.proxyPort(0, "http", ""))
	c := h.client()
	url := "http://" + h.addr(0) + "/"
	load := func(wantElapsed string) {
		t.Helper()
		r, _ := do(c, newRequest(t, http.MethodGet, url, nil, browser))
		if r.status != http.StatusServiceUnavailable || r.header.Get(handler.HeaderWakingPage) != "Scaling" {
			t.Fatalf("status %d phase %q err %v; want 503 Scaling", r.status, r.header.Get(handler.HeaderWakingPage), r.err)
		}
		if r.header.Get("Refresh") != "2" {
			t.Errorf("Refresh = %q, want the default 2", r.header.Get("Refresh"))
		}
		if !strings.Contains(r.body, `<span id="elasti-elapsed">`+wantElapsed+`</span>`) {
			t.Errorf("elapsed: want %s s in\n%s", wantElapsed, r.body)
		}
		if !strings.Contains(r.body, `<li class="now" aria-current="step">Scaling up</li>`) || strings.Contains(r.body, `class="done"`) {
			t.Errorf("Scaling must be the current phase with nothing done:\n%s", r.body)
		}
	}
	load("0")
	clk.Step(5 * time.Second)
	load("5")

	// Ready, then asleep again: a new wake, timed from its own first page.
	h.ready("websvc", "websvc-abc", "http", up.addr())
	h.endpoints.Update(resolvertest.Slice("ns", "websvc-abc", "websvc", "http", 80))
	clk.Step(time.Minute)
	load("0")
	clk.Step(2 * time.Second)
	load("2")
	if got := h.pageCount("web", elastiv1alpha1.WakePhaseScaling); got != 4 {
		t.Errorf("waking_pages_total{phase=Scaling} = %v, want 4", got)
	}
}

// TestWakingPageYieldsToStaticAndFallback: a static response rule that
// matches answers first, and an ElastiService in fallback sends the page
// load to its fallback Service instead of showing the page.
func TestWakingPageYieldsToStaticAndFallback(t *testing.T) {
	h := newHarness(t, 1, nil)
	fallback := newRecordingUpstream(t)
	h.ready("websvc-static", "websvc-static-abc", "http", fallback.addr())
	p := fallbackProxy("1h")
	p.HoldTimeout = "2h"
	p.WakingPage = &elastiv1alpha1.WakingPage{RefreshSeconds: 2}
	p.StaticResponses = []elastiv1alpha1.StaticResponse{{
		Name: "healthz", Match: elastiv1alpha1.StaticResponseMatch{Path: &elastiv1alpha1.PathMatch{Exact: ptr.To("/healthz")}},
		Respond: elastiv1alpha1.StaticReply{Status: 200, Body: "ok"},
	}}
	es := resolvertest.ElastiService("ns", "web", "websvc", p, h.proxyPort(0, "http", ""))
	h.ports.Set(es)
	c := h.client()
	url := "http://" + h.addr(0)

	r := get(c, context.Background(), url+"/healthz", browser)
	if r.status != http.StatusOK || r.header.Get(handler.HeaderStaticResponse) != "healthz" || r.header.Get(handler.HeaderWakingPage) != "" {
		t.Fatalf("/healthz: status %d headers %v err %v; want the static answer", r.status, r.header, r.err)
	}
	if r := get(c, context.Background(), url+"/", browser); r.status != http.StatusServiceUnavailable || r.header.Get(handler.HeaderWakingPage) == "" {
		t.Fatalf("/ before the fallback: status %d err %v; want the waking page", r.status, r.err)
	}

	failed := es.DeepCopy()
	meta.SetStatusCondition(&failed.Status.Conditions, metav1.Condition{
		Type: elastiv1alpha1.ConditionFallbackActive, Status: metav1.ConditionTrue, Reason: "PodsUnschedulable", Message: "0/3 nodes are available",
	})
	h.ports.Set(failed)
	r = get(c, context.Background(), url+"/", browser)
	if r.err != nil || r.status != http.StatusOK || r.header.Get(handler.HeaderWakingPage) != "" {
		t.Fatalf("/ in fallback: status %d err %v; want the fallback's 200", r.status, r.err)
	}
	if got := fallback.requests(); len(got) != 1 || got[0].uri != "/" {
		t.Errorf("fallback executed %+v, want the page load", got)
	}
}

func TestPortMapWakeProgress(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "web"}
	start := time.Date(2026, 7, 6, 9, 0, 0, 0, time.UTC)
	port := elastiv1alpha1.ProxyPort{Name: "http", Port: 80, Protocol: "TCP", ResolverPort: 20001}
	withPage := withProgress(resolvertest.ElastiService("ns", "web", "websvc", pageProxy(2, ""), port), elastiv1alpha1.WakePhaseStarting, "m", start)
	withoutPage := withProgress(resolvertest.ElastiService("ns", "web", "websvc", nil, port), elastiv1alpha1.WakePhaseStarting, "m", start)
	m := ports.NewPortMap()

	m.Set(withoutPage)
	if _, ok := m.WakeProgress(key); ok {
		t.Error("progress kept for an ElastiService without a waking page")
	}
	m.Set(withPage)
	got, ok := m.WakeProgress(key)
	if diff := cmp.Diff(*withPage.Status.WakeProgress, got); !ok || diff != "" {
		t.Errorf("progress (-want +got), ok=%v:\n%s", ok, diff)
	}
	withPage.Status.WakeProgress.Message = "changed after Set"
	if got, _ := m.WakeProgress(key); got.Message != "m" {
		t.Errorf("the stored progress shares the object it was read from")
	}
	cleared := withPage.DeepCopy()
	cleared.Status.WakeProgress = nil
	m.Set(cleared)
	if _, ok := m.WakeProgress(key); ok {
		t.Error("progress kept after the operator cleared it")
	}
	m.Set(withPage)
	m.Delete(key)
	if _, ok := m.WakeProgress(key); ok {
		t.Error("progress kept after the ElastiService was deleted")
	}
}
