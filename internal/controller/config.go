package controller

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"elasti.dev/elasti/internal/contract"
)

// Config is the reconciler's configuration; cmd/elasti-operator fills it from
// flags.
type Config struct {
	// ResolverNamespace is where the resolver pods run.
	ResolverNamespace string
	// PortRangeStart and PortRangeEnd bound the resolver ports, inclusive
	// (checked by contract.NewPortRange).
	PortRangeStart, PortRangeEnd int32
	// PortQuarantine is how long a freed resolver port stays out of use
	// before another ElastiService may get it, so that every kube-proxy,
	// ingress and mesh has dropped the proxy slice that still routed the
	// old Service's traffic to it. Zero turns the quarantine off.
	PortQuarantine time.Duration
	// QuarantineRecord is the ConfigMap (in the operator's namespace) that
	// keeps the quarantine across restarts and leader changes; the zero
	// value keeps it in memory only.
	QuarantineRecord types.NamespacedName
	// GracePeriod is how long the proxy slice is in place before the target
	// is scaled to zero, so that data planes converge.
	GracePeriod time.Duration
	// PollingInterval is how often an awake target's triggers are evaluated.
	PollingInterval time.Duration
	// MeasureRate: the metrics API serves elasti_requests_per_second, which
	// in serve mode is the podMetrics trigger's rate (docs/hpa.md). The
	// triggers of an awake target with such a trigger are then evaluated
	// every polling interval even while a sleep gate holds it awake (a
	// cooldown, keep-awake, outside its enabledPeriod), for the rate alone:
	// no sleep is decided on them.
	MeasureRate bool
	// TriggerWorkers is how many ElastiServices' triggers are evaluated at
	// once, off the reconcile workers (package triggerpoll).
	TriggerWorkers int
	// TriggerEvaluationTimeout bounds one evaluation of all of an
	// ElastiService's triggers.
	TriggerEvaluationTimeout time.Duration
	// WatchNamespaces limits the ElastiServices (and their Services, slices
	// and targets) that are watched. Empty means all namespaces. Port
	// allocation is collision-free among the watched ElastiServices.
	WatchNamespaces []string
	// MaxConcurrentReconciles is the number of parallel reconciles.
	MaxConcurrentReconciles int
	// WakeWorkers is how many wakes of different ElastiServices are
	// performed at once, each on its own reconcile beside the work queue
	// (docs/architecture.md, "A wake on its own path").
	WakeWorkers int
	// SliceUpdateQPS is the rate of the client that points the proxy
	// slices at the resolvers when the resolver pods change (one write per
	// slice), beside the reconciles' client.
	SliceUpdateQPS float64
	// WakeTimeout bounds how long an activation call waits for the wake.
	WakeTimeout time.Duration
	// Clock is injected so tests control time. Nil means the real clock.
	Clock clock.Clock
	// SkipNameValidation lets tests run several managers in one process.
	SkipNameValidation bool
}

// DefaultConfig returns the defaults the flags also use.
func DefaultConfig() Config {
	return Config{
		ResolverNamespace:        "elasti-system",
		PortRangeStart:           contract.DefaultPortRangeStart,
		PortRangeEnd:             contract.DefaultPortRangeEnd,
		PortQuarantine:           2 * time.Minute,
		GracePeriod:              2 * time.Second,
		PollingInterval:          30 * time.Second,
		TriggerWorkers:           16,
		TriggerEvaluationTimeout: 2 * time.Minute,
		MaxConcurrentReconciles:  4,
		WakeWorkers:              16,
		SliceUpdateQPS:           200,
		WakeTimeout:              10 * time.Second,
	}
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	if _, err := contract.NewPortRange(int(c.PortRangeStart), int(c.PortRangeEnd)); err != nil {
		return fmt.Errorf("resolver %w", err)
	}
	switch {
	case c.ResolverNamespace == "":
		return fmt.Errorf("resolver namespace must be set")
	case c.PortQuarantine < 0:
		return fmt.Errorf("port quarantine %s must not be negative", c.PortQuarantine)
	case c.GracePeriod < 0:
		return fmt.Errorf("grace period %s must not be negative", c.GracePeriod)
	case c.PollingInterval <= 0:
		return fmt.Errorf("polling interval %s must be positive", c.PollingInterval)
	case c.TriggerWorkers < 1:
		return fmt.Errorf("trigger workers %d must be at least 1", c.TriggerWorkers)
	case c.TriggerEvaluationTimeout <= 0:
		return fmt.Errorf("trigger evaluation timeout %s must be positive", c.TriggerEvaluationTimeout)
	case c.MaxConcurrentReconciles < 1:
		return fmt.Errorf("max concurrent reconciles %d must be at least 1", c.MaxConcurrentReconciles)
	case c.WakeWorkers < 1:
		return fmt.Errorf("wake workers %d must be at least 1", c.WakeWorkers)
	case c.SliceUpdateQPS <= 0:
		return fmt.Errorf("slice update QPS %g must be positive", c.SliceUpdateQPS)
	case c.WakeTimeout <= 0:
		return fmt.Errorf("wake timeout %s must be positive", c.WakeTimeout)
	}
	return nil
}
