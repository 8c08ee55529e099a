package scaling

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
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
	// ReasonPrometheusUnauthorized: the server, or a proxy in front of it,
	// answered 401 or 403 (no credentials, or ones it refuses).
	ReasonPrometheusUnauthorized = "PrometheusUnauthorized"
	// ReasonServerNotAllowed: the serverAddress is not on the operator's
	// --trigger-servers, or resolves to an address no trigger may reach.
	ReasonServerNotAllowed = "ServerNotAllowed"
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
	rt, timeout := e.transport(), e.timeout()
	if e.Servers != nil && !e.Servers.Trusted(q.address) {
		if err := e.Servers.Check(q.address); err != nil {
			return unhealthy(ReasonServerNotAllowed, "metadata.serverAddress: "+err.Error())
		}
		rt = e.Servers.Transport()
	}
	creds, res := readCredentials(ctx, e.Secrets, es.Namespace, md)
	if res != nil {
		return *res
	}
	q.creds = creds
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
	creds   credentials
}

// queryPrometheus runs an instant query at the server's current time and
// returns its single value.
func queryPrometheus(ctx context.Context, rt http.RoundTripper, q prometheusQuery, timeout time.Duration) (float64, error) {
	hrt := &headerRoundTripper{base: rt, headers: q.headers, authorization: q.creds.header}
	if u, err := url.Parse(q.address); err == nil {
		hrt.origin = u.Host
	}
	c, err := api.NewClient(api.Config{Address: q.address, Client: &http.Client{
		Transport: hrt,
		// The trigger's server is where its spec says: a redirect is not
		// followed (it reads as an answer with a 3xx status), so neither
		// the query nor the credentials go anywhere else.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}})
	if err != nil {
		return 0, fmt.Errorf("build Prometheus client for %s: %w", q.address, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// A zero time lets Prometheus evaluate at its own "now": the operator's
	// clock is injected and may be a test clock.
	v, _, _, err := promv1.NewAPI(c).Query(ctx, q.query, time.Time{}, promv1.WithTimeout(timeout))
	var apiErr *promv1.Error
	// A Prometheus error (bad_data, execution...) comes with a 4xx or 5xx
	// status too; it is the query's fault, not the server's.
	prometheusError := errors.As(err, &apiErr) && apiErr.Type != promv1.ErrClient && apiErr.Type != promv1.ErrServer
	if code := int(hrt.status.Load()); err != nil && (code >= 300 && code < 400 || code >= 400 && !prometheusError) {
		// A bare HTTP status, with no Prometheus error in the body: most
		// often a proxy in front of the server (an auth gateway, an
		// ingress) answered, or a redirect, which is not followed. What
		// the body said stays out of the status, where the ElastiService's
		// author reads it: it is the server's to write.
		err = &httpStatusError{address: q.address, code: code, creds: q.creds.source}
	}
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

// headerRoundTripper adds the trigger's headers and credentials, and keeps
// the status of the last response, which the Prometheus client does not
// return with a bare HTTP error.
type headerRoundTripper struct {
	base          http.RoundTripper
	headers       map[string]string
	authorization string
	// origin is the host of the trigger's serverAddress: the only one the
	// headers and credentials are sent to.
	origin string
	status atomic.Int32
}

// maxAnswer bounds what is read of a server's answer: a query's single
// number, with Prometheus's envelope, is a few hundred bytes.
const maxAnswer = 1 << 20

func (h *headerRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host != h.origin {
		return nil, fmt.Errorf("refusing to send the trigger's query to %s: its serverAddress names %s", req.URL.Host, h.origin)
	}
	req = req.Clone(req.Context())
	for k, v := range h.headers {
		req.Header.Set(k, v)
	}
	if h.authorization != "" {
		req.Header.Set("Authorization", h.authorization)
	}
	resp, err := h.base.RoundTrip(req)
	if resp != nil {
		h.status.Store(int32(resp.StatusCode))
		resp.Body = &boundedAnswer{ReadCloser: resp.Body, left: maxAnswer}
	}
	return resp, err
}

// boundedAnswer fails a read past maxAnswer.
type boundedAnswer struct {
	io.ReadCloser
	left int64
}

func (b *boundedAnswer) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("the answer is longer than %d bytes", maxAnswer)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// httpStatusError is an answer with an HTTP error or redirect status and
// no Prometheus error in its body.
type httpStatusError struct {
	address string
	code    int
	// creds says where the credentials sent came from; empty when none
	// were sent.
	creds string
}

func (e *httpStatusError) Error() string {
	status := fmt.Sprintf("HTTP %d %s", e.code, http.StatusText(e.code))
	switch {
	case e.code == http.StatusUnauthorized && e.creds == "":
		return fmt.Sprintf("the server at %s refused the request for lack of credentials (%s), and the trigger sends none: set metadata.authSecretRef (a bearer token) or metadata.basicAuthSecretRef (a username and password)", e.address, status)
	case e.code == http.StatusUnauthorized:
		return fmt.Sprintf("the server at %s refused the credentials (%s): check %s", e.address, status, e.creds)
	case e.code == http.StatusForbidden && e.creds == "":
		return fmt.Sprintf("the server at %s refused the request (%s); the trigger sends no credentials", e.address, status)
	case e.code == http.StatusForbidden:
		return fmt.Sprintf("the server at %s refused the credentials (%s): %s may not run this query, or not for the tenant in metadata.headers", e.address, status, e.creds)
	}
	if e.code < 400 {
		return fmt.Sprintf("the server at %s answered %s, a redirect, which the operator does not follow: set serverAddress to the server itself", e.address, status)
	}
	return fmt.Sprintf("the server at %s answered %s instead of a query result", e.address, status)
}

// unauthorized reports whether the server refused the request's
// credentials, or their absence.
func (e *httpStatusError) unauthorized() bool {
	return e.code == http.StatusUnauthorized || e.code == http.StatusForbidden
}

// fromQueryError maps a query error to a condition reason.
func fromQueryError(err error) Result {
	var apiErr *promv1.Error
	var statusErr *httpStatusError
	switch {
	case errors.Is(err, ErrServerNotAllowed) || strings.Contains(err.Error(), ErrServerNotAllowed.Error()):
		// The dial was refused (ServerPolicy.Transport); Prometheus's
		// client keeps only the error's text.
		return unhealthy(ReasonServerNotAllowed, "metadata.serverAddress resolves to a loopback, link-local or unspecified address, which a trigger may not reach unless a --trigger-servers CIDR holds it")
	case errors.As(err, &statusErr) && statusErr.unauthorized():
		return unhealthy(ReasonPrometheusUnauthorized, statusErr.Error())
	case errors.As(err, &statusErr):
		return unhealthy(ReasonPrometheusUnreachable, statusErr.Error())
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
		// Its words stay out of the status, which the author reads: the
		// server is the author's to choose.
		return unhealthy(ReasonQueryFailed, fmt.Sprintf("Prometheus rejected the query (%s); test it in Prometheus's own UI", knownErrorType(apiErr.Type)))
	default:
		return unhealthy(ReasonPrometheusUnreachable, "Prometheus did not answer: "+stableNetError(err))
	}
}

// knownErrorType is t when it is one of the error types Prometheus's HTTP
// API defines, and "an unknown error type" otherwise: the type is read from
// the server's answer (errorType), and the server is the author's to
// choose, so any other text it writes stays out of the status.
func knownErrorType(t promv1.ErrorType) string {
	switch t {
	case promv1.ErrBadData, promv1.ErrTimeout, promv1.ErrCanceled, promv1.ErrExec, promv1.ErrBadResponse:
		return string(t)
	}
	return "an unknown error type"
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
