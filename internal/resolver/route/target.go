package route

import (
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Target is what one local resolver port stands for: one port of one Service
// under one ElastiService.
type Target struct {
	// ElastiService owns the mapping; activation, hold bounds and metrics are
	// per ElastiService.
	ElastiService types.NamespacedName
	// Service is the Service whose traffic this port carries.
	Service types.NamespacedName
	// PortName is the Service port's name; empty for a single unnamed port.
	PortName string
	// Port is the Service port number.
	Port int32
	// AppProtocol is the Service port's appProtocol, if any.
	AppProtocol string
	// HoldTimeout and MaxHeld come from spec.proxy; zero means the
	// resolver's default.
	HoldTimeout time.Duration
	MaxHeld     int
	// Static holds spec.proxy.staticResponses; nil when there are none.
	Static *StaticRules
	// Fallback is spec.proxy.fallback; nil when there is none.
	Fallback *FallbackRoute
	// WakingPage holds spec.proxy.wakingPage; nil when there is none. The
	// wake's progress, which changes far more often, is read from the
	// PortMap per request.
	WakingPage *WakingPage
}

// Layer says how a port's traffic is handled.
type Layer int

const (
	// LayerTCP holds the connection, then splices bytes both ways.
	LayerTCP Layer = iota
	// LayerHTTP terminates HTTP/1.1 or h2c and reverse-proxies requests.
	LayerHTTP
)

// httpAppProtocols are the appProtocol values handled at L7.
var httpAppProtocols = map[string]bool{
	"http":              true,
	"kubernetes.io/h2c": true,
	"kubernetes.io/ws":  true,
	"kubernetes.io/wss": false, // TLS inside: bytes pass through at L4
	"grpc":              true,
	"h2c":               true,
}

// h2cAppProtocols are the appProtocol values that need HTTP/2 upstream.
var h2cAppProtocols = map[string]bool{"kubernetes.io/h2c": true, "grpc": true, "h2c": true}

// httpNamePrefixes mark a Service port name as HTTP when no appProtocol says
// otherwise, in the Istio naming habit (http, http-web, grpc-api, ...).
var httpNamePrefixes = []string{"http", "h2c", "grpc", "ws"}

// Layer classifies the target's port: appProtocol wins, then the name prefix.
// Anything else is plain TCP.
func (t Target) Layer() Layer {
	if t.AppProtocol != "" {
		if httpAppProtocols[strings.ToLower(t.AppProtocol)] {
			return LayerHTTP
		}
		return LayerTCP
	}
	name := strings.ToLower(t.PortName)
	for _, p := range httpNamePrefixes {
		// "https" is TLS: pass it through at L4 rather than mistake it for http.
		if strings.HasPrefix(name, p) && !strings.HasPrefix(name, "https") && !strings.HasPrefix(name, "wss") {
			return LayerHTTP
		}
	}
	return LayerTCP
}

// H2C reports whether the upstream speaks cleartext HTTP/2 (h2c or gRPC).
func (t Target) H2C() bool {
	if t.AppProtocol != "" {
		return h2cAppProtocols[strings.ToLower(t.AppProtocol)]
	}
	name := strings.ToLower(t.PortName)
	return strings.HasPrefix(name, "grpc") || strings.HasPrefix(name, "h2c")
}

// PortKey names the Service port inside the upstream connection pool; it is
// not a resolvable host name and is never dialed as such.
func (t Target) PortKey() string {
	p := t.PortName
	if p == "" {
		p = "p" + strconv.Itoa(int(t.Port))
	}
	return p + "." + t.Service.Name + "." + t.Service.Namespace + ".elasti.invalid"
}
