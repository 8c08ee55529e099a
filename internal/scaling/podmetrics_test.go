package scaling

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
)

// demoappContentType is what the demo app answered when the fixture was
// recorded (testdata/README.md).
const demoappContentType = "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// toOpenMetrics re-encodes as OpenMetrics 1.0.0, with prometheus/common's
// own encoder, the families of a text page that keep accepts by name: the
// demo app serves no OpenMetrics.
func toOpenMetrics(t *testing.T, page []byte, keep func(name string) bool) []byte {
	t.Helper()
	dec := expfmt.NewDecoder(bytes.NewReader(page), expfmt.Format(demoappContentType))
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeOpenMetrics))
	for {
		var mf dto.MetricFamily
		err := dec.Decode(&mf)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !keep(mf.GetName()) {
			continue
		}
		if err := enc.Encode(&mf); err != nil {
			t.Fatal(err)
		}
	}
	if c, ok := enc.(expfmt.Closer); ok {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// The recorded page of the demo app, after three GETs and one POST, in the
// text format and, its counter and gauge, re-encoded as OpenMetrics.
func TestSumCounterOnDemoAppPage(t *testing.T) {
	text := readFixture(t, "demoapp-metrics.prom.txt")
	om := toOpenMetrics(t, text, func(name string) bool {
		return name == "http_requests_total" || name == "websocket_connections_open"
	})
	if !bytes.Contains(om, []byte("# TYPE http_requests counter\n")) || !bytes.HasSuffix(om, []byte("# EOF\n")) {
		t.Fatalf("the re-encoded page is not OpenMetrics:\n%s", om)
	}
	omType := string(expfmt.NewFormat(expfmt.TypeOpenMetrics))
	for _, tc := range []struct {
		name, contentType string
		page              []byte
	}{
		{"text", demoappContentType, text},
		{"openmetrics", omType + "; charset=utf-8", om},
	} {
		for _, c := range []struct {
			metric string
			labels map[string]string
			want   float64
		}{
			{"http_requests_total", nil, 4},
			{"http_requests", nil, 4},
			{"http_requests_total", map[string]string{"method": "get"}, 3},
			{"http_requests_total", map[string]string{"method": "post", "code": "200"}, 1},
		} {
			got, err := sumCounter(bytes.NewReader(tc.page), tc.contentType, c.metric, c.labels)
			if err != nil || got != c.want {
				t.Errorf("%s: %s%s = %v, %v; want %v", tc.name, c.metric, LabelText(c.labels), got, err, c.want)
			}
		}
		if _, err := sumCounter(bytes.NewReader(tc.page), tc.contentType, "http_requests_total", map[string]string{"method": "delete"}); !errors.Is(err, errMetricNotFound) {
			t.Errorf("%s: no matching series: got %v", tc.name, err)
		}
		if _, err := sumCounter(bytes.NewReader(tc.page), tc.contentType, "grpc_requests_total", nil); !errors.Is(err, errMetricNotFound) {
			t.Errorf("%s: missing counter: got %v", tc.name, err)
		}
		if _, err := sumCounter(bytes.NewReader(tc.page), tc.contentType, "websocket_connections_open", nil); !errors.Is(err, errMetricNotFound) || !strings.Contains(err.Error(), "is a gauge, not a counter") {
			t.Errorf("%s: a gauge: got %v", tc.name, err)
		}
	}
}

// prometheus/common reads OpenMetrics with its text parser, which refuses a
// whole page where two families share a name. The Go runtime's collector
// makes one in OpenMetrics: the gauge go_memstats_alloc_bytes beside the
// counter go_memstats_alloc_bytes_total, whose family is named
// go_memstats_alloc_bytes there. This is why scrapes ask for the text
// format first (scrapeAccept); docs/configuration.md says so.
func TestSumCounterOpenMetricsLimit(t *testing.T) {
	om := toOpenMetrics(t, readFixture(t, "demoapp-metrics.prom.txt"), func(string) bool { return true })
	_, err := sumCounter(bytes.NewReader(om), string(expfmt.NewFormat(expfmt.TypeOpenMetrics)), "http_requests_total", nil)
	if !errors.Is(err, errPageInvalid) || !strings.Contains(err.Error(), "go_memstats_alloc_bytes") {
		t.Errorf("got %v; if prometheus/common now reads this page, update scrapeAccept's comment and the docs", err)
	}
}

func TestSumCounterRefusesBadPages(t *testing.T) {
	for name, page := range map[string]string{
		"not a metrics page": "<html>hello</html>\n",
		"negative counter":   "# TYPE c counter\nc -1\n",
		"NaN counter":        "# TYPE c counter\nc NaN\n",
	} {
		if _, err := sumCounter(strings.NewReader(page), "text/plain; version=0.0.4", "c", nil); !errors.Is(err, errPageInvalid) {
			t.Errorf("%s: got %v, want errPageInvalid", name, err)
		}
	}
	// An untyped series (no # TYPE) of the name counts.
	if v, err := sumCounter(strings.NewReader("c_total 2\n"), "text/plain", "c_total", nil); err != nil || v != 2 {
		t.Errorf("untyped: %v, %v", v, err)
	}
}

func TestReadyPodTargets(t *testing.T) {
	ready, notReady := true, false
	ep := func(addr, pod string, isReady bool) discoveryv1.Endpoint {
		e := discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(isReady)}}
		if pod != "" {
			e.TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: pod, UID: types.UID("uid-" + pod)}
		}
		return e
	}
	slice := func(name string, family discoveryv1.AddressType, managed bool, eps ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
		s := discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: name, Labels: map[string]string{}}, AddressType: family, Endpoints: eps}
		if managed {
			s.Labels[contract.LabelManagedBy] = contract.ManagedBy
		}
		return s
	}
	terminating := ep("10.0.0.9", "old", ready)
	terminating.Conditions.Terminating = ptr.To(true)
	got := readyPodTargets([]discoveryv1.EndpointSlice{
		slice("web-v6", discoveryv1.AddressTypeIPv6, false, ep("fd00::1", "a", ready), ep("fd00::3", "c", ready)),
		slice("web-proxy", discoveryv1.AddressTypeIPv4, true, ep("10.9.9.9", "", ready)),
		slice("web-v4", discoveryv1.AddressTypeIPv4, false, ep("10.0.0.1", "a", ready), ep("10.0.0.2", "b", notReady), terminating, ep("10.0.0.4", "", ready)),
		slice("web-fqdn", discoveryv1.AddressTypeFQDN, false, ep("db.example", "", ready)),
	}, 9090, "/metrics")
	want := []podTarget{
		{key: "uid-a", name: "n/a", url: "http://10.0.0.1:9090/metrics"},
		{key: "10.0.0.4", name: "10.0.0.4", url: "http://10.0.0.4:9090/metrics"},
		{key: "uid-c", name: "n/c", url: "http://[fd00::3]:9090/metrics"},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(podTarget{})); diff != "" {
		t.Errorf("targets (-want +got)\n%s", diff)
	}
}

