package scaling

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// State is what the triggers say about the target.
type State string

// Trigger states.
const (
	// StateIdle: every trigger reports idle; the target may sleep.
	StateIdle State = "idle"
	// StateActive: at least one trigger reports activity.
	StateActive State = "active"
	// StateUnhealthy: at least one trigger could not be evaluated. It never
	// leads to a scale-down.
	StateUnhealthy State = "unhealthy"
)

// Reasons for an unhealthy trigger, used as condition reasons.
const (
	ReasonPrometheusUnreachable = "PrometheusUnreachable"
	ReasonQueryFailed           = "QueryFailed"
	ReasonEmptyResult           = "EmptyResult"
	ReasonMultipleSeries        = "MultipleSeries"
	ReasonNotANumber            = "NotANumber"
	ReasonInvalidThreshold      = "InvalidThreshold"
	ReasonNoServerAddress       = "NoServerAddress"
	ReasonAuthSecretUnavailable = "AuthSecretUnavailable"
	ReasonPrometheusWasDown     = "PrometheusWasDown"
	ReasonUnsupportedTrigger    = "UnsupportedTrigger"
)

// Result of evaluating one trigger or all of them.
type Result struct {
	State State
	// Reason is a CamelCase condition reason when State is unhealthy.
	Reason string
	// Message explains the result to a person. It holds no measured value, so
	// that it stays stable from one evaluation to the next.
	Message string
	// Value is the measured value of the last trigger evaluated, for logs.
	Value float64
}

// Evaluator evaluates an ElastiService's triggers.
type Evaluator struct {
	// Secrets reads the Secrets named by authSecretRef. It should be a live
	// reader: the operator keeps no Secret cache.
	Secrets client.Reader
	// DefaultServerAddress is used when a trigger has no serverAddress.
	DefaultServerAddress string
	// Timeout bounds each query.
	Timeout time.Duration
	// Transport carries the queries; nil means http.DefaultTransport.
	Transport http.RoundTripper
}

// Evaluate runs every trigger. One unhealthy trigger makes the whole result
// unhealthy; otherwise one active trigger makes it active.
func (e *Evaluator) Evaluate(ctx context.Context, es *elastiv1alpha1.ElastiService) Result {
	if len(es.Spec.Triggers) == 0 {
		return Result{State: StateActive, Message: "no triggers: the target never sleeps on its own"}
	}
	var active *Result
	var last Result
	for i := range es.Spec.Triggers {
		r := e.evaluateOne(ctx, es, i)
		switch r.State {
		case StateUnhealthy:
			r.Message = fmt.Sprintf("trigger %d: %s", i, r.Message)
			return r
		case StateActive:
			if active == nil {
				r.Message = fmt.Sprintf("trigger %d: %s", i, r.Message)
				active = &r
			}
		}
		last = r
	}
	if active != nil {
		return *active
	}
	return Result{State: StateIdle, Message: fmt.Sprintf("all %d triggers report idle", len(es.Spec.Triggers)), Value: last.Value}
}

func (e *Evaluator) evaluateOne(ctx context.Context, es *elastiv1alpha1.ElastiService, i int) Result {
	t := es.Spec.Triggers[i]
	if t.Type != elastiv1alpha1.TriggerTypePrometheus {
		return unhealthy(ReasonUnsupportedTrigger, fmt.Sprintf("trigger type %q is not supported", t.Type))
	}
	md := t.Metadata
	threshold := 0.0
	if md.Threshold != nil {
		v, err := md.Threshold.Float64()
		if err != nil {
			return unhealthy(ReasonInvalidThreshold, err.Error())
		}
		threshold = v
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
	rt := e.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	timeout := e.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
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
	if v < threshold {
		return Result{State: StateIdle, Message: fmt.Sprintf("below the threshold %s", thresholdText(md.Threshold)), Value: v}
	}
	return Result{State: StateActive, Message: fmt.Sprintf("at or above the threshold %s", thresholdText(md.Threshold)), Value: v}
}

// bearer reads the token from the named Secret key.
func (e *Evaluator) bearer(ctx context.Context, namespace string, ref *elastiv1alpha1.SecretKeySelector) (string, *Result) {
	if e.Secrets == nil {
		r := unhealthy(ReasonAuthSecretUnavailable, "the operator has no Secret reader")
		return "", &r
	}
	s := &corev1.Secret{}
	if err := e.Secrets.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ref.Name}, s); err != nil {
		msg := fmt.Sprintf("read Secret %s/%s: %v", namespace, ref.Name, err)
		if apierrors.IsForbidden(err) {
			msg = fmt.Sprintf("the operator may not read Secret %s/%s: grant it with a Role naming that Secret (see docs/operator.md)", namespace, ref.Name)
		}
		r := unhealthy(ReasonAuthSecretUnavailable, msg)
		return "", &r
	}
	v, ok := s.Data[ref.Key]
	if !ok {
		r := unhealthy(ReasonAuthSecretUnavailable, fmt.Sprintf("Secret %s/%s has no key %q", namespace, ref.Name, ref.Key))
		return "", &r
	}
	return strings.TrimSpace(string(v)), nil
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

func thresholdText(t *elastiv1alpha1.Threshold) string {
	if t == nil {
		return "0"
	}
	return string(*t)
}

func unhealthy(reason, msg string) Result {
	return Result{State: StateUnhealthy, Reason: reason, Message: msg}
}
