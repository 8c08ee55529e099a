package resolver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/resolver/hold"
	"elasti.dev/elasti/internal/resolver/park"
)

// Options configure a Resolver, one nested struct per part. Zero values
// take the defaults below, except Activation.Activator (nil: no activation
// calls), Synced (nil: the cache counts as synced) and Log (nil sink:
// discard).
type Options struct {
	Ports      PortOptions
	Hold       HoldOptions
	HTTP       HTTPOptions
	Upstream   UpstreamOptions
	Activation ActivationOptions
	Memory     MemoryOptions

	// Synced reports whether the ElastiService cache has synced (the one
	// ports.Watch returns); the resolver is not ready before.
	Synced func() bool

	Clock   clock.Clock
	Log     logr.Logger
	Metrics *Metrics
}

// PortOptions configure the pre-opened ports and the port map.
type PortOptions struct {
	// ListenAddress is the IP the resolver ports bind to; empty means all.
	ListenAddress string
	// PortRangeStart and PortRangeEnd bound the pre-opened ports, inclusive
	// (checked by contract.NewPortRange).
	PortRangeStart int
	PortRangeEnd   int
	// UnmappedWait is how long a connection on a port without a mapping
	// waits for one before it is refused.
	UnmappedWait time.Duration
	// ClientKeepAlive is the TCP keepalive period of accepted client
	// connections: the idle time before the first probe and the time
	// between probes. A held connection sends nothing for as long as a cold
	// start lasts, and NATs and cloud load balancers drop connections idle
	// for a few minutes (350s on AWS NLB and NAT gateways, 4m on Azure);
	// the probes keep them alive. Negative turns keepalives off.
	ClientKeepAlive time.Duration
	// ReleasedPortLinger is how long a resolver port keeps serving its
	// Target after the last ElastiService claiming it let go, by going back
	// to serve mode, being deleted or dropping the port (see ports.PortMap):
	// routing takes a moment to follow the proxy slice's removal.
	ReleasedPortLinger time.Duration
}

// HoldOptions configure holding.
type HoldOptions struct {
	// Timeout and MaxHeld apply where the ElastiService's spec.proxy does
	// not set them.
	Timeout time.Duration
	MaxHeld int
	// MaxHeldTotal bounds what this replica holds for all ElastiServices
	// together, so that one tenant's burst (or many tenants') cannot take
	// the resolver's memory from the others; past it, 503 with RetryAfter
	// (TCP: close).
	MaxHeldTotal int
	// MaxHeldBytes bounds what is read ahead of held HTTP/1.x bodies and
	// TCP connections together (park.Budget); 0 bounds nothing beyond
	// MaxHeldTotal times ReadAheadBytes.
	MaxHeldBytes int
	// RetryAfter is sent with 503 when a hold queue is full.
	RetryAfter time.Duration
	// ReadAheadBytes bounds what the resolver keeps in memory of each held
	// request body (HTTP/1.x), HTTP/2 stream (its flow-control window) or
	// TCP connection while it waits. It is a memory bound, not a size
	// limit: past it the rest waits in the kernel's buffers and the client
	// on its send (backpressure), and is forwarded after the wake.
	ReadAheadBytes int
	// ReleaseConcurrency bounds, per ElastiService on this replica, the
	// requests a hold has released that are on their way to the woken
	// target and have no response headers yet; the rest of a burst waits
	// its turn (see hold.Pacer). ReleaseTurn is the longest one request
	// keeps its turn.
	ReleaseConcurrency int
	ReleaseTurn        time.Duration
	// Parking says where a held bodiless HTTP/1.x request waits (the park
	// package). The zero value, park.ParkOnArrival, is the resolver's; the
	// others exist to compare.
	Parking park.Parking
}

// HTTPOptions harden the L7 server. MaxHeaderBytes defaults to net/http's
// own default, so that what a pod accepts in serve mode also passes in
// proxy mode; MaxConcurrentStreams bounds HTTP/2 streams per client
// connection.
type HTTPOptions struct {
	ReadHeaderTimeout    time.Duration
	IdleTimeout          time.Duration
	MaxHeaderBytes       int
	MaxConcurrentStreams int
	// ClusterDomain is the cluster's DNS domain, for telling a Host that
	// names another Service (<name>.<namespace>.svc.<ClusterDomain>),
	// which gets 421 (handler.Hosts.Misdirected).
	ClusterDomain string
}

// UpstreamOptions configure the dials to pods.
type UpstreamOptions struct {
	// DialTimeout bounds one TCP connect to an endpoint.
	DialTimeout time.Duration
	// DialContext connects to a pod; nil means a plain net.Dialer. Tests
	// inject one to stand in for pod networking.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
}

// ActivationOptions configure the calls that ask the operator to wake a
// target.
type ActivationOptions struct {
	// Activator wakes targets. Timeout bounds one call; failed calls are
	// retried from Backoff doubling to MaxBackoff; a successful call is
	// repeated every Refresh while requests are still held.
	Activator  hold.Activator
	Timeout    time.Duration
	Backoff    time.Duration
	MaxBackoff time.Duration
	Refresh    time.Duration
	// TrafficReportInterval throttles the activation calls that report
	// traffic forwarded at once to a ready target: per ElastiService, at
	// most one starts per interval, and one is in flight at a time. The
	// first report is never delayed by it.
	TrafficReportInterval time.Duration
}

