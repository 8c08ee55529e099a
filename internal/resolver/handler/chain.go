package handler

import (
	"log"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/resolver/hold"
	"elasti.dev/elasti/internal/resolver/park"
	"elasti.dev/elasti/internal/resolver/route"
	"elasti.dev/elasti/internal/resolver/upstream"
)

// Endpoints is what the handlers read of the endpoint source
// (endpoints.Endpoints).
type Endpoints interface {
	Ready(svc types.NamespacedName, portName string) []string
	ReadyEpoch(svc types.NamespacedName) uint64
}

// Progress gives an ElastiService's status.wakeProgress, if it has a
// waking page and the operator has set one (ports.PortMap).
type Progress interface {
	WakeProgress(es types.NamespacedName) (elastiv1alpha1.WakeProgress, bool)
}

// Recorder takes what the handlers count (the resolver's metrics).
type Recorder interface {
	// Unmapped counts a request on a port that maps to nothing.
	Unmapped(es types.NamespacedName)
	// Misdirected counts a request whose Host names another Service
	// than the one its port leads to (Misdirected).
	Misdirected(es types.NamespacedName)
	// BadRequest counts a request refused for its form (CONNECT, a body
	// that broke off).
	BadRequest(es types.NamespacedName)
	// Draining counts a request refused because the resolver stops.
	Draining(es types.NamespacedName)
	// Static counts an answer of the static response rule named rule.
	Static(es types.NamespacedName, rule string)
	// WakingPage counts a waking page that showed phase.
	WakingPage(es types.NamespacedName, phase elastiv1alpha1.WakePhase)
	// Refused counts a held request refused for want of room (an HTTP/2
	// stream finding no share of the read-ahead budget).
	Refused(es types.NamespacedName, err error)
}

// Config are what the handlers are built from.
type Config struct {
	Hold      *hold.Hold
	Parker    *park.Parker
	Proxy     *upstream.Proxy
	Endpoints Endpoints
	Progress  Progress
	// Pages times the waking pages of a wake the operator has not reported
	// a start time for.
	Pages    *PageStarts
	Recorder Recorder
	Clock    clock.Clock
	Log      logr.Logger
	// RetryAfter is sent with 503 when a hold queue is full.
	RetryAfter time.Duration
	// ReadAheadBytes bounds what is read ahead of a held request's body,
	// and what is read of a body a static response drops.
	ReadAheadBytes int
	// HeldBytes bounds what is read ahead for all held requests together.
	HeldBytes *park.Budget
	// ReadHeaderTimeout is the server's; a static response's body must
	// arrive within it as well.
	ReadHeaderTimeout time.Duration
	// ClusterDomain and Namespaces tell a Host that names another
	// Service (Misdirected).
	ClusterDomain string
	Namespaces    Namespaces
}

// Chain builds the L7 handler chain, here and nowhere else. A request
// passes through, in this order (the first runs first):
//
//  1. recoverPanics - a bug answers 500 for that request instead of killing
//     the connection without a word;
//  2. requireMapping - the connection's port must map to a Target, else 404,
//     and the Host must not name another Service or the resolver pod
//     itself (Misdirected), else 421;
//  3. answerStatic - answers a request that a static response rule of the
//     ElastiService matches, without holding, waking or reporting it; see
//     static.go;
//  4. answerWakingPage - with spec.proxy.wakingPage, answers a browser's
//     page load at once with a page that reloads itself while the Target
//     has no ready endpoint; it wakes the Target as a held request does,
//     but is not held; see wakingpage.go;
//  5. holdUntilReady - holds while the Target has no ready endpoint and
//     starts activation; 503 when the hold queue is full, 504 on timeout;
//     with spec.proxy.fallback, points the request at the fallback Service
//     when the target does not come up in time. A bodiless HTTP/1.x
//     request is held parked, outside net/http, and comes back through the
//     server with the hold's outcome (park.Parker.Enter); see hold.go;
//  6. forward - reverse-proxies to a ready pod and asks the client to
//     reconnect (Connection: close, or GOAWAY on HTTP/2); an answer to a
//     request that waited for its Target to wake says how long, in
//     Elasti-Cold-Start; see forward.go and upstream.Proxy.
func Chain(c Config) http.Handler {
	var h http.Handler = &forward{proxy: c.Proxy, log: c.Log}
	h = &holdUntilReady{next: h, parker: c.Parker, rec: c.Recorder, log: c.Log, retryAfter: c.RetryAfter, readAhead: c.ReadAheadBytes, budget: c.HeldBytes}
	h = &answerWakingPage{next: h, hold: c.Hold, endpoints: c.Endpoints, progress: c.Progress, pages: c.Pages, rec: c.Recorder, clock: c.Clock, log: c.Log}
	h = &answerStatic{next: h, endpoints: c.Endpoints, rec: c.Recorder, log: c.Log, readAhead: c.ReadAheadBytes, readHeaderTimeout: c.ReadHeaderTimeout}
	h = &requireMapping{next: h, rec: c.Recorder, hosts: NewHosts(c.ClusterDomain, c.Namespaces)}
	h = &recoverPanics{next: h, log: c.Log}
	return h
}

// Answered says whether a handler before the hold would answer req to t
// itself, whatever t's endpoints: a static response rule matches it, or it
// is a page load and t has a waking page. The park package asks, to park on
// arrival only requests that reach the hold.
func Answered(t route.Target, req *http.Request) bool {
	return (t.Static != nil && matchStatic(t.Static.Rules, req, false) != nil) ||
		(t.WakingPage != nil && wantsWakingPage(req))
}

// ServerOptions harden the L7 server.
type ServerOptions struct {
	ReadHeaderTimeout    time.Duration
	IdleTimeout          time.Duration
	MaxHeaderBytes       int
	MaxConcurrentStreams int
	// StreamReceiveBuffer is each HTTP/2 stream's flow-control window: what
	// a client may send on a stream before the resolver reads it, which
	// bounds a held stream's memory as the read-ahead bounds an HTTP/1.x
	// body's. Each connection's window stays net/http's 1 MiB.
	StreamReceiveBuffer int
	// ErrorLog takes net/http's own error logs.
	ErrorLog *log.Logger
}

// NewServer is the one L7 server behind every HTTP resolver port, serving
// h. It speaks HTTP/1.1 and cleartext HTTP/2 with prior knowledge (h2c,
// gRPC), and puts each connection's Route, from the park.Conn it was handed,
// in the context of every request on that connection (park.ConnContext).
func NewServer(h http.Handler, o ServerOptions) *http.Server {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Server{
		Handler:   h,
		Protocols: &protocols,
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams:      o.MaxConcurrentStreams,
			MaxReceiveBufferPerStream: o.StreamReceiveBuffer,
		},
		ReadHeaderTimeout: o.ReadHeaderTimeout,
		IdleTimeout:       o.IdleTimeout,
		MaxHeaderBytes:    o.MaxHeaderBytes,
		ErrorLog:          o.ErrorLog,
		ConnState:         park.ConnState,
		ConnContext:       park.ConnContext,
	}
}

// ErrorLog adapts the standard library's error logs to l at V(1): they
// are per-connection noise (bad handshakes, resets), not operator news.
func ErrorLog(l logr.Logger) *log.Logger { return log.New(logWriter{l}, "", 0) }

type logWriter struct{ log logr.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	w.log.V(1).Info("http server", "detail", string(p))
	return len(p), nil
}
