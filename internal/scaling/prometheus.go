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

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// Reasons for an unhealthy prometheus trigger, used as condition reasons.
const (
	ReasonPrometheusUnreachable = "PrometheusUnreachable"
	ReasonQueryFailed           = "QueryFailed"
	ReasonEmptyResult           = "EmptyResult"
	ReasonMultipleSeries        = "MultipleSeries"
	ReasonNotANumber            = "NotANumber"
	ReasonNoServerAddress       = "NoServerAddress"
	ReasonPrometheusWasDown     = "PrometheusWasDown"
)

// Errors a Prometheus query can end in. Each maps to a condition reason.
var (
	ErrEmptyResult       = errors.New("the query returned no sample")
	ErrMultipleSeries    = errors.New("the query returned more than one series")
	ErrNotANumber        = errors.New("the query returned NaN or an infinity")
	ErrUnsupportedResult = errors.New("the query returned neither an instant vector nor a scalar")
	ErrPrometheusWasDown = errors.New("prometheus was not up for the whole cooldown period")
)

// evaluatePrometheus evaluates a prometheus trigger: its query's single
// value below the threshold is idle. With an uptimeFilter, Prometheus must
// also have been up for the whole cooldown, or the trigger is unhealthy.
func (e *Evaluator) evaluatePrometheus(ctx context.Context, es *elastiv1alpha1.ElastiService, t elastiv1alpha1.ScaleTrigger) Result {
	md := t.Metadata
	limit, res := threshold(md.Threshold)
	if res != nil {
		return *res
	}
	q := prometheusQuery{address: md.ServerAddress, query: md.Query, headers: md.Headers}
	if q.address == "" {
		q.address = e.DefaultServerAddress
	}
	if q.address == "" {
		return unhealthy(ReasonNoServerAddress, "no metadata.serverAddress and no operator --prometheus-address")
	}
	if md.AuthSecretRef != nil {
		token, res := e.bearer(ctx, es.Namespace, md.AuthSecretRef)
		if res != nil {
			return *res
		}
		q.bearer = token
	}
	rt, timeout := e.transport(), e.timeout()
	if md.UptimeFilter != "" {
		up := q
		up.query = uptimeQuery(md.UptimeFilter, time.Duration(es.Spec.CooldownPeriod)*time.Second)
		v, err := queryPrometheus(ctx, rt, up, timeout)
		if err != nil {
			r := fromQueryError(err)
			r.Message = "uptime check: " + r.Message
			return r
		}
		if v < 1 {
			return unhealthy(ReasonPrometheusWasDown, fmt.Sprintf("%v: the up{%s} series dropped below 1", ErrPrometheusWasDown, md.UptimeFilter))
		}
	}
	v, err := queryPrometheus(ctx, rt, q, timeout)
	if err != nil {
		return fromQueryError(err)
	}
	if v < limit {
		return Result{State: StateIdle, Message: fmt.Sprintf("below the threshold %s", thresholdText(md.Threshold)), Value: v}
	}
	return Result{State: StateActive, Message: fmt.Sprintf("at or above the threshold %s", thresholdText(md.Threshold)), Value: v}
}

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

// fromQueryError maps a query error to a condition reason.
func fromQueryError(err error) Result {
	var apiErr *promv1.Error
	switch {
	case errors.Is(err, ErrEmptyResult):
		return unhealthy(ReasonEmptyResult, ErrEmptyResult.Error()+"; end the query with \"or vector(0)\"")
	case errors.Is(err, ErrMultipleSeries):
		return unhealthy(ReasonMultipleSeries, ErrMultipleSeries.Error()+"; aggregate it, e.g. with sum()")
	case errors.Is(err, ErrNotANumber):
		return unhealthy(ReasonNotANumber, ErrNotANumber.Error())
	case errors.Is(err, ErrUnsupportedResult):
		return unhealthy(ReasonQueryFailed, err.Error())
	case errors.As(err, &apiErr) && apiErr.Type != promv1.ErrClient && apiErr.Type != promv1.ErrServer:
		// bad_data, execution, timeout, canceled: Prometheus answered but
		// could not run the query.
		return unhealthy(ReasonQueryFailed, "Prometheus rejected the query: "+apiErr.Msg)
	default:
		return unhealthy(ReasonPrometheusUnreachable, "Prometheus did not answer: "+stableNetError(err))
	}
}

// stableNetError strips the parts of a network error that change from one
// attempt to the next (local ports), so that condition messages stay stable.
func stableNetError(err error) string {
	msg := err.Error()
	for _, marker := range []string{"connection refused", "no such host", "i/o timeout", "context deadline exceeded", "connection reset"} {
		if strings.Contains(msg, marker) {
			return marker
		}
	}
	if len(msg) > 200 {
		msg = msg[:200]
	}
	return msg
}
