package handler

import (
	"strconv"
	"strings"
)

// Content negotiation, read only to tell a browser's page load from every
// other request: the waking page goes to clients that ask for HTML before
// anything else, and never to API clients that merely accept anything.

// htmlTypes are the media types the waking page is written in.
var htmlTypes = map[string]bool{"text/html": true, "application/xhtml+xml": true}

// prefersHTML reports whether the Accept header values (one header or
// several, each a comma-separated list of media ranges) rank an HTML type
// first: the media range with the highest q-value, the first listed among
// equals, names text/html or application/xhtml+xml, with q above 0.
//
// Browsers loading a page send such a list ("text/html,...,*/*;q=0.8").
// A missing header, "*/*" alone, a list that puts another type first
// ("application/json, text/html") and "text/html;q=0" do not prefer HTML.
// A wildcard never counts as HTML, whatever its q: a client that accepts
// anything has not asked for a page. Ties go to the earlier range because
// browsers list several types at q=1 (Chrome: "text/html,...,image/avif,
// image/webp,...") and put the one they want first. Ranges that do not
// parse are skipped.
func prefersHTML(accept []string) bool {
	bestQ := -1.0
	best := ""
	for _, header := range accept {
		for _, r := range splitOutsideQuotes(header, ',') {
			mediaType, q, ok := parseMediaRange(r)
			if !ok {
				continue
			}
			if q > bestQ {
				best, bestQ = mediaType, q
			}
		}
	}
	return bestQ > 0 && htmlTypes[best]
}

// parseMediaRange reads one media range of an Accept header, such as
// `text/html;level=1;q=0.9`: its type in lower case and its q-value (1 when
// absent). ok is false for an empty range, one without a type/subtype pair
// and one whose q-value is not a number from 0 to 1.
func parseMediaRange(s string) (mediaType string, q float64, ok bool) {
	parts := splitOutsideQuotes(s, ';')
	mediaType = strings.ToLower(strings.TrimSpace(parts[0]))
	typ, sub, found := strings.Cut(mediaType, "/")
	if !found || typ == "" || sub == "" || strings.ContainsAny(mediaType, " \t\"") {
		return "", 0, false
	}
	q = 1
	for _, p := range parts[1:] {
		name, value, _ := strings.Cut(p, "=")
		if !strings.EqualFold(strings.TrimSpace(name), "q") {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil || v < 0 || v > 1 {
			return "", 0, false
		}
		q = v
		// Parameters after q are accept-extensions, not media type
		// parameters; neither matters here.
		break
	}
	return mediaType, q, true
}

// splitOutsideQuotes splits s at sep, except inside a quoted string (a
// media type parameter may quote a comma or a semicolon). A backslash
// inside quotes escapes the next character.
func splitOutsideQuotes(s string, sep byte) []string {
	var out []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == sep:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
