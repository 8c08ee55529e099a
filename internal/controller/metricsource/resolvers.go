package metricsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/proxyslices"
)

// Bounds of a scrape of the resolvers.
const (
	// maxPage bounds one resolver's metrics page: it has a few series per
	// mapped ElastiService.
	maxPage = 64 << 20
	// snapshotEvery is the least spacing of the snapshots kept for rates;
	// reads in between use the latest scrape but keep no more history.
	snapshotEvery = 10 * time.Second
)

// resolverCounts is one scrape of every ready resolver.
type resolverCounts struct {
	at time.Time
	// held sums elasti_resolver_held_requests over the resolvers.
	held map[types.NamespacedName]float64
	// forwarded is elasti_resolver_forwarded_total by resolver pod: rates
	// follow each pod's counter, which restarts with the pod.
	forwarded map[types.UID]map[types.NamespacedName]float64
}

// resolverScraper reads the resolvers' admin ports, at most once per maxAge
// whatever the number of readers, and keeps a few older scrapes for rates.
type resolverScraper struct {
	list   func(ctx context.Context) ([]proxyslices.Resolver, error)
	port   int
	client *http.Client
	clock  clock.Clock
	maxAge time.Duration

	mu      sync.Mutex
	latest  *resolverCounts
	history []*resolverCounts // oldest first, snapshotEvery apart at least
}

// counts returns a scrape no older than maxAge, scraping now if needed.
func (s *resolverScraper) counts(ctx context.Context) (*resolverCounts, error) {
	return s.countsAfter(ctx, s.clock.Now().Add(-s.maxAge))
}

// countsAfter returns a scrape taken after t, scraping now if needed.
func (s *resolverScraper) countsAfter(ctx context.Context, t time.Time) (*resolverCounts, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	if s.latest != nil && s.latest.at.After(t) {
		return s.latest, nil
	}
	c, err := s.scrape(ctx, now)
	if err != nil {
		return nil, err
	}
	s.latest = c
	if n := len(s.history); n == 0 || c.at.Sub(s.history[n-1].at) >= snapshotEvery {
		s.history = append(s.history, c)
	}
	// Keep one snapshot at or before the oldest window start a rate asks
	// for, and nothing older.
	for len(s.history) > 2 && !s.history[1].at.After(now.Add(-2*rateWindow)) {
		s.history = s.history[1:]
	}
	return c, nil
}

// firstRateAfter is how long a read of the rate waits for a second scrape
// when there is only one: the first read after the operator started, or
// after a long time without reads.
const firstRateAfter = time.Second

// rateNow is rate, with a second scrape firstRateAfter on when there is
// only one so far.
func (s *resolverScraper) rateNow(ctx context.Context, key types.NamespacedName) (perSecond float64, span time.Duration, at time.Time, err error) {
	c, err := s.counts(ctx)
	if err != nil {
		return 0, 0, time.Time{}, err
	}
	if perSecond, span = s.rate(key); span > 0 {
		return perSecond, span, c.at, nil
	}
	select {
	case <-ctx.Done():
		return 0, 0, time.Time{}, ctx.Err()
	case <-s.clock.After(firstRateAfter):
	}
	if c, err = s.countsAfter(ctx, c.at); err != nil {
		return 0, 0, time.Time{}, err
	}
	perSecond, span = s.rate(key)
	return perSecond, span, c.at, nil
}

// rate is key's forwarded requests per second over the last rateWindow,
// from the latest scrape and the last kept one at or before the window's
// start (or the oldest kept). span is zero when there is no earlier scrape
// yet. A resolver missing from the older scrape (new since) counts its
// whole counter; a counter lower than before restarted from zero.
func (s *resolverScraper) rate(key types.NamespacedName) (perSecond float64, span time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.latest == nil || len(s.history) == 0 {
		return 0, 0
	}
	start := s.latest.at.Add(-rateWindow)
	base := s.history[0]
	for _, h := range s.history[1:] {
		if h.at.After(start) {
			break
		}
		base = h
	}
	span = s.latest.at.Sub(base.at)
	if span <= 0 {
		return 0, 0
	}
	var sum float64
	for pod, byKey := range s.latest.forwarded {
		now := byKey[key]
		before := base.forwarded[pod][key]
		if now < before {
			before = 0
		}
		sum += now - before
	}
	return sum / span.Seconds(), span
}

// scrape reads every ready resolver's metrics page. One resolver that does
// not answer fails the scrape: its held requests would be missing.
func (s *resolverScraper) scrape(ctx context.Context, now time.Time) (*resolverCounts, error) {
	resolvers, err := s.list(ctx)
	if err != nil {
		return nil, err
	}
	c := &resolverCounts{at: now, held: map[types.NamespacedName]float64{}, forwarded: map[types.UID]map[types.NamespacedName]float64{}}
	type page struct {
		uid       types.UID
		held      map[types.NamespacedName]float64
		forwarded map[types.NamespacedName]float64
		err       error
	}
	pages := make(chan page, len(resolvers))
	for _, r := range resolvers {
		go func() {
			p := page{uid: r.UID}
			p.held, p.forwarded, p.err = s.scrapeOne(ctx, r)
			pages <- p
		}()
	}
	var errs []error
	for range resolvers {
		p := <-pages
		if p.err != nil {
			errs = append(errs, p.err)
			continue
		}
		for k, v := range p.held {
			c.held[k] += v
		}
		c.forwarded[p.uid] = p.forwarded
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("scrape the resolvers: %w", errors.Join(errs...))
	}
	return c, nil
}

func (s *resolverScraper) scrapeOne(ctx context.Context, r proxyslices.Resolver) (held, forwarded map[types.NamespacedName]float64, err error) {
	ip := r.IPv4
	if ip == "" {
		ip = r.IPv6
	}
	url := "http://" + net.JoinHostPort(ip, strconv.Itoa(s.port)) + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("resolver %s: %w", r.Name, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("resolver %s: %s answered %s", r.Name, url, resp.Status)
	}
	held, forwarded, err = parseResolverPage(io.LimitReader(resp.Body, maxPage), resp.Header.Get("Content-Type"))
	if err != nil {
		return nil, nil, fmt.Errorf("resolver %s: %w", r.Name, err)
	}
	return held, forwarded, nil
}

// parseResolverPage reads the held gauge and the forwarded counter of every
// ElastiService from one resolver's metrics page.
func parseResolverPage(page io.Reader, contentType string) (held, forwarded map[types.NamespacedName]float64, err error) {
	held, forwarded = map[types.NamespacedName]float64{}, map[types.NamespacedName]float64{}
	dec := expfmt.NewDecoder(page, expfmt.Format(contentType))
	for {
		var mf dto.MetricFamily
		err := dec.Decode(&mf)
		if errors.Is(err, io.EOF) {
			return held, forwarded, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("metrics page: %w", err)
		}
		var into map[types.NamespacedName]float64
		switch mf.GetName() {
		case contract.ResolverHeldMetric:
			into = held
		case contract.ResolverForwardedMetric:
			into = forwarded
		default:
			continue
		}
		for _, m := range mf.GetMetric() {
			var key types.NamespacedName
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case contract.MetricLabelNamespace:
					key.Namespace = l.GetValue()
				case contract.MetricLabelElastiService:
					key.Name = l.GetValue()
				}
			}
			v := m.GetGauge().GetValue()
			if mf.GetType() == dto.MetricType_COUNTER {
				v = m.GetCounter().GetValue()
			}
			into[key] += v
		}
	}
}