// fakePod serves a counter page on a loopback address; the test sets the
// counter and how the page is served.
type fakePod struct {
	addr string

	mu          sync.Mutex
	value       float64
	status      int
	openMetrics bool
	noMetric    bool
	body        string        // served as text/plain instead of the page
	location    string        // with status, a redirect
	delay       time.Duration // before answering
	header      http.Header
}

func (p *fakePod) set(f func(p *fakePod)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(p)
}

func (p *fakePod) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	delay := p.delay
	p.mu.Unlock()
	time.Sleep(delay)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.header = r.Header.Clone()
	if r.URL.Path != "/stats" {
		http.NotFound(w, r)
		return
	}
	if p.location != "" {
		w.Header().Set("Location", p.location)
	}
	if p.status != 0 {
		w.WriteHeader(p.status)
		return
	}
	if p.body != "" {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, p.body)
		return
	}
	v := strconv.FormatFloat(p.value, 'f', -1, 64)
	switch {
	case p.noMetric:
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprint(w, "# TYPE other_total counter\nother_total 1\n")
	case p.openMetrics:
		w.Header().Set("Content-Type", "application/openmetrics-text; version=1.0.0; charset=utf-8")
		fmt.Fprintf(w, "# TYPE http_requests counter\n# UNIT http_requests requests\nhttp_requests_total{code=\"200\"} %s\nhttp_requests_created{code=\"200\"} 1.7e+09\nhttp_requests_total{code=\"500\"} 1000\n# EOF\n", v)
	default:
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		fmt.Fprintf(w, "# TYPE http_requests_total counter\nhttp_requests_total{code=\"200\",method=\"get\"} %s\nhttp_requests_total{code=\"500\",method=\"get\"} 1000\n", v)
	}
}

