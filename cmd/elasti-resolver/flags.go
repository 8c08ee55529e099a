package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"elasti.dev/elasti/internal/activation"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/resolver"
)

// config is everything the flags set.
type config struct {
	resolver  resolver.Options
	adminAddr string
	// profiling adds net/http/pprof's handlers to the admin port.
	profiling   bool
	operatorURL string
	// operatorCAFile verifies an https operatorURL; empty: system roots.
	operatorCAFile string
	tokenPath      string
	drainPeriod    time.Duration
	drainPeriodMax time.Duration
	drainTimeout   time.Duration
	// podName is this pod's name, as the proxy slices list it.
	podName string
	// watchNamespaces limits the ElastiServices followed; empty: all.
	watchNamespaces []string
}

// parseFlags reads the command line; every flag is listed in docs/resolver.md.
func parseFlags(fs *flag.FlagSet, args []string, zapOpts *zap.Options) (config, error) {
	var c config
	o := &c.resolver
	var watchNamespaces string
	fs.StringVar(&o.Ports.ListenAddress, "listen-address", "", "IP address the resolver ports bind to; empty binds all addresses.")
	portRange := contract.DefaultPortRange()
	fs.TextVar(&portRange, "port-range", portRange, "Resolver ports START-END to open; the operator's --port-range must be the same.")
	fs.StringVar(&watchNamespaces, "watch-namespaces", "", "Comma-separated namespaces whose ElastiServices this resolver serves; empty serves all. Must equal the operator's --watch-namespaces.")
	fs.StringVar(&c.adminAddr, "admin-bind-address", ":8012", "Address of /healthz, /readyz and /metrics.")
	fs.BoolVar(&c.profiling, "profiling", false, "Also serve Go's profiles (net/http/pprof) under /debug/pprof/ on the admin address. Off by default: they reveal the process's internals to whoever reaches the admin port.")
	fs.DurationVar(&o.Ports.UnmappedWait, "unmapped-port-wait", resolver.DefaultUnmappedWait, "How long a connection on a port without a mapping waits for one before it is refused.")
	fs.DurationVar(&o.Hold.Timeout, "hold-timeout", resolver.DefaultHoldTimeout, "Default longest hold of a request or connection (ElastiService spec.proxy.holdTimeout overrides).")
	fs.IntVar(&o.Hold.MaxHeld, "max-held-requests", resolver.DefaultMaxHeld, "Default bound on held requests per ElastiService on this replica (spec.proxy.maxHeldRequests overrides).")
	fs.IntVar(&o.Hold.MaxHeldTotal, "max-held-total", resolver.DefaultMaxHeldTotal, "Bound on the requests and connections this replica holds for all ElastiServices together, whatever their spec.proxy.maxHeldRequests; past it, 503 with Retry-After (TCP: close).")
	fs.IntVar(&o.Hold.MaxHeldBytes, "max-held-bytes", 0, "Bound on what this replica reads ahead of held HTTP/1.x bodies and TCP connections together; a hold that finds it spent reads nothing ahead (backpressure, nothing refused). 0: a quarter of the soft memory limit (from the container's limit), or 256 MiB without one.")
	fs.DurationVar(&o.Hold.RetryAfter, "retry-after", resolver.DefaultRetryAfter, "Retry-After sent with 503 when a hold queue is full.")
	fs.IntVar(&o.Hold.ReadAheadBytes, "hold-read-ahead-bytes", resolver.DefaultReadAheadBytes, "Bytes kept in memory of each held HTTP/1.x request body, HTTP/2 stream or TCP connection while its target wakes; a memory bound, not a size limit: the rest waits, with backpressure, and is forwarded after the wake.")
	fs.IntVar(&o.Hold.ReleaseConcurrency, "release-concurrency", resolver.DefaultReleaseConcurrency, "Per ElastiService on this replica, how many requests released from a hold go to the woken target at once (until their response headers arrive); the rest of a burst waits its turn.")
	fs.DurationVar(&o.Hold.ReleaseTurn, "release-turn", resolver.DefaultReleaseTurn, "Longest time one released request keeps its turn while its response headers have not arrived (a long poll), so that slow answers slow a burst's release down but never stop it.")
	fs.IntVar(&o.Memory.ReturnAtPeak, "memory-return-peak", resolver.DefaultReturnMemoryAtPeak, "Once this many requests and connections were held at once on this replica, the heap they used is returned to the OS when the hold queue has been empty for --memory-return-after.")
	fs.DurationVar(&o.Memory.ReturnAfter, "memory-return-after", resolver.DefaultReturnMemoryAfter, "How long the hold queue stays empty after a hold of --memory-return-peak or more before the free heap is returned to the OS.")
	fs.DurationVar(&o.Upstream.DialTimeout, "dial-timeout", resolver.DefaultDialTimeout, "Timeout of one TCP connect to a pod.")
	fs.StringVar(&o.HTTP.ClusterDomain, "cluster-domain", resolver.DefaultClusterDomain, "The cluster's DNS domain: a request whose Host names another Service (<name>.<namespace>.svc.<domain>, <name>.<namespace>, <name>) than the one its port leads to gets 421.")
	fs.DurationVar(&o.HTTP.ReadHeaderTimeout, "read-header-timeout", resolver.DefaultReadHeaderTimeout, "Time a client has to send request headers.")
	fs.DurationVar(&o.HTTP.IdleTimeout, "idle-timeout", resolver.DefaultIdleTimeout, "Idle keep-alive timeout of client connections.")
	fs.IntVar(&o.HTTP.MaxHeaderBytes, "max-header-bytes", resolver.DefaultMaxHeaderBytes, "Largest request header block accepted.")
	fs.DurationVar(&o.Ports.ClientKeepAlive, "client-keepalive", resolver.DefaultClientKeepAlive, "TCP keepalive period of client connections (idle time before the first probe, and between probes), so that NATs and load balancers keep held connections open through a long cold start; negative turns keepalives off.")
	fs.IntVar(&o.HTTP.MaxConcurrentStreams, "max-concurrent-streams", resolver.DefaultMaxConcurrentStreams, "HTTP/2 streams per client connection.")
	fs.StringVar(&c.operatorURL, "operator-url", activation.DefaultOperatorURL, "Base URL of the operator's activation server: https, or http when the operator runs with --webhook-port=0 (no certificate).")
	fs.StringVar(&c.operatorCAFile, "operator-ca-file", activation.DefaultCAFile, "PEM file of the CA that an https --operator-url is verified with, the operator's ConfigMap elasti-activation-ca mounted; read for every new connection, so a rotated CA is picked up. Empty trusts the system's roots; unused with http.")
	fs.StringVar(&c.tokenPath, "token-path", activation.DefaultTokenPath, "ServiceAccount token presented to the activation server, a projected token for the operator's --activation-audiences; read on every call.")
	fs.DurationVar(&o.Activation.Timeout, "activation-timeout", resolver.DefaultActivationTimeout, "Timeout of one activation call; longer than the operator's --wake-timeout.")
	fs.DurationVar(&o.Activation.Backoff, "activation-backoff", resolver.DefaultActivationBackoff, "First retry delay after a failed activation call; doubles per failure.")
	fs.DurationVar(&o.Activation.MaxBackoff, "activation-max-backoff", resolver.DefaultActivationMaxBackoff, "Largest retry delay between failed activation calls.")
	fs.DurationVar(&o.Activation.Refresh, "activation-refresh", resolver.DefaultActivationRefresh, "Repeat a successful activation this often while requests are still held.")
	fs.DurationVar(&o.Ports.ReleasedPortLinger, "released-port-linger", resolver.DefaultReleasedPortLinger, "How long a resolver port keeps serving its Service after the last ElastiService claiming it let go (deleted, or the port dropped), while kube-proxy and ingresses stop routing to it. Keep it below the operator's --port-quarantine.")
	fs.DurationVar(&o.Activation.TrafficReportInterval, "traffic-report-interval", resolver.DefaultTrafficReportInterval, "Per ElastiService, at most one activation call per interval reports traffic forwarded at once to a ready target; such a report calls off a scale-down in its grace period.")
	fs.DurationVar(&c.drainPeriod, "drain-period", 15*time.Second, "After SIGTERM: how long new connections are still accepted while readiness is false, at least; see --drain-period-max.")
	fs.DurationVar(&c.drainPeriodMax, "drain-period-max", 2*time.Minute, "After SIGTERM and --drain-period: new connections are still accepted until a --drain-period after no proxy EndpointSlice lists this pod (the operator rewrites one per sleeping Service), or until none was rewritten for a --drain-period (the operator is not running, or no other resolver is ready), at most this long after SIGTERM. The pod's terminationGracePeriodSeconds must exceed it plus --drain-timeout.")
	fs.StringVar(&c.podName, "pod-name", os.Getenv("POD_NAME"), "This pod's name, as the proxy EndpointSlices list it (default $POD_NAME, which the manifests set). Empty: a drain does not wait for the slices, only --drain-period.")
	fs.DurationVar(&c.drainTimeout, "drain-timeout", 60*time.Second, "After the drain period: how long held and in-flight work may still finish.")
	if zapOpts != nil {
		zapOpts.BindFlags(fs)
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	o.Ports.PortRangeStart, o.Ports.PortRangeEnd = int(portRange.Start), int(portRange.End)
	for _, ns := range strings.Split(watchNamespaces, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			c.watchNamespaces = append(c.watchNamespaces, ns)
		}
	}
	if c.drainPeriod < 0 || c.drainTimeout < 0 {
		return c, fmt.Errorf("--drain-period and --drain-timeout must not be negative")
	}
	if c.drainPeriodMax < c.drainPeriod {
		return c, fmt.Errorf("--drain-period-max %s must not be below --drain-period %s", c.drainPeriodMax, c.drainPeriod)
	}
	return c, nil
}
