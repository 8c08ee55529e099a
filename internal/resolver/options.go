package resolver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"elasti.dev/elasti/internal/contract"
)

// Options configure a Resolver. Zero values take the defaults below, except
// Activator (nil: no activation calls), Synced (nil: the cache counts as synced)
// and Log (nil sink: discard).
type Options struct {
	// ListenAddress is the IP the resolver ports bind to; empty means all.
	ListenAddress string
	// PortRangeStart and PortRangeEnd bound the pre-opened ports, inclusive
	// (checked by contract.NewPortRange).
	PortRangeStart int
	PortRangeEnd   int

	// UnmappedWait is how long a connection on a port without a mapping
	// waits for one before it is refused.
	UnmappedWait time.Duration
	// HoldTimeout and MaxHeld apply where the ElastiService's spec.proxy
	// does not set them.
	HoldTimeout time.Duration
	MaxHeld     int
	// RetryAfter is sent with 503 when a hold queue is full.
	RetryAfter time.Duration
	// ReadAheadBytes bounds what the resolver reads ahead from each held
	// request body (HTTP/1.x) or connection (TCP) while it waits. Reading
	// is how a client that leaves is noticed; a client that sends more
	// than this while held is answered 503 (TCP: closed) instead of being
	// held on unwatched.
	ReadAheadBytes int
	// ReleaseConcurrency bounds, per ElastiService on this replica, the
	// requests a hold has released that are on their way to the woken
	// target and have no response headers yet; the rest of a burst waits
	// its turn (see releasePacer). ReleaseTurn is the longest one request
	// keeps its turn.
	ReleaseConcurrency int
	ReleaseTurn        time.Duration
	// Parking says where a held bodiless HTTP/1.x request waits (park.go).
	// The zero value, ParkOnArrival, is the resolver's; the others exist
	// to compare.
	Parking Parking

	// DialTimeout bounds one TCP connect to an endpoint.
	DialTimeout time.Duration
	// DialContext connects to a pod; nil means a plain net.Dialer. Tests
	// inject one to stand in for pod networking.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// ReadHeaderTimeout, IdleTimeout and MaxHeaderBytes harden the L7
	// server. MaxHeaderBytes defaults to net/http's own default, so that
	// what a pod accepts in serve mode also passes in proxy mode.
	ReadHeaderTimeout time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
	// MaxConcurrentStreams bounds HTTP/2 streams per client connection.
	MaxConcurrentStreams int
	// ClientKeepAlive is the TCP keepalive period of accepted client
	// connections: the idle time before the first probe and the time
	// between probes. A held connection sends nothing for as long as a cold
	// start lasts, and NATs and cloud load balancers drop connections idle
	// for a few minutes (350s on AWS NLB and NAT gateways, 4m on Azure);
	// the probes keep them alive. Negative turns keepalives off.
	ClientKeepAlive time.Duration

	// Activator wakes targets. ActivationTimeout bounds one call; failed
	// calls are retried from ActivationBackoff doubling to
	// ActivationMaxBackoff; a successful call is repeated every
	// ActivationRefresh while requests are still held.
	Activator            Activator
	ActivationTimeout    time.Duration
	ActivationBackoff    time.Duration
	ActivationMaxBackoff time.Duration
	ActivationRefresh    time.Duration
	// TrafficReportInterval throttles the activation calls that report
	// traffic forwarded at once to a ready target (see trafficReporter):
	// per ElastiService, at most one starts per interval, and one is in
	// flight at a time. The first report is never delayed by it.
	TrafficReportInterval time.Duration
	// ReleasedPortLinger is how long a resolver port keeps serving its
	// Target after the last ElastiService claiming it let go, by going back
	// to serve mode, being deleted or dropping the port (see PortMap):
	// routing takes a moment to follow the proxy slice's removal.
	ReleasedPortLinger time.Duration

	// ReturnMemoryAfter and ReturnMemoryAtPeak: once at least
	// ReturnMemoryAtPeak requests and connections were held at once on this
	// replica, and the hold queue has then been empty for
	// ReturnMemoryAfter, the resolver returns its free heap to the OS
	// (memoryReturner).
	ReturnMemoryAfter  time.Duration
	ReturnMemoryAtPeak int

	// Synced reports whether the ElastiService cache has synced (the one
	// Watch returns); the resolver is not ready before.
	Synced func() bool

	Clock   clock.Clock
	Log     logr.Logger
	Metrics *Metrics
}

