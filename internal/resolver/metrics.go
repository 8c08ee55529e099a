package resolver

import (
	"errors"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/resolver/handler"
	"elasti.dev/elasti/internal/resolver/hold"
	"elasti.dev/elasti/internal/resolver/upstream"
)

// Rejection reasons, the values of the reason label on
// elasti_resolver_rejected_total.
const (
	ReasonQueueFull    = "queue_full"
	ReasonUnmappedPort = "unmapped_port"
	ReasonDialFailed   = "dial_failed"
	ReasonDraining     = "draining"
	ReasonBadRequest   = "bad_request"
	// ReasonResolverFull: the resolver held its --max-held-total for all
	// ElastiServices together.
	ReasonResolverFull = "resolver_full"
	// ReasonMisdirected: the request's Host named another Service than
	// the one its resolver port leads to; answered 421.
	ReasonMisdirected = "misdirected"
)

// Fallback reasons, the values of the reason label on
// elasti_resolver_fallback_total.
const (
	// FallbackDeadline: the request's own hold lasted spec.proxy.fallback.after.
	FallbackDeadline = "deadline"
	// FallbackActive: the ElastiService was in fallback already when the
	// request arrived or while it was held: an earlier request's deadline
	// passed since the target was last ready, or the operator's
	// FallbackActive condition says so (the wake failed).
	FallbackActive = "active"
)

// Activation results, the values of the result label on
// elasti_resolver_activations_total.
const (
	ActivationOK           = "ok"
	ActivationUnauthorized = "unauthorized"
	ActivationNotFound     = "not_found"
	ActivationError        = "error"
)

// Metrics are the resolver's Prometheus metrics. Labels are bounded: the
// ElastiService's namespace and name, and a reason or result from the
// constants above; never a URL, a Host header or a client address. The
// series of an ElastiService are deleted once it is gone (forget).
type Metrics struct {
	Held         *prometheus.GaugeVec
	HoldDuration *prometheus.HistogramVec
	// ColdStart is the hold of the requests that a woken target then
	// served: the cold start a client lived, up to the first byte
	// forwarded (status.ledger in the operator has its phases).
	ColdStart *prometheus.HistogramVec
	// ForwardLatency is how long a forwarded HTTP request took from the
	// start of forwarding, after any hold, to the pod's response headers:
	// the pod's answer time with the resolver's own work on the way.
	ForwardLatency *prometheus.HistogramVec
	Forwarded      *prometheus.CounterVec
	Rejected       *prometheus.CounterVec
	TimedOut       *prometheus.CounterVec
	Activations    *prometheus.CounterVec
	// StaticResponses counts the answers of spec.proxy.staticResponses
	// rules; its rule label is bounded by the API (16 rules per
	// ElastiService).
	StaticResponses *prometheus.CounterVec
	// Fallback counts requests and connections sent to the
	// spec.proxy.fallback Service, by reason (the Fallback* constants).
	Fallback *prometheus.CounterVec
	// WakingPages counts the waking pages sent (spec.proxy.wakingPage), by
	// the wake phase they showed: one of the five of the API.
	WakingPages *prometheus.CounterVec
	Listeners   prometheus.Gauge
	// MemoryReturns counts the returns of free heap to the OS after a
	// large hold drained (memoryReturner).
	MemoryReturns prometheus.Counter
}

var esLabels = []string{"namespace", "elastiservice"}

// NewMetrics creates the metrics and registers them with reg (skipped when
// reg is nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Held: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "elasti_resolver_held_requests",
			Help: "Requests and connections currently held waiting for a ready endpoint.",
		}, esLabels),
		HoldDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "elasti_resolver_hold_duration_seconds",
			Help:    "How long requests and connections were held before being forwarded, timed out or abandoned.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2.5, 12), // 10ms .. ~10min
		}, esLabels),
		ColdStart: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "elasti_resolver_cold_start_seconds",
			Help:    "How long requests and connections were held before the resolver forwarded them to a ready endpoint of the woken target: the cold start as clients live it, up to the first byte forwarded.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2.5, 12), // 10ms .. ~10min
		}, esLabels),
		ForwardLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "elasti_resolver_forward_latency_seconds",
			Help: "How long forwarded HTTP requests took from the start of forwarding, after any hold, to the pod's response headers.",
			// 0.25 ms .. 10 s: a forward to a warm pod on the same node
			// takes well under a millisecond.
			Buckets: []float64{0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10},
		}, esLabels),
		Forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "elasti_resolver_forwarded_total",
			Help: "Requests and connections forwarded to a ready endpoint.",
		}, esLabels),
		Rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "elasti_resolver_rejected_total",
			Help: "Requests and connections refused, by reason.",
		}, append(esLabels, "reason")),
		TimedOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "elasti_resolver_timed_out_total",
			Help: "Requests and connections whose hold timeout passed before an endpoint was ready.",
		}, esLabels),
		Activations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "elasti_resolver_activations_total",
			Help: "Activation calls to the operator, by result.",
		}, append(esLabels, "result")),
		StaticResponses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "elasti_resolver_static_responses_total",
			Help: "Requests answered by a static response rule, without waking the target or counting as traffic.",
		}, append(esLabels, "rule")),
		Fallback: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "elasti_resolver_fallback_total",
			Help: "Requests and connections sent to the spec.proxy.fallback Service instead of the target, by reason.",
		}, append(esLabels, "reason")),
		WakingPages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "elasti_resolver_waking_pages_total",
			Help: "Browser page loads answered with the waking page while the target woke, by the wake phase shown; each also wakes the target.",
		}, append(esLabels, "phase")),
		Listeners: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "elasti_resolver_open_listeners",
			Help: "Pre-opened resolver ports currently listening.",
		}),
		MemoryReturns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "elasti_resolver_memory_returns_total",
			Help: "Times the resolver returned its free heap to the OS after a large hold drained.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.Held, m.HoldDuration, m.ColdStart, m.ForwardLatency, m.Forwarded, m.Rejected, m.TimedOut, m.Activations, m.StaticResponses, m.Fallback, m.WakingPages, m.Listeners, m.MemoryReturns)
	}
	return m
}

