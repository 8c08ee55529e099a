package scaling

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// Errors a Prometheus query can end in. Each maps to a condition reason.
var (
	ErrEmptyResult       = errors.New("the query returned no sample")
	ErrMultipleSeries    = errors.New("the query returned more than one series")
	ErrNotANumber        = errors.New("the query returned NaN or an infinity")
	ErrUnsupportedResult = errors.New("the query returned neither an instant vector nor a scalar")
	ErrPrometheusWasDown = errors.New("prometheus was not up for the whole cooldown period")
)

// prometheusQuery is one query to run against one server.
type prometheusQuery struct {
	address string
	query   string
	headers map[string]string
	bearer  string
}

// queryPrometheus runs an instant query at the server's current time and
// returns its single value.
func queryPrometheus(ctx context.Context, rt http.RoundTripper, q prometheusQuery, timeout time.Duration) (float64, error) {
	c, err := api.NewClient(api.Config{Address: q.address, RoundTripper: &headerRoundTripper{base: rt, headers: q.headers, bearer: q.bearer}})
	if err != nil {
		return 0, fmt.Errorf("build Prometheus client for %s: %w", q.address, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// A zero time lets Prometheus evaluate at its own "now": the operator's
	// clock is injected and may be a test clock.
	v, _, _, err := promv1.NewAPI(c).Query(ctx, q.query, time.Time{}, promv1.WithTimeout(timeout))
	if err != nil {
		return 0, fmt.Errorf("query %s: %w", q.address, err)
	}
	return sampleValue(v)
}

// sampleValue extracts the one number a trigger query must produce.
func sampleValue(v model.Value) (float64, error) {
	var f float64
	switch v := v.(type) {
	case model.Vector:
		switch len(v) {
		case 0:
			return 0, ErrEmptyResult
		case 1:
			f = float64(v[0].Value)
		default:
			return 0, fmt.Errorf("%w (%d series)", ErrMultipleSeries, len(v))
		}
	case *model.Scalar:
		if v == nil {
			return 0, ErrEmptyResult
		}
		f = float64(v.Value)
	case nil:
		return 0, ErrEmptyResult
	default:
		return 0, fmt.Errorf("%w: %s", ErrUnsupportedResult, v.Type())
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, ErrNotANumber
	}
	return f, nil
}

// uptimeQuery builds the query that proves Prometheus itself was up for the
// whole cooldown: the lowest value of its "up" series over that window.
func uptimeQuery(filter string, cooldown time.Duration) string {
	selector := "up{" + strings.TrimSpace(filter) + "}"
	secs := int64(cooldown / time.Second)
	if secs < 1 {
		return "min(" + selector + ")"
	}
	return fmt.Sprintf("min(min_over_time(%s[%ds]))", selector, secs)
}

// headerRoundTripper adds the trigger's headers and bearer token.
type headerRoundTripper struct {
	base    http.RoundTripper
	headers map[string]string
	bearer  string
}

func (h *headerRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range h.headers {
		req.Header.Set(k, v)
	}
	if h.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+h.bearer)
	}
	return h.base.RoundTrip(req)
}