// Default option values.
const (
	DefaultUnmappedWait         = 2 * time.Second
	DefaultHoldTimeout          = contract.DefaultHoldTimeout
	DefaultMaxHeld              = 1000
	DefaultRetryAfter           = 5 * time.Second
	DefaultReadAheadBytes       = 64 << 10
	DefaultReleaseConcurrency   = 64
	DefaultReleaseTurn          = time.Second
	DefaultDialTimeout          = 3 * time.Second
	DefaultReadHeaderTimeout    = 10 * time.Second
	DefaultIdleTimeout          = 90 * time.Second
	DefaultMaxHeaderBytes       = http.DefaultMaxHeaderBytes
	DefaultMaxConcurrentStreams = 1000
	// DefaultClientKeepAlive is well under the shortest common NAT and
	// load-balancer idle timeouts.
	DefaultClientKeepAlive      = 30 * time.Second
	DefaultActivationTimeout    = 15 * time.Second
	DefaultActivationBackoff    = 250 * time.Millisecond
	DefaultActivationMaxBackoff = 10 * time.Second
	DefaultActivationRefresh    = 30 * time.Second
	// DefaultTrafficReportInterval keeps a busy Service at one report per
	// second per resolver replica, well inside the operator's default 2s
	// grace period.
	DefaultTrafficReportInterval = time.Second
	// DefaultReleasedPortLinger covers kube-proxy's and ingresses' usual
	// convergence with a wide margin, and stays well below the operator's
	// default port quarantine (2m), so a lingering port is never reused.
	DefaultReleasedPortLinger = 30 * time.Second
	// DefaultReturnMemoryAfter lets the requests a drain released finish
	// first; DefaultReturnMemoryAtPeak is a peak of about 7.5 MiB of held
	// requests, below which the runtime's own pace is good enough.
	DefaultReturnMemoryAfter  = 10 * time.Second
	DefaultReturnMemoryAtPeak = 256
)

func (o *Options) setDefaults() {
	if o.PortRangeStart == 0 && o.PortRangeEnd == 0 {
		o.PortRangeStart, o.PortRangeEnd = contract.DefaultPortRangeStart, contract.DefaultPortRangeEnd
	}
	setDuration(&o.UnmappedWait, DefaultUnmappedWait)
	setDuration(&o.HoldTimeout, DefaultHoldTimeout)
	if o.MaxHeld <= 0 {
		o.MaxHeld = DefaultMaxHeld
	}
	setDuration(&o.RetryAfter, DefaultRetryAfter)
	if o.ReadAheadBytes <= 0 {
		o.ReadAheadBytes = DefaultReadAheadBytes
	}
	if o.ReleaseConcurrency <= 0 {
		o.ReleaseConcurrency = DefaultReleaseConcurrency
	}
	setDuration(&o.ReleaseTurn, DefaultReleaseTurn)
	setDuration(&o.DialTimeout, DefaultDialTimeout)
	setDuration(&o.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	if o.ClientKeepAlive == 0 {
		o.ClientKeepAlive = DefaultClientKeepAlive
	}
	setDuration(&o.IdleTimeout, DefaultIdleTimeout)
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if o.MaxConcurrentStreams <= 0 {
		o.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	setDuration(&o.ActivationTimeout, DefaultActivationTimeout)
	setDuration(&o.ActivationBackoff, DefaultActivationBackoff)
	setDuration(&o.ActivationMaxBackoff, DefaultActivationMaxBackoff)
	setDuration(&o.ActivationRefresh, DefaultActivationRefresh)
	setDuration(&o.TrafficReportInterval, DefaultTrafficReportInterval)
	setDuration(&o.ReleasedPortLinger, DefaultReleasedPortLinger)
	setDuration(&o.ReturnMemoryAfter, DefaultReturnMemoryAfter)
	if o.ReturnMemoryAtPeak <= 0 {
		o.ReturnMemoryAtPeak = DefaultReturnMemoryAtPeak
	}
	if o.DialContext == nil {
		o.DialContext = (&net.Dialer{}).DialContext
	}
	if o.Synced == nil {
		o.Synced = func() bool { return true }
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
}

func setDuration(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

func (o *Options) validate() error {
	var errs []error
	if _, err := contract.NewPortRange(o.PortRangeStart, o.PortRangeEnd); err != nil {
		errs = append(errs, err)
	}
	if o.ActivationBackoff > o.ActivationMaxBackoff {
		errs = append(errs, fmt.Errorf("activation backoff %s exceeds its maximum %s", o.ActivationBackoff, o.ActivationMaxBackoff))
	}
	return errors.Join(errs...)
}