// servePods serves one fakePod on each of 127.0.0.1, 127.0.0.2, ... on one
// port, since a podMetrics trigger scrapes every pod on the same port.
func servePods(t *testing.T, n int) ([]*fakePod, int32) {
	t.Helper()
	for attempt := 0; attempt < 10; attempt++ {
		first, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := first.Addr().(*net.TCPAddr).Port
		listeners := []net.Listener{first}
		for i := 2; i <= n; i++ {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.%d:%d", i, port))
			if err != nil {
				break
			}
			listeners = append(listeners, ln)
		}
		if len(listeners) < n {
			for _, ln := range listeners {
				_ = ln.Close()
			}
			continue
		}
		pods := make([]*fakePod, n)
		for i, ln := range listeners {
			pods[i] = &fakePod{addr: ln.Addr().(*net.TCPAddr).IP.String()}
			srv := &http.Server{Handler: pods[i], ReadHeaderTimeout: 5 * time.Second}
			go func() { _ = srv.Serve(ln) }()
			t.Cleanup(func() { _ = srv.Close() })
		}
		return pods, int32(port)
	}
	t.Fatal("no port free on every loopback address")
	return nil, 0
}

func TestPodMetricsEvaluator(t *testing.T) {
	pods, port := servePods(t, 2)
	a, b := pods[0], pods[1]
	b.set(func(p *fakePod) { p.openMetrics = true })

	scheme := runtime.NewScheme()
	_ = discoveryv1.AddToScheme(scheme)
	_ = corev1.AddToScheme(scheme)
	own := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "n", Name: "web-abc", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{a.addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "n", Name: "web-a", UID: "a"}},
			{Addresses: []string{b.addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "n", Name: "web-b", UID: "b"}},
			// Not ready, and nothing listens there: scraping it would fail.
			{Addresses: []string{"127.0.0.3"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}},
		},
	}
	proxy := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "web-elasti", Labels: map[string]string{
			discoveryv1.LabelServiceName: "web", contract.LabelManagedBy: contract.ManagedBy,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"127.0.0.4"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}
	other := own.DeepCopy()
	other.Name, other.Labels = "api-abc", map[string]string{discoveryv1.LabelServiceName: "api"}
	other.Endpoints[0].Addresses = []string{"127.0.0.5"}
	endpoints := fake.NewClientBuilder().WithScheme(scheme).WithObjects(own, proxy, other, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "scrape"}, Data: map[string][]byte{"token": []byte("t0ken")},
	}).Build()

	clk := clocktesting.NewFakePassiveClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	ev := &Evaluator{Endpoints: endpoints, Secrets: endpoints, Clock: clk, Timeout: 5 * time.Second}
	es := &elastiv1alpha1.ElastiService{
		ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "web", UID: "es-1"},
		Spec: elastiv1alpha1.ElastiServiceSpec{Service: "web", CooldownPeriod: 60, Triggers: []elastiv1alpha1.ScaleTrigger{{
			Type: elastiv1alpha1.TriggerTypePodMetrics,
			Metadata: elastiv1alpha1.TriggerMetadata{
				MetricName: "http_requests_total", Labels: map[string]string{"code": "200"}, Port: port, Path: "/stats",
				Threshold: ptr.To(elastiv1alpha1.Threshold("0.5")), Headers: map[string]string{"X-Tenant": "blue"},
				AuthSecretRef: &elastiv1alpha1.SecretKeySelector{Name: "scrape", Key: "token"},
			},
		}}},
	}
	ctx := context.Background()
	// evaluate runs the trigger through the seam, byType, and checks its own
	// result (Evaluate words an idle result for all triggers at once).
	evaluate := func(at int, wantState State, wantReason string, wantIn ...string) Result {
		t.Helper()
		clk.SetTime(time.Date(2030, 1, 1, 0, 0, at, 0, time.UTC))
		r := ev.evaluateOne(ctx, es, 0)
		if r.State != wantState || r.Reason != wantReason {
			t.Fatalf("at %d s: got %+v, want %s %s", at, r, wantState, wantReason)
		}
		for _, s := range wantIn {
			if !strings.Contains(r.Message, s) {
				t.Fatalf("at %d s: message %q lacks %q", at, r.Message, s)
			}
		}
		return r
	}

	a.set(func(p *fakePod) { p.value = 100 })
	b.set(func(p *fakePod) { p.value = 7 })
	r0 := evaluate(0, StateActive, "", "not enough history yet", "the 60 s window", "idle is possible from 2030-01-01T00:01:00Z")
	a.set(func(p *fakePod) { p.value = 103 })
	if r := evaluate(30, StateActive, ""); r.Message != r0.Message {
		t.Errorf("the not-enough-history message changed: %q then %q", r0.Message, r.Message)
	}
	b.set(func(p *fakePod) { p.value = 10 })
	// 6 requests in 60 s: 0.1/s, below 0.5/s.
	if r := evaluate(60, StateIdle, "", "rate of http_requests_total over 60 s below the threshold 0.5"); r.Value != 0.1 {
		t.Errorf("rate %v, want 0.1", r.Value)
	}
	// 30 more between 60 s and 90 s: exactly 0.5/s over the window 30-90 s
	// is not below the threshold.
	a.set(func(p *fakePod) { p.value = 120 })
	b.set(func(p *fakePod) { p.value = 20 })
	if r := evaluate(90, StateActive, "", "at or above the threshold 0.5"); r.Value != 0.5 {
		t.Errorf("rate %v, want 0.5", r.Value)
	}
	// Pod a restarted: its counter fell to 2, which counts as 2 requests.
	a.set(func(p *fakePod) { p.value = 2 })
	evaluate(150, StateIdle, "") // 90-150 s: 2 requests
	var h http.Header
	a.set(func(p *fakePod) { h = p.header })
	if !strings.HasPrefix(h.Get("Accept"), "text/plain;version=0.0.4") || h.Get("X-Tenant") != "blue" || h.Get("Authorization") != "Bearer t0ken" {
		t.Errorf("scrape headers: %v", h)
	}

	a.set(func(p *fakePod) { p.status = http.StatusServiceUnavailable })
	evaluate(180, StateUnhealthy, ReasonPodScrapeFailed, "pod n/web-a (http://"+a.addr+":"+strconv.Itoa(int(port))+"/stats): answered HTTP 503")
	// A pod without the series beside one with it has not counted yet
	// (its counter is 0: here a fall from 2, a restart); without it on
	// every pod, the name may be wrong.
	a.set(func(p *fakePod) { p.status, p.noMetric = 0, true })
	evaluate(210, StateIdle, "")
	// Nor does a page without it on every pod, once one had it within the
	// window (the HPA kept a pod that had served nothing).
	b.set(func(p *fakePod) { p.noMetric = true })
	evaluate(215, StateIdle, "")
	a.set(func(p *fakePod) { p.noMetric = false })
	b.set(func(p *fakePod) { p.noMetric = false })
	b.set(func(p *fakePod) { p.status = http.StatusNotFound })
	a.set(func(p *fakePod) { p.status = http.StatusNotFound })
	evaluate(220, StateUnhealthy, ReasonPodScrapeFailed, "pod n/web-a", "; and 1 more pods")
	a.set(func(p *fakePod) { p.status = 0 })
	b.set(func(p *fakePod) { p.status = 0 })
	evaluate(240, StateIdle, "")
	if r := ev.Evaluate(ctx, es); r.State != StateIdle { // the same instant: nothing new recorded
		t.Errorf("Evaluate: %+v", r)
	}

	// A pod that does not listen at all.
	own.Endpoints[2].Conditions.Ready = ptr.To(true)
	if err := endpoints.Update(ctx, own); err != nil {
		t.Fatal(err)
	}
	evaluate(250, StateUnhealthy, ReasonPodScrapeFailed, "127.0.0.3", "connection refused")

	// No ready pod: nothing served through the Service, idle once the
	// pods' last increase has left the window.
	for i := range own.Endpoints {
		own.Endpoints[i].Conditions.Ready = ptr.To(false)
	}
	if err := endpoints.Update(ctx, own); err != nil {
		t.Fatal(err)
	}
	evaluate(260, StateIdle, "", "no ready pod to scrape")

	// A changed trigger starts a history of its own.
	es.Spec.Triggers[0].Metadata.Labels = nil
	evaluate(270, StateActive, "", "not enough history yet")

	// A counter no pod has had within the window: the name may be wrong.
	own.Endpoints[0].Conditions.Ready, own.Endpoints[1].Conditions.Ready = ptr.To(true), ptr.To(true)
	if err := endpoints.Update(ctx, own); err != nil {
		t.Fatal(err)
	}
	es.Spec.Triggers[0].Metadata.MetricName = "jobs_total"
	evaluate(280, StateUnhealthy, ReasonMetricNotFound, "pod n/web-a", "no jobs or jobs_total on the page", "; and 1 more pods")
}