// MemoryOptions: once at least ReturnAtPeak requests and connections were
// held at once on this replica, and the hold queue has then been empty for
// ReturnAfter, the resolver returns its free heap to the OS
// (memoryReturner).
type MemoryOptions struct {
	ReturnAfter  time.Duration
	ReturnAtPeak int
}

// Default option values.
const (
	DefaultUnmappedWait         = 2 * time.Second
	DefaultHoldTimeout          = contract.DefaultHoldTimeout
	DefaultMaxHeld              = 1000
	DefaultMaxHeldTotal         = 10000
	DefaultRetryAfter           = 5 * time.Second
	DefaultReadAheadBytes       = 64 << 10
	DefaultReleaseConcurrency   = 64
	DefaultReleaseTurn          = time.Second
	DefaultDialTimeout          = 3 * time.Second
	DefaultReadHeaderTimeout    = 10 * time.Second
	DefaultIdleTimeout          = 90 * time.Second
	DefaultMaxHeaderBytes       = http.DefaultMaxHeaderBytes
	DefaultMaxConcurrentStreams = 1000
	DefaultClusterDomain        = "cluster.local"
	// DefaultMaxHeldBytes bounds the read-ahead of all holds together
	// when the process has no memory limit to take a share of.
	DefaultMaxHeldBytes = 256 << 20
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
	p := &o.Ports
	if p.PortRangeStart == 0 && p.PortRangeEnd == 0 {
		p.PortRangeStart, p.PortRangeEnd = contract.DefaultPortRangeStart, contract.DefaultPortRangeEnd
	}
	setDuration(&p.UnmappedWait, DefaultUnmappedWait)
	if p.ClientKeepAlive == 0 {
		p.ClientKeepAlive = DefaultClientKeepAlive
	}
	setDuration(&p.ReleasedPortLinger, DefaultReleasedPortLinger)

	h := &o.Hold
	setDuration(&h.Timeout, DefaultHoldTimeout)
	setInt(&h.MaxHeld, DefaultMaxHeld)
	setInt(&h.MaxHeldTotal, DefaultMaxHeldTotal)
	setDuration(&h.RetryAfter, DefaultRetryAfter)
	setInt(&h.ReadAheadBytes, DefaultReadAheadBytes)
	setInt(&h.ReleaseConcurrency, DefaultReleaseConcurrency)
	setDuration(&h.ReleaseTurn, DefaultReleaseTurn)

	s := &o.HTTP
	setDuration(&s.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	setDuration(&s.IdleTimeout, DefaultIdleTimeout)
	setInt(&s.MaxHeaderBytes, DefaultMaxHeaderBytes)
	setInt(&s.MaxConcurrentStreams, DefaultMaxConcurrentStreams)
	if s.ClusterDomain == "" {
		s.ClusterDomain = DefaultClusterDomain
	}

	setDuration(&o.Upstream.DialTimeout, DefaultDialTimeout)
	if o.Upstream.DialContext == nil {
		o.Upstream.DialContext = (&net.Dialer{}).DialContext
	}

	a := &o.Activation
	setDuration(&a.Timeout, DefaultActivationTimeout)
	setDuration(&a.Backoff, DefaultActivationBackoff)
	setDuration(&a.MaxBackoff, DefaultActivationMaxBackoff)
	setDuration(&a.Refresh, DefaultActivationRefresh)
	setDuration(&a.TrafficReportInterval, DefaultTrafficReportInterval)

	setDuration(&o.Memory.ReturnAfter, DefaultReturnMemoryAfter)
	setInt(&o.Memory.ReturnAtPeak, DefaultReturnMemoryAtPeak)

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

func setInt(n *int, def int) {
	if *n <= 0 {
		*n = def
	}
}

func (o *Options) validate() error {
	var errs []error
	if _, err := contract.NewPortRange(o.Ports.PortRangeStart, o.Ports.PortRangeEnd); err != nil {
		errs = append(errs, err)
	}
	if o.Activation.Backoff > o.Activation.MaxBackoff {
		errs = append(errs, fmt.Errorf("activation backoff %s exceeds its maximum %s", o.Activation.Backoff, o.Activation.MaxBackoff))
	}
	return errors.Join(errs...)
}

// HeldBytesFor is the read-ahead bound of all holds together for a process
// whose soft memory limit is limit (math.MaxInt64: none): a quarter of it,
// which leaves the rest for what each held request costs besides its
// read-ahead (about 14 KiB, docs/benchmarks.md) and for the forwarding.
func HeldBytesFor(limit int64) int {
	if limit <= 0 || limit == math.MaxInt64 {
		return DefaultMaxHeldBytes
	}
	return int(min(limit/4, math.MaxInt32))
}
