package scaling

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"golang.org/x/sync/errgroup"
)

const (
	// scrapeAccept asks for the Prometheus text format first, and takes
	// OpenMetrics 1.0.0 from a pod that serves only that. prometheus/common's
	// decoder reads the text format fully; it reads OpenMetrics 1.0.0 with
	// its text parser, which handles # EOF, # UNIT and counters whose
	// samples end in _total, but not exemplars or timestamps in seconds
	// (such a page is reported as invalid). Protobuf is not asked for.
	scrapeAccept = "text/plain;version=0.0.4;q=0.9,application/openmetrics-text;version=1.0.0;q=0.5,*/*;q=0.1"
	// maxMetricsPage bounds the page read from one pod.
	maxMetricsPage = 16 << 20
	// scrapeParallelism bounds the pods of one trigger scraped at once.
	scrapeParallelism = 8
)

// Errors a scrape can end in, beside the network's. Each maps to a
// condition reason in scrapeFailure.
var (
	errPageInvalid    = errors.New("the metrics page cannot be parsed")
	errMetricNotFound = errors.New("the metrics page has no matching counter")
	// errSeriesAbsent is errMetricNotFound for a page with no series of
	// the counter (none of that name, or none with the labels), which an
	// app that creates its series on the first count shows until then.
	errSeriesAbsent = fmt.Errorf("%w yet", errMetricNotFound)
)

// scrapeSpec is what to read from each pod, and how.
type scrapeSpec struct {
	metric  string
	labels  map[string]string
	headers map[string]string
	// authorization is the Authorization header's value; empty sends none.
	authorization string
	timeout       time.Duration
	transport     http.RoundTripper
}

// podScrape is one pod's scrape: the summed counter or why there is none.
type podScrape struct {
	pod   podTarget
	value float64
	err   error
}

// scrapeAll scrapes every pod, a few at a time, each within s.timeout.
func scrapeAll(ctx context.Context, pods []podTarget, s scrapeSpec) []podScrape {
	out := make([]podScrape, len(pods))
	c := &http.Client{
		Transport: s.transport,
		// A pod's metrics page is on the pod: a redirect elsewhere is not
		// followed, and reads as a failed scrape.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	var g errgroup.Group
	g.SetLimit(scrapeParallelism)
	for i, p := range pods {
		g.Go(func() error {
			v, err := scrapeOne(ctx, c, p.url, s)
			out[i] = podScrape{pod: p, value: v, err: err}
			return nil
		})
	}
	_ = g.Wait() // the functions report through out
	return out
}

// scrapeOne fetches one pod's metrics page and sums its matching series.
func scrapeOne(ctx context.Context, c *http.Client, url string, s scrapeSpec) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, fmt.Errorf("build request: %w", err)
	}
	for k, v := range s.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Accept", scrapeAccept)
	if s.authorization != "" {
		req.Header.Set("Authorization", s.authorization)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, errors.New(stableNetError(err))
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return 0, fmt.Errorf("answered HTTP %d", resp.StatusCode)
	}
	body := http.MaxBytesReader(nil, resp.Body, maxMetricsPage)
	return sumCounter(body, resp.Header.Get("Content-Type"), s.metric, s.labels)
}

// sumCounter parses a metrics page with prometheus/common's decoder for its
// content type and sums the series of the named counter that carry the
// given labels. The name is matched with or without _total, since an
// OpenMetrics counter http_requests has samples http_requests_total.
// Absent labels read as empty, as in a PromQL matcher.
func sumCounter(page io.Reader, contentType, metric string, labels map[string]string) (float64, error) {
	base := strings.TrimSuffix(metric, "_total")
	dec := expfmt.NewDecoder(page, expfmt.Format(contentType))
	var (
		sum           float64
		found, series bool
		// otherType is the type of a family with the name that is not a
		// counter, for the message.
		otherType string
	)
	for {
		var mf dto.MetricFamily
		err := dec.Decode(&mf)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				return 0, fmt.Errorf("%w: larger than %d bytes", errPageInvalid, maxMetricsPage)
			}
			return 0, fmt.Errorf("%w: %w", errPageInvalid, err)
		}
		if name := mf.GetName(); name != base && name != base+"_total" {
			continue
		}
		if t := mf.GetType(); t != dto.MetricType_COUNTER && t != dto.MetricType_UNTYPED {
			otherType = strings.ToLower(t.String())
			continue
		}
		found = true
		for _, m := range mf.GetMetric() {
			if !hasLabels(m, labels) {
				continue
			}
			v := m.GetCounter().GetValue()
			if mf.GetType() == dto.MetricType_UNTYPED {
				v = m.GetUntyped().GetValue()
			}
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return 0, fmt.Errorf("%w: %s is %v, not a counter's value", errPageInvalid, mf.GetName(), v)
			}
			sum += v
			series = true
		}
	}
	switch {
	case !found && otherType != "":
		return 0, fmt.Errorf("%w: %s is a %s, not a counter", errMetricNotFound, metric, otherType)
	case !found:
		return 0, fmt.Errorf("%w: no %s or %s_total on the page (a labelled counter appears only once it has counted; create its series at start)", errSeriesAbsent, base, base)
	case !series:
		return 0, fmt.Errorf("%w: no series of %s with labels %s", errSeriesAbsent, metric, LabelText(labels))
	}
	return sum, nil
}

// hasLabels reports whether a series carries every wanted label value.
func hasLabels(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		got := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == k {
				got = l.GetValue()
				break
			}
		}
		if got != v {
			return false
		}
	}
	return true
}

// LabelText writes labels as a PromQL selector body, sorted: {a="1",b="2"}.
func LabelText(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%q", k, labels[k])
	}
	return "{" + strings.Join(parts, ",") + "}"
}
