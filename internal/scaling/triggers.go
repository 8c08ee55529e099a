package scaling

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"k8s.io/utils/clock"
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

// Reasons for an unhealthy trigger of any type, used as condition reasons.
// Each trigger type adds its own beside its evaluation.
const (
	ReasonInvalidThreshold      = "InvalidThreshold"
	ReasonAuthSecretUnavailable = "AuthSecretUnavailable"
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
	// Rate is the request rate of the ElastiService's first podMetrics
	// trigger over the last RateWindow (the metrics API's
	// elasti_requests_per_second in serve mode); nil when no podMetrics
	// trigger measured one.
	Rate *Rate
}

// RateWindow is the span Result.Rate is measured over: short beside a
// cooldown period, so that an autoscaler reading it follows load within
// one or two polling intervals.
const RateWindow = 30 * time.Second

// MeasuresRate reports whether es has a podMetrics trigger, the one kind
// whose evaluation gives Result.Rate.
func MeasuresRate(es *elastiv1alpha1.ElastiService) bool {
	return slices.ContainsFunc(es.Spec.Triggers, func(t elastiv1alpha1.ScaleTrigger) bool {
		return t.Type == elastiv1alpha1.TriggerTypePodMetrics
	})
}

// Rate is a counter's rate over a recent span.
type Rate struct {
	PerSecond float64
	// Span is the time the rate was measured over: RateWindow or a little
	// more (the samples' spacing), or less while the history is younger.
	Span time.Duration
	// At is when it was measured.
	At time.Time
}

// Evaluator evaluates an ElastiService's triggers. It keeps the history of
// podMetrics triggers in memory: use one Evaluator for the operator's
// lifetime, through a pointer.
type Evaluator struct {
	// Secrets reads the Secrets named by authSecretRef and
	// basicAuthSecretRef. It should be a live reader: the operator keeps no
	// Secret cache.
	Secrets client.Reader
	// Endpoints lists the EndpointSlices of the Services whose pods
	// podMetrics triggers scrape. It must see every endpoint: the
	// operator's cache keeps only one of each slice's (trimEndpointSlice,
	// internal/controller/watches), so the operator passes a live reader.
	Endpoints client.Reader
	// DefaultServerAddress is used when a prometheus trigger has no
	// serverAddress.
	DefaultServerAddress string
	// Servers is the cluster admin's list of servers prometheus triggers
	// may query (--trigger-servers); nil allows any (tests of other
	// behaviour).
	Servers *ServerPolicy
	// Timeout bounds each query, and each pod's scrape.
	Timeout time.Duration
	// Transport carries the queries and scrapes; nil means
	// http.DefaultTransport.
	Transport http.RoundTripper
	// Kubelets reads the nodes' Summary API for network triggers.
	Kubelets SummaryReader
	// Pods lists the pods of network triggers' targets, for their probes.
	Pods client.Reader
	// NetworkThreshold is a network trigger's threshold when it names none;
	// 0 means DefaultNetworkThreshold.
	NetworkThreshold float64
	// Clock times podMetrics and network samples; nil means the real
	// clock.
	Clock clock.PassiveClock

	history counterHistories
	network networkPods
}

// evaluateFunc evaluates one trigger of one type. Evaluate prefixes the
// message of an unhealthy or active result with the trigger's index.
type evaluateFunc func(ctx context.Context, es *elastiv1alpha1.ElastiService, t elastiv1alpha1.ScaleTrigger) Result

// byType is the seam for trigger types: each type maps to the function that
// evaluates one trigger of it, in a file of its own (prometheus.go,
// podmetrics.go, network.go). A new type is one more entry here and in the CRD's enum
// of TriggerType.
func (e *Evaluator) byType() map[elastiv1alpha1.TriggerType]evaluateFunc {
	return map[elastiv1alpha1.TriggerType]evaluateFunc{
		elastiv1alpha1.TriggerTypePrometheus: e.evaluatePrometheus,
		elastiv1alpha1.TriggerTypePodMetrics: e.evaluatePodMetrics,
		elastiv1alpha1.TriggerTypeNetwork:    e.evaluateNetwork,
	}
}

// Evaluate runs every trigger. One unhealthy trigger makes the whole result
// unhealthy; otherwise one active trigger makes it active.
func (e *Evaluator) Evaluate(ctx context.Context, es *elastiv1alpha1.ElastiService) Result {
	if len(es.Spec.Triggers) == 0 {
		return Result{State: StateActive, Message: "no triggers: the target never sleeps on its own"}
	}
	var active *Result
	var last Result
	var rate *Rate
	for i := range es.Spec.Triggers {
		r := e.evaluateOne(ctx, es, i)
		if rate == nil {
			rate = r.Rate
		}
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
		active.Rate = rate
		return *active
	}
	return Result{State: StateIdle, Message: fmt.Sprintf("all %d triggers report idle", len(es.Spec.Triggers)), Value: last.Value, Rate: rate}
}

func (e *Evaluator) evaluateOne(ctx context.Context, es *elastiv1alpha1.ElastiService, i int) Result {
	t := es.Spec.Triggers[i]
	evaluate, ok := e.byType()[t.Type]
	if !ok {
		return unhealthy(ReasonUnsupportedTrigger, fmt.Sprintf("trigger type %q is not supported", t.Type))
	}
	return evaluate(ctx, es, t)
}

func (e *Evaluator) timeout() time.Duration {
	if e.Timeout <= 0 {
		return 10 * time.Second
	}
	return e.Timeout
}

func (e *Evaluator) transport() http.RoundTripper {
	if e.Transport == nil {
		return http.DefaultTransport
	}
	return e.Transport
}

func (e *Evaluator) clock() clock.PassiveClock {
	if e.Clock == nil {
		return clock.RealClock{}
	}
	return e.Clock
}

// threshold reads a trigger's threshold; a missing one is 0.
func threshold(t *elastiv1alpha1.Threshold) (float64, *Result) {
	if t == nil {
		return 0, nil
	}
	v, err := t.Float64()
	if err != nil {
		r := unhealthy(ReasonInvalidThreshold, err.Error())
		return 0, &r
	}
	return v, nil
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
