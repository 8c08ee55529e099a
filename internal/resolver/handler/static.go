package handler

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/resolver/park"
	"elasti.dev/elasti/internal/resolver/route"
)

// Static responses (spec.proxy.staticResponses): requests such as health
// checks that the resolver answers itself. Such an answer never wakes the
// target, never counts as traffic (no activation call, no traffic report)
// and never takes a hold slot, so an uptime monitor cannot keep a sleeping
// workload awake.

// HeaderStaticResponse names, on every static answer, the rule that gave
// it, so that a client or an operator can tell it from the pod's answer.
const HeaderStaticResponse = "Elasti-Static-Response"

// framingHeaders frame the connection or the body. The resolver sets them
// itself; admission refuses them in respond.headers, and they are skipped
// here as well for objects stored before that rule existed.
var framingHeaders = map[string]bool{
	"Connection": true, "Content-Length": true, "Keep-Alive": true, "Proxy-Connection": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
}

// answerStatic answers a request with the first static response rule of
// its ElastiService that matches it and applies in the target's current
// state; any other request goes on to the hold.
type answerStatic struct {
	next      http.Handler
	endpoints Endpoints
	rec       Recorder
	log       logr.Logger
	// readAhead bounds the body read and dropped before an answer.
	readAhead int
	// readHeaderTimeout bounds how long that body may take to arrive.
	readHeaderTimeout time.Duration
}

func (h *answerStatic) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	rt, ok := routed(w, req, h.log)
	if !ok {
		return
	}
	t := rt.Target
	if t.Static == nil {
		h.next.ServeHTTP(w, req)
		return
	}
	ready := len(h.endpoints.Ready(t.Service, t.PortName)) > 0
	rule := matchStatic(t.Static.Rules, req, ready)
	if rule == nil {
		h.next.ServeHTTP(w, req)
		return
	}
	h.write(w, req, t, rule, ready)
}

// matchStatic returns the first rule that matches req and applies: an
// AtZero rule only while the target has no ready endpoint. It returns nil
// when none does.
func matchStatic(rules []elastiv1alpha1.StaticResponse, req *http.Request, ready bool) *elastiv1alpha1.StaticResponse {
	var query url.Values // parsed once, by the first rule that asks
	for i := range rules {
		rule := &rules[i]
		if ready && rule.When != elastiv1alpha1.StaticResponseAlways {
			continue
		}
		if !methodMatches(rule.Match.Methods, req.Method) || !pathMatches(rule.Match.Path, req.URL.Path) {
			continue
		}
		if !headersMatch(rule.Match.Headers, req.Header) {
			continue
		}
		if len(rule.Match.Query) > 0 && query == nil {
			// Only read to match: the query still reaches a pod byte for
			// byte. What does not parse is left out.
			query, _ = url.ParseQuery(req.URL.RawQuery)
		}
		if queryMatches(rule.Match.Query, query) {
			return rule
		}
	}
	return nil
}

func methodMatches(methods []elastiv1alpha1.HTTPMethod, method string) bool {
	if len(methods) == 0 {
		return true
	}
	for _, m := range methods {
		if string(m) == method {
			return true
		}
	}
	return false
}

func pathMatches(p *elastiv1alpha1.PathMatch, path string) bool {
	switch {
	case p == nil:
		return true
	case p.Exact != nil:
		return path == *p.Exact
	case p.Prefix != nil:
		return strings.HasPrefix(path, *p.Prefix)
	}
	return false
}

// headersMatch says whether every condition holds for some value of its
// header. Names are compared without regard to case: h holds them in
// canonical form, as net/http stores them for HTTP/1.x and HTTP/2 alike.
func headersMatch(conds []elastiv1alpha1.HeaderMatch, h http.Header) bool {
	for _, c := range conds {
		if !anyValue(h.Values(c.Name), c) {
			return false
		}
	}
	return true
}

func anyValue(values []string, c elastiv1alpha1.HeaderMatch) bool {
	for _, v := range values {
		switch {
		case c.Exact != nil && v == *c.Exact,
			c.Prefix != nil && strings.HasPrefix(v, *c.Prefix),
			c.Contains != nil && strings.Contains(v, *c.Contains):
			return true
		}
	}
	return false
}

