package metricsource

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/proxyslices"
)

var (
	shop = types.NamespacedName{Namespace: "team-a", Name: "shop"}
	blog = types.NamespacedName{Namespace: "team-b", Name: "blog"}
)

// resolverMetrics are the two resolver metrics the source reads, under the
// names and labels internal/contract gives both planes.
type resolverMetrics struct {
	Held      *prometheus.GaugeVec
	Forwarded *prometheus.CounterVec
}

// resolverPage serves a resolver's metrics page, as its admin port does,
// and counts the scrapes.
func resolverPage(t *testing.T) (*resolverMetrics, *httptest.Server, *atomic.Int32) {
	t.Helper()
	reg := prometheus.NewRegistry()
	labels := []string{contract.MetricLabelNamespace, contract.MetricLabelElastiService}
	m := &resolverMetrics{
		Held:      prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: contract.ResolverHeldMetric, Help: "held"}, labels),
		Forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{Name: contract.ResolverForwardedMetric, Help: "forwarded"}, labels),
	}
	reg.MustRegister(m.Held, m.Forwarded)
	var scrapes atomic.Int32
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scrapes.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return m, srv, &scrapes
}

func scraperFor(t *testing.T, srv *httptest.Server, clk *clocktesting.FakeClock) *resolverScraper {
	t.Helper()
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	return &resolverScraper{
		list: func(context.Context) ([]proxyslices.Resolver, error) {
			return []proxyslices.Resolver{{Name: "resolver-a", UID: "a", IPv4: "127.0.0.1"}}, nil
		},
		port: p, client: srv.Client(), clock: clk, maxAge: 2 * time.Second,
	}
}

// TestResolverScraper reads a resolver's metrics page: held requests
// per ElastiService, one scrape shared by reads within maxAge, and the
// forwarded rate over the last 30 s once there are two scrapes.
func TestResolverScraper(t *testing.T) {
	m, srv, scrapes := resolverPage(t)
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	s := scraperFor(t, srv, clk)
	ctx := context.Background()

	m.Held.WithLabelValues(shop.Namespace, shop.Name).Set(3)
	m.Forwarded.WithLabelValues(shop.Namespace, shop.Name).Add(100)
	c, err := s.counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.held[shop] != 3 || c.held[blog] != 0 {
		t.Errorf("held: %v", c.held)
	}
	if _, span := s.rate(shop); span != 0 {
		t.Errorf("a rate from one scrape (span %s)", span)
	}

	// Within maxAge: the same scrape.
	m.Held.WithLabelValues(shop.Namespace, shop.Name).Set(5)
	clk.Step(time.Second)
	if c, _ := s.counts(ctx); c.held[shop] != 3 || scrapes.Load() != 1 {
		t.Errorf("within maxAge: held %v after %d scrapes, want the first scrape's 3", c.held[shop], scrapes.Load())
	}

	// 15 s on: 60 more forwarded.
	m.Forwarded.WithLabelValues(shop.Namespace, shop.Name).Add(60)
	clk.Step(14 * time.Second)
	if c, _ := s.counts(ctx); c.held[shop] != 5 {
		t.Errorf("held after maxAge: %v, want 5", c.held[shop])
	}
	if r, span := s.rate(shop); r != 4 || span != 15*time.Second {
		t.Errorf("rate %v over %s, want 4 over 15s", r, span)
	}
	if r, _ := s.rate(blog); r != 0 {
		t.Errorf("blog's rate %v, want 0", r)
	}
	// 30 s later still, 30 more: the window starts at the scrape 30 s back.
	m.Forwarded.WithLabelValues(shop.Namespace, shop.Name).Add(30)
	clk.Step(30 * time.Second)
	if _, err := s.counts(ctx); err != nil {
		t.Fatal(err)
	}
	if r, span := s.rate(shop); r != 1 || span != 30*time.Second {
		t.Errorf("rate %v over %s, want 1 over 30s", r, span)
	}
}

// TestResolverScraperFailure: a resolver that does not answer fails the
// read (its held requests would be missing), and a counter lower than
// before restarted with its pod.
func TestResolverScraperFailure(t *testing.T) {
	_, srv, _ := resolverPage(t)
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	s := scraperFor(t, srv, clk)
	s.list = func(context.Context) ([]proxyslices.Resolver, error) {
		return []proxyslices.Resolver{{Name: "resolver-a", UID: "a", IPv4: "127.0.0.1"}, {Name: "resolver-b", UID: "b", IPv4: "127.0.0.1", NodeName: "x"}}, nil
	}
	srv.Close()
	if _, err := s.counts(context.Background()); err == nil {
		t.Error("a scrape with resolvers down did not fail")
	}

	s.latest = &resolverCounts{at: time.Unix(1030, 0), forwarded: map[types.UID]map[types.NamespacedName]float64{"a": {shop: 12}}}
	s.history = []*resolverCounts{
		{at: time.Unix(1000, 0), forwarded: map[types.UID]map[types.NamespacedName]float64{"a": {shop: 500}}},
		s.latest,
	}
	if r, span := s.rate(shop); r != 0.4 || span != 30*time.Second {
		t.Errorf("after a restart: rate %v over %s, want 12 over 30 s", r, span)
	}
}

// TestResolverScraperFirstRate: with one scrape so far, a read of the rate
// takes a second one a second on, rather than fail.
func TestResolverScraperFirstRate(t *testing.T) {
	m, srv, scrapes := resolverPage(t)
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	s := scraperFor(t, srv, clk)
	m.Forwarded.WithLabelValues(shop.Namespace, shop.Name).Add(100)
	type result struct {
		rate float64
		span time.Duration
		err  error
	}
	done := make(chan result)
	go func() {
		r, span, _, err := s.rateNow(context.Background(), shop)
		done <- result{r, span, err}
	}()
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	m.Forwarded.WithLabelValues(shop.Namespace, shop.Name).Add(7)
	clk.Step(time.Second)
	got := <-done
	if got.err != nil || got.rate != 7 || got.span != time.Second {
		t.Errorf("first rate: %v over %s, err %v; want 7 over 1s", got.rate, got.span, got.err)
	}
	if n := scrapes.Load(); n != 2 {
		t.Errorf("%d scrapes, want 2", n)
	}
}