// forget deletes every series of an ElastiService that is gone, so that
// the series do not pile up as ElastiServices come and go. The PortMap calls
// it once the ElastiService is deleted and none of its ports lingers.
func (m *Metrics) forget(es types.NamespacedName) {
	labels := prometheus.Labels{"namespace": es.Namespace, "elastiservice": es.Name}
	for _, vec := range []interface{ DeletePartialMatch(prometheus.Labels) int }{
		m.Held, m.HoldDuration, m.ColdStart, m.ForwardLatency, m.Forwarded, m.Rejected, m.TimedOut, m.Activations, m.StaticResponses, m.Fallback, m.WakingPages,
	} {
		vec.DeletePartialMatch(labels)
	}
}

func (m *Metrics) reject(es types.NamespacedName, reason string) {
	m.Rejected.WithLabelValues(es.Namespace, es.Name, reason).Inc()
}

// statusCoder is implemented by activation errors that carry the operator's
// HTTP status, so results can be told apart without importing the client.
type statusCoder interface{ HTTPStatus() int }

func activationResult(err error) string {
	if err == nil {
		return ActivationOK
	}
	var sc statusCoder
	if errors.As(err, &sc) {
		switch sc.HTTPStatus() {
		case http.StatusUnauthorized, http.StatusForbidden:
			return ActivationUnauthorized
		case http.StatusNotFound:
			return ActivationNotFound
		}
	}
	return ActivationError
}

// recorder is how the parts count into Metrics: it implements the Recorder
// of the hold, upstream and handler packages, and picks the label values
// (reasons, results) here, next to their definitions.
type recorder struct{ m *Metrics }

var (
	_ hold.Recorder     = recorder{}
	_ upstream.Recorder = recorder{}
	_ handler.Recorder  = recorder{}
)

func (r recorder) Held(es types.NamespacedName) (done func()) {
	held := r.m.Held.WithLabelValues(es.Namespace, es.Name)
	held.Inc()
	return held.Dec
}

func (r recorder) HoldEnded(es types.NamespacedName, d time.Duration, coldStart bool) {
	r.m.HoldDuration.WithLabelValues(es.Namespace, es.Name).Observe(d.Seconds())
	if coldStart {
		r.m.ColdStart.WithLabelValues(es.Namespace, es.Name).Observe(d.Seconds())
	}
}

func (r recorder) TimedOut(es types.NamespacedName) {
	r.m.TimedOut.WithLabelValues(es.Namespace, es.Name).Inc()
}

func (r recorder) Refused(es types.NamespacedName, err error) {
	switch {
	case errors.Is(err, hold.ErrQueueFull):
		r.m.reject(es, ReasonQueueFull)
	case errors.Is(err, hold.ErrResolverFull):
		r.m.reject(es, ReasonResolverFull)
	}
}

func (r recorder) Fallback(es types.NamespacedName, deadline bool) {
	reason := FallbackActive
	if deadline {
		reason = FallbackDeadline
	}
	r.m.Fallback.WithLabelValues(es.Namespace, es.Name, reason).Inc()
}

func (r recorder) Activation(es types.NamespacedName, err error) string {
	result := activationResult(err)
	r.m.Activations.WithLabelValues(es.Namespace, es.Name, result).Inc()
	return result
}

func (r recorder) Forwarded(es types.NamespacedName) {
	r.m.Forwarded.WithLabelValues(es.Namespace, es.Name).Inc()
}

func (r recorder) ForwardLatency(es types.NamespacedName, d time.Duration) {
	r.m.ForwardLatency.WithLabelValues(es.Namespace, es.Name).Observe(d.Seconds())
}

func (r recorder) DialFailed(es types.NamespacedName) { r.m.reject(es, ReasonDialFailed) }

func (r recorder) Draining(es types.NamespacedName) { r.m.reject(es, ReasonDraining) }

func (r recorder) Unmapped(es types.NamespacedName) { r.m.reject(es, ReasonUnmappedPort) }

func (r recorder) Misdirected(es types.NamespacedName) { r.m.reject(es, ReasonMisdirected) }

func (r recorder) BadRequest(es types.NamespacedName) { r.m.reject(es, ReasonBadRequest) }

func (r recorder) Static(es types.NamespacedName, rule string) {
	r.m.StaticResponses.WithLabelValues(es.Namespace, es.Name, rule).Inc()
}

func (r recorder) WakingPage(es types.NamespacedName, phase elastiv1alpha1.WakePhase) {
	r.m.WakingPages.WithLabelValues(es.Namespace, es.Name, string(phase)).Inc()
}
