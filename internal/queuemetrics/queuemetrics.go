// Package queuemetrics gives the operator's client-go work queues the
// workqueue_* metrics that controller-runtime serves on its registry,
// whichever metrics provider client-go took first.
//
// client-go keeps one global provider and takes the first one set. Both
// controller-runtime and k8s.io/component-base set one at init, and once
// the operator links k8s.io/apiserver (the metrics API) component-base's
// comes first: queues built with client-go's defaults then report to
// component-base's registry, not to the operator's /metrics. Queues built
// with Provider in their config report where docs/operator.md says.
package queuemetrics

import (
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Provider returns a provider whose metrics are controller-runtime's own
// workqueue_* collectors on its registry, labelled name and controller
// with the queue's name, as controller-runtime's queues are.
func Provider() (workqueue.MetricsProvider, error) {
	once.Do(func() { provider, providerErr = find(ctrlmetrics.Registry) })
	return provider, providerErr
}

var (
	once        sync.Once
	provider    workqueue.MetricsProvider
	providerErr error
)

// The collectors' descriptions must be those controller-runtime registers
// (name, help and labels), or the registry refuses them as inconsistent;
// TestProviderReportsOnControllerRuntimesRegistry notices a change.
const sub = "workqueue"

var labels = []string{"name", "controller"}

// find takes each collector controller-runtime registered on reg (the
// registry answers a second registration of the same description with the
// one it has), or registers its own when there is none.
func find(reg prometheus.Registerer) (workqueue.MetricsProvider, error) {
	var p queueMetrics
	var errs []error
	p.depth = existing(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: sub, Name: "depth",
		Help: "Current depth of workqueue by workqueue and priority"}, append(labels, "priority")), &errs)
	p.adds = existing(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: sub, Name: "adds_total",
		Help: "Total number of adds handled by workqueue"}, labels), &errs)
	p.latency = existing(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: sub, Name: "queue_duration_seconds",
		Help: "How long in seconds an item stays in workqueue before being requested", Buckets: prometheus.ExponentialBuckets(10e-9, 10, 12)}, labels), &errs)
	p.work = existing(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: sub, Name: "work_duration_seconds",
		Help: "How long in seconds processing an item from workqueue takes.", Buckets: prometheus.ExponentialBuckets(10e-9, 10, 12)}, labels), &errs)
	p.unfinished = existing(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: sub, Name: "unfinished_work_seconds",
		Help: "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. " +
			"Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases."}, labels), &errs)
	p.longest = existing(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: sub, Name: "longest_running_processor_seconds",
		Help: "How many seconds has the longest running processor for workqueue been running."}, labels), &errs)
	p.retries = existing(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: sub, Name: "retries_total",
		Help: "Total number of items added to the workqueue with a non-zero delay (rate-limited requeues, explicit RequeueAfter or AddAfter calls)"}, labels), &errs)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("workqueue metrics on controller-runtime's registry: %w", err)
	}
	return p, nil
}

// existing registers c on reg and returns it, or returns the collector of
// the same description reg already has.
func existing[C prometheus.Collector](reg prometheus.Registerer, c C, errs *[]error) C {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
		if have, ok := are.ExistingCollector.(C); ok {
			return have
		}
		*errs = append(*errs, fmt.Errorf("the registered collector is a %T, not a %T", are.ExistingCollector, c))
		return c
	}
	*errs = append(*errs, err)
	return c
}

type queueMetrics struct {
	depth, unfinished, longest *prometheus.GaugeVec
	adds, retries              *prometheus.CounterVec
	latency, work              *prometheus.HistogramVec
}

func (p queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return p.depth.WithLabelValues(name, name, "")
}

func (p queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return p.adds.WithLabelValues(name, name)
}

func (p queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return p.latency.WithLabelValues(name, name)
}

func (p queueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return p.work.WithLabelValues(name, name)
}

func (p queueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.unfinished.WithLabelValues(name, name)
}

func (p queueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.longest.WithLabelValues(name, name)
}

func (p queueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return p.retries.WithLabelValues(name, name)
}

// Has checks that g reports workqueue_depth of depth for the queue called
// name, as Provider's queues do; for tests.
func Has(g prometheus.Gatherer, name string, depth float64) error {
	families, err := g.Gather()
	if err != nil {
		return err
	}
	for _, f := range families {
		if f.GetName() != "workqueue_depth" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == name {
					if v := m.GetGauge().GetValue(); v != depth {
						return fmt.Errorf("workqueue_depth{name=%q} is %v, want %v", name, v, depth)
					}
					return nil
				}
			}
		}
	}
	return fmt.Errorf("no workqueue_depth{name=%q} on the registry", name)
}
