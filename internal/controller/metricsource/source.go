package metricsource

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/controller/proxyslices"
	"elasti.dev/elasti/internal/metricsapi"
	"elasti.dev/elasti/internal/scaling"
)

// rateWindow is the span both rates are measured over.
const rateWindow = scaling.RateWindow

// Triggers gives the latest trigger evaluation of an ElastiService
// (triggerpoll.Poller.Latest).
type Triggers interface {
	Latest(key types.NamespacedName) (res scaling.Result, at time.Time, ok bool)
}

// Config is what New needs.
type Config struct {
	// Reader reads ElastiServices and the resolver pods (the manager's
	// cache).
	Reader client.Reader
	// Triggers is the leader's trigger poller.
	Triggers Triggers
	// Namespace is the resolvers' namespace, ResolverAdminPort their
	// metrics port.
	Namespace         string
	ResolverAdminPort int
	// WatchNamespaces are the operator's namespaces; empty is all.
	WatchNamespaces []string
	// MaxTriggerAge is the age past which a trigger's rate is not served:
	// a couple of polling intervals.
	MaxTriggerAge time.Duration
	Clock         clock.Clock
}

// Source serves the metrics API (internal/metricsapi) from what the
// operator knows (docs/architecture.md, "The metrics API"):
//   - elasti_requests_held: the requests the ready resolvers hold for the
//     ElastiService (their elasti_resolver_held_requests), 0 in serve
//     mode, where nothing passes through them;
//   - elasti_requests_per_second: in proxy mode the resolvers' forwarded
//     requests per second over the last 30 s; in serve mode the rate of
//     the ElastiService's first podMetrics trigger over the last 30 s
//     (scaling.Result.Rate), which only the leader measures;
//   - elasti_awake: 1 in serve mode and while requests are held, else 0.
type Source struct {
	cfg      Config
	scraper  *resolverScraper
	watching func(namespace string) bool
}

var _ metricsapi.Source = (*Source)(nil)

// New builds a Source over cfg.
func New(cfg Config) *Source {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	s := &Source{cfg: cfg}
	s.scraper = &resolverScraper{
		list: func(ctx context.Context) ([]proxyslices.Resolver, error) {
			return proxyslices.ListResolvers(ctx, cfg.Reader, cfg.Namespace)
		},
		port:   cfg.ResolverAdminPort,
		client: &http.Client{Timeout: 2 * time.Second},
		clock:  cfg.Clock,
		// The HPA controller reads every 15 s; two HPAs on one
		// ElastiService, or a person with kubectl, share a scrape.
		maxAge: 2 * time.Second,
	}
	s.watching = func(ns string) bool { return len(cfg.WatchNamespaces) == 0 || slices.Contains(cfg.WatchNamespaces, ns) }
	return s
}

// Read implements metricsapi.Source.
func (s *Source) Read(ctx context.Context, metric string, key types.NamespacedName) (metricsapi.Reading, bool, error) {
	if !s.watching(key.Namespace) {
		return metricsapi.Reading{}, false, nil
	}
	es := &elastiv1alpha1.ElastiService{}
	if err := s.cfg.Reader.Get(ctx, key, es); err != nil {
		if apierrors.IsNotFound(err) {
			return metricsapi.Reading{}, false, nil
		}
		return metricsapi.Reading{}, false, err
	}
	mode := es.Status.Mode
	if mode == "" {
		return metricsapi.Reading{}, false, fmt.Errorf("ElastiService %s has no mode yet: the operator has not reconciled it", key)
	}
	now := s.cfg.Clock.Now()
	switch metric {
	case metricsapi.MetricHeld:
		if mode != elastiv1alpha1.ModeProxy {
			return reading(0, now, 0), true, nil
		}
		c, err := s.scraper.counts(ctx)
		if err != nil {
			return metricsapi.Reading{}, false, err
		}
		return reading(c.held[key], c.at, 0), true, nil
	case metricsapi.MetricAwake:
		if mode != elastiv1alpha1.ModeProxy {
			return reading(1, now, 0), true, nil
		}
		c, err := s.scraper.counts(ctx)
		if err != nil {
			return metricsapi.Reading{}, false, err
		}
		awake := 0.0
		if c.held[key] > 0 {
			awake = 1
		}
		return reading(awake, c.at, 0), true, nil
	case metricsapi.MetricRate:
		if mode == elastiv1alpha1.ModeProxy {
			perSecond, span, at, err := s.scraper.rateNow(ctx, key)
			if err != nil {
				return metricsapi.Reading{}, false, err
			}
			if span == 0 {
				return metricsapi.Reading{}, false, fmt.Errorf("no request rate of ElastiService %s yet: the resolvers' counters have been read once", key)
			}
			return reading(perSecond, at, span), true, nil
		}
		return s.triggerRate(es, now)
	}
	return metricsapi.Reading{}, false, nil
}

// triggerRate is serve mode's rate: the first podMetrics trigger's.
func (s *Source) triggerRate(es *elastiv1alpha1.ElastiService, now time.Time) (metricsapi.Reading, bool, error) {
	key := client.ObjectKeyFromObject(es)
	if !scaling.MeasuresRate(es) {
		return metricsapi.Reading{}, false, fmt.Errorf(
			"ElastiService %s has no podMetrics trigger: in serve mode %s is the request rate such a trigger scrapes from the target's pods", key, metricsapi.MetricRate)
	}
	res, _, ok := s.cfg.Triggers.Latest(key)
	if !ok || res.Rate == nil {
		return metricsapi.Reading{}, false, fmt.Errorf("no request rate of ElastiService %s yet: its podMetrics trigger has not been evaluated on this replica (the leader's)", key)
	}
	if age := now.Sub(res.Rate.At); s.cfg.MaxTriggerAge > 0 && age > s.cfg.MaxTriggerAge {
		return metricsapi.Reading{}, false, fmt.Errorf("the request rate of ElastiService %s is %s old: its podMetrics trigger has not been evaluated since", key, age.Round(time.Second))
	}
	return reading(res.Rate.PerSecond, res.Rate.At, res.Rate.Span), true, nil
}

// reading rounds v to thousandths (milli-units), the HPA's own precision.
func reading(v float64, at time.Time, window time.Duration) metricsapi.Reading {
	return metricsapi.Reading{Value: *resource.NewMilliQuantity(int64(math.Round(v*1000)), resource.DecimalSI), At: at, Window: window}
}