// Scrapes that go wrong in other ways: a redirect is not followed, a slow
// pod times out, a page that is not a metrics page is invalid.
func TestPodMetricsScrapeFailures(t *testing.T) {
	pods, port := servePods(t, 1)
	p := pods[0]
	scheme := runtime.NewScheme()
	_ = discoveryv1.AddToScheme(scheme)
	endpoints := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "n", Name: "web-abc", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{p.addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}).Build()
	ev := &Evaluator{Endpoints: endpoints, Timeout: 200 * time.Millisecond}
	es := &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "web"}, Spec: elastiv1alpha1.ElastiServiceSpec{
		Service: "web", Triggers: []elastiv1alpha1.ScaleTrigger{{Type: elastiv1alpha1.TriggerTypePodMetrics, Metadata: elastiv1alpha1.TriggerMetadata{
			MetricName: "http_requests_total", Port: port, Path: "/stats", Threshold: ptr.To(elastiv1alpha1.Threshold("1")),
		}}},
	}}
	for _, tc := range []struct {
		name       string
		set        func(p *fakePod)
		wantReason string
		wantIn     string
	}{
		{"redirect", func(p *fakePod) { p.status, p.location = http.StatusFound, "http://127.0.0.1:1/metrics" }, ReasonPodScrapeFailed, "answered HTTP 302"},
		{"timeout", func(p *fakePod) { p.delay = time.Second }, ReasonPodScrapeFailed, "context deadline exceeded"},
		{"not a metrics page", func(p *fakePod) { p.body = "<html>hi</html>\n" }, ReasonMetricsPageInvalid, "cannot be parsed"},
	} {
		p.set(func(p *fakePod) { p.status, p.location, p.delay, p.body = 0, "", 0, "" })
		p.set(tc.set)
		r := ev.evaluateOne(context.Background(), es, 0)
		if r.Reason != tc.wantReason || !strings.Contains(r.Message, tc.wantIn) || !strings.Contains(r.Message, p.addr) {
			t.Errorf("%s: got %+v, want %s with %q", tc.name, r, tc.wantReason, tc.wantIn)
		}
	}
}

