package handler

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/keyed"
	"elasti.dev/elasti/internal/resolver/hold"
	"elasti.dev/elasti/internal/resolver/route"
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

// answerWakingPage answers with the waking page a request that wants one
// (wantsWakingPage) while its target cannot serve it (the hold would not
// let it through at once: hold.ServableNow), and starts the wake as a held
// request would; any other request goes on to the hold.
type answerWakingPage struct {
	next      http.Handler
	hold      *hold.Hold
	endpoints Endpoints
	progress  Progress
	pages     *PageStarts
	rec       Recorder
	clock     clock.Clock
	log       logr.Logger
}

func (h *answerWakingPage) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	rt, ok := routed(w, req, h.log)
	if !ok {
		return
	}
	t := rt.Target
	if t.WakingPage == nil || !wantsWakingPage(req) || h.hold.ServableNow(t) {
		h.next.ServeHTTP(w, req)
		return
	}
	// The page counts as traffic exactly as a held request does: the
	// same activation loop, whose first call is made whether or not
	// anything is held by then.
	h.hold.Wake(t)
	h.write(w, req, t)
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

// write sends the page for t: 503, so that nothing caches it as
// the Service's content and a crawler retries, with Retry-After and Refresh
// at the refresh interval.
func (h *answerWakingPage) write(w http.ResponseWriter, req *http.Request, t route.Target) {
	v := h.values(t)
	body := renderWakingPage(t.WakingPage, v)
	refresh := strconv.Itoa(v.refresh)
	hdr := w.Header()
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("Retry-After", refresh)
	hdr.Set("Refresh", refresh)
	hdr.Set(HeaderWakingPage, string(v.phase))
	w.WriteHeader(http.StatusServiceUnavailable)
	if req.Method != http.MethodHead {
		_, _ = io.WriteString(w, body)
	}
	h.rec.WakingPage(t.ElastiService, v.phase)
}

// values gathers what the page shows for t: the operator's
// status.wakeProgress if any, and the time since the wake started, or, when
// the operator has not said, since this replica's first waking page since
// the target was last ready.
func (h *answerWakingPage) values(t route.Target) pageValues {
	progress, known := h.progress.WakeProgress(t.ElastiService)
	v := pageValues{service: t.Service.Name, phase: elastiv1alpha1.WakePhaseScaling, refresh: t.WakingPage.Refresh}
	now := h.clock.Now()
	start := progress.StartTime.Time
	if known {
		v.phase, v.message = knownPhase(progress.Phase), progress.Message
	}
	if !known || start.IsZero() {
		start = h.pages.since(t.ElastiService, h.endpoints.ReadyEpoch(t.Service), now)
	}
	// The operator's clock may run a little ahead of this node's.
	v.elapsed = max(now.Sub(start), 0)
	return v
}

// PageStarts remembers, per ElastiService, when this replica first answered
// with the waking page since the target was last ready: the elapsed time
// shown while status.wakeProgress has no start time. Each entry records the
// target Service's ready epoch (Endpoints.ReadyEpoch), so it lapses by
// itself once the target has been ready, as the hold's fallback epochs do.
// The zero value is ready to use.
type PageStarts struct {
	m keyed.Map[types.NamespacedName, pageStart]
}

type pageStart struct {
	at    time.Time
	epoch uint64
}

// since returns when key's first page of the current sleep was answered,
// recording now if this is it.
func (s *PageStarts) since(key types.NamespacedName, epoch uint64, now time.Time) time.Time {
	e, _ := s.m.Update(key, func(e pageStart, ok bool) (pageStart, bool) {
		if ok && e.epoch == epoch {
			return e, true
		}
		return pageStart{at: now, epoch: epoch}, true
	})
	return e.at
}

// Forget drops a deleted ElastiService's entry.
func (s *PageStarts) Forget(key types.NamespacedName) { s.m.Delete(key) }
