package resolver

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// The waking page (spec.proxy.wakingPage): a browser that loads a page of a
// Service at zero gets, at once, a page that reloads itself and shows how
// far the wake has got (status.wakeProgress), instead of a blank tab that
// spins for the whole cold start. The request wakes the target as a held
// request does, but takes no hold slot and waits for nothing. Every other
// request is held as without the page.

// HeaderWakingPage is set on every waking page to the wake phase it shows,
// so that a client or an operator can tell it from the pod's answer.
const HeaderWakingPage = "Elasti-Waking-Page"

// Bounds and default of spec.proxy.wakingPage.refreshSeconds, as the API
// declares them; applied again here for objects the API's defaulting or
// validation did not see.
const (
	defaultPageRefresh = 2
	minPageRefresh     = 1
	maxPageRefresh     = 60
)

// WakingPage is spec.proxy.wakingPage as the resolver uses it. Every Target
// of the ElastiService shares one by pointer, which keeps Target
// comparable, and nobody modifies it once built.
type WakingPage struct {
	// Refresh is how often the page reloads itself, in seconds.
	Refresh int
	// HTML replaces the built-in page when not empty; its placeholders are
	// replaced per answer (renderWakingPage).
	HTML string
}

// newWakingPage reads spec.proxy.wakingPage; nil when there is none.
func newWakingPage(p *elastiv1alpha1.WakingPage) *WakingPage {
	if p == nil {
		return nil
	}
	refresh := int(p.RefreshSeconds)
	if refresh == 0 {
		refresh = defaultPageRefresh
	}
	return &WakingPage{Refresh: min(max(refresh, minPageRefresh), maxPageRefresh), HTML: p.HTML}
}

// answerWakingPage answers with the waking page a request that wants one
// (wantsWakingPage) while its target cannot serve it, and starts the wake
// as a held request would; any other request goes on to the hold.
func (r *Resolver) answerWakingPage(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rt, ok := routeFrom(req.Context())
		if !ok || !rt.mapped {
			r.misrouted(w)
			return
		}
		t := rt.target
		if t.WakingPage == nil || !wantsWakingPage(req) || r.servableNow(t) {
			next.ServeHTTP(w, req)
			return
		}
		// The page counts as traffic exactly as a held request does: the
		// same activation loop, whose first call is made whether or not
		// anything is held by then.
		r.waker.ensure(r.stopCtx, t)
		r.writeWakingPage(w, req, t)
	})
}

// wantsWakingPage says whether req is a page load that the waking page may
// answer: a GET or HEAD without a body, neither an upgrade (WebSocket) nor
// gRPC, whose Accept header prefers HTML (prefersHTML).
func wantsWakingPage(req *http.Request) bool {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		return false
	}
	// A body would have to be read or dropped; no browser sends one with a
	// page load, so such a request is held as it always was.
	if req.ContentLength != 0 {
		return false
	}
	if req.Header.Get("Upgrade") != "" || strings.HasPrefix(req.Header.Get("Content-Type"), "application/grpc") {
		return false
	}
	return prefersHTML(req.Header.Values("Accept"))
}

// servableNow says whether the hold would let t's request through at once:
// the Service port has a ready endpoint (the same test as answerStatic's),
// or the ElastiService is in fallback and its fallback can take it. Then
// the page stands aside and the browser gets a real answer.
func (r *Resolver) servableNow(t Target) bool {
	if len(r.endpoints.Ready(t.Service, t.PortName)) > 0 {
		return true
	}
	return r.inFallback(t) && r.fallbackReady(t)
}

// writeWakingPage sends the page for t: 503, so that nothing caches it as
// the Service's content and a crawler retries, with Retry-After and Refresh
// at the refresh interval.
func (r *Resolver) writeWakingPage(w http.ResponseWriter, req *http.Request, t Target) {
	v := r.pageValues(t)
	body := renderWakingPage(t.WakingPage, v)
	refresh := strconv.Itoa(v.refresh)
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	h.Set("Retry-After", refresh)
	h.Set("Refresh", refresh)
	h.Set(HeaderWakingPage, string(v.phase))
	w.WriteHeader(http.StatusServiceUnavailable)
	if req.Method != http.MethodHead {
		_, _ = io.WriteString(w, body)
	}
	es := t.ElastiService
	r.metrics.WakingPages.WithLabelValues(es.Namespace, es.Name, string(v.phase)).Inc()
}

// pageValues gathers what the page shows for t: the operator's
// status.wakeProgress if any, and the time since the wake started, or, when
// the operator has not said, since this replica's first waking page since
// the target was last ready.
func (r *Resolver) pageValues(t Target) pageValues {
	progress, known := r.ports.wakeProgress(t.ElastiService)
	v := pageValues{service: t.Service.Name, phase: elastiv1alpha1.WakePhaseScaling, refresh: t.WakingPage.Refresh}
	now := r.opts.Clock.Now()
	start := progress.StartTime.Time
	if known {
		v.phase, v.message = knownPhase(progress.Phase), progress.Message
	}
	if !known || start.IsZero() {
		start = r.pageStarts.since(t.ElastiService, r.endpoints.ReadyEpoch(t.Service), now)
	}
	// The operator's clock may run a little ahead of this node's.
	v.elapsed = max(now.Sub(start), 0)
	return v
}

// pageStarts remembers, per ElastiService, when this replica first answered
// with the waking page since the target was last ready: the elapsed time
// shown while status.wakeProgress has no start time. Each entry records the
// target Service's ready epoch (Endpoints.ReadyEpoch), so it lapses by
// itself once the target has been ready, as fallbackEpochs does.
type pageStarts struct {
	mu sync.Mutex
	m  map[types.NamespacedName]pageStart
}

type pageStart struct {
	at    time.Time
	epoch uint64
}

// since returns when key's first page of the current sleep was answered,
// recording now if this is it.
func (s *pageStarts) since(key types.NamespacedName, epoch uint64, now time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.m[key]; ok && e.epoch == epoch {
		return e.at
	}
	if s.m == nil {
		s.m = map[types.NamespacedName]pageStart{}
	}
	s.m[key] = pageStart{at: now, epoch: epoch}
	return now
}

// forget drops a deleted ElastiService's entry.
func (s *pageStarts) forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}