func TestPodMetricsEvaluatorConfiguration(t *testing.T) {
	es := &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "web"}, Spec: elastiv1alpha1.ElastiServiceSpec{
		Service: "web", Triggers: []elastiv1alpha1.ScaleTrigger{{Type: elastiv1alpha1.TriggerTypePodMetrics, Metadata: elastiv1alpha1.TriggerMetadata{MetricName: "c", Port: 8080}}},
	}}
	if r := (&Evaluator{}).Evaluate(context.Background(), es); r.Reason != ReasonInvalidThreshold || !strings.Contains(r.Message, "needs metadata.threshold") {
		t.Errorf("no threshold: %+v", r)
	}
	es.Spec.Triggers[0].Metadata.Threshold = ptr.To(elastiv1alpha1.Threshold("lots"))
	if r := (&Evaluator{}).Evaluate(context.Background(), es); r.Reason != ReasonInvalidThreshold {
		t.Errorf("threshold not a number: %+v", r)
	}
	es.Spec.Triggers[0].Metadata.Threshold = ptr.To(elastiv1alpha1.Threshold("1"))
	if r := (&Evaluator{}).Evaluate(context.Background(), es); r.Reason != ReasonEndpointsUnavailable {
		t.Errorf("no reader: %+v", r)
	}
	failing := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return io.ErrUnexpectedEOF
		},
	}).Build()
	if r := (&Evaluator{Endpoints: failing}).Evaluate(context.Background(), es); r.Reason != ReasonEndpointsUnavailable || !strings.Contains(r.Message, "list EndpointSlices of Service n/web") {
		t.Errorf("list fails: %+v", r)
	}
	if got := podMetricsWindow(es); got != minPodMetricsWindow {
		t.Errorf("window for cooldown 0: %s", got)
	}
}