// queryMatches says whether every parameter is present and, where a value
// is asked for, has it.
func queryMatches(conds []elastiv1alpha1.QueryMatch, q url.Values) bool {
	for _, c := range conds {
		values, present := q[c.Name]
		if !present {
			return false
		}
		if c.Exact != nil && !containsString(values, *c.Exact) {
			return false
		}
	}
	return true
}

func containsString(values []string, want string) bool {
	for _, v := range values {
		if v == want {
			return true
		}
	}
	return false
}

// write sends rule's answer. While the target has a ready endpoint
// the answer asks the client to reconnect (Connection: close, GOAWAY on
// HTTP/2), as forwarded answers do, so that no kept-alive connection stays
// pinned to the resolver once the Service is back in serve mode.
func (h *answerStatic) write(w http.ResponseWriter, req *http.Request, t route.Target, rule *elastiv1alpha1.StaticResponse, ready bool) {
	drained, err := h.discardBody(w, req)
	if err != nil {
		h.rec.BadRequest(t.ElastiService)
		w.Header().Set("Connection", "close")
		status := http.StatusBadRequest
		if park.IsTimeout(err) {
			status = http.StatusRequestTimeout
		}
		http.Error(w, "elasti resolver: the request body was not received whole", status)
		return
	}
	status := staticStatus(rule.Respond.Status)
	body := rule.Respond.Body
	if !bodyAllowed(status) {
		body = ""
	}
	hdr := w.Header()
	setStaticHeaders(hdr, rule, body)
	// An unread HTTP/1.x body would be taken for the next request; on
	// HTTP/2 only the stream is reset.
	if ready || (!drained && req.ProtoMajor == 1) {
		hdr.Set("Connection", "close")
	}
	w.WriteHeader(status)
	if body != "" && req.Method != http.MethodHead {
		_, _ = io.WriteString(w, body)
	}
	h.rec.Static(t.ElastiService, rule.Name)
}

// setStaticHeaders sets rule's headers, but none that frame the answer,
// then the framing for body and the header naming the rule.
func setStaticHeaders(h http.Header, rule *elastiv1alpha1.StaticResponse, body string) {
	for name, value := range rule.Respond.Headers {
		if !framingHeaders[http.CanonicalHeaderKey(name)] {
			h.Set(name, string(value))
		}
	}
	if body != "" {
		if h.Get("Content-Type") == "" {
			h.Set("Content-Type", "text/plain; charset=utf-8")
		}
		h.Set("Content-Length", strconv.Itoa(len(body)))
	}
	h.Set(HeaderStaticResponse, rule.Name)
}

// staticStatus is the answer's status: respond.status, or 200 where the
// API's default was not applied or the value is not a final status.
func staticStatus(s int32) int {
	if s < 200 || s > 599 {
		return http.StatusOK
	}
	return int(s)
}

func bodyAllowed(status int) bool {
	return status != http.StatusNoContent && status != http.StatusNotModified
}

// discardBody reads and drops the body of a request about to get a static
// answer, so that the client's connection can carry its next request. It
// reads at most the read-ahead bound, within the read-header timeout.
// drained is false when the body was longer or declared longer: it is left
// unread, and an HTTP/1.x answer closes the connection. An error means the body
// broke off, was malformed, or was too slow in coming.
func (h *answerStatic) discardBody(w http.ResponseWriter, req *http.Request) (drained bool, err error) {
	if req.Body == nil || req.Body == http.NoBody || req.ContentLength == 0 {
		return true, nil
	}
	limit := int64(h.readAhead)
	if req.ContentLength > limit {
		return false, nil
	}
	if wait := h.readHeaderTimeout; wait > 0 {
		rc := http.NewResponseController(w)
		// Socket deadlines are wall-clock by nature; the injected clock is
		// for decisions.
		_ = rc.SetReadDeadline(time.Now().Add(wait))
		defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	}
	n, err := io.CopyN(io.Discard, req.Body, limit+1)
	switch {
	case errors.Is(err, io.EOF):
		return true, nil
	case err != nil:
		return false, err
	}
	return n <= limit, nil
}
