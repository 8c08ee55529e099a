package handler

import (
	"html"
	"strconv"
	"strings"
	"time"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/resolver/route"
)

// pageValues are what one waking page shows.
type pageValues struct {
	// service is the Service's name.
	service string
	// phase is one of wakePhases.
	phase   elastiv1alpha1.WakePhase
	message string
	elapsed time.Duration
	// refresh is the reload interval in seconds.
	refresh int
}

// wakePhases are the phases of a wake in their order, with the words the
// built-in page shows for each.
var wakePhases = []struct {
	phase elastiv1alpha1.WakePhase
	label string
}{
	{elastiv1alpha1.WakePhaseScaling, "Scaling up"},
	{elastiv1alpha1.WakePhaseScheduling, "Scheduling the pod"},
	{elastiv1alpha1.WakePhasePullingImage, "Pulling the image"},
	{elastiv1alpha1.WakePhaseStarting, "Starting the container"},
	{elastiv1alpha1.WakePhaseReady, "Ready"},
}

// knownPhase returns p if it is one of wakePhases, else the first phase: a
// value that this resolver does not know (an operator newer than it) must
// neither break the page nor add a metric label.
func knownPhase(p elastiv1alpha1.WakePhase) elastiv1alpha1.WakePhase {
	for _, wp := range wakePhases {
		if wp.phase == p {
			return p
		}
	}
	return elastiv1alpha1.WakePhaseScaling
}

// renderWakingPage is the page's body: the ElastiService's own HTML with
// its placeholders replaced by HTML-escaped values, or the built-in page.
func renderWakingPage(p *route.WakingPage, v pageValues) string {
	if p.HTML == "" {
		return builtinWakingPage(v)
	}
	return strings.NewReplacer(
		"{{service}}", html.EscapeString(v.service),
		"{{phase}}", html.EscapeString(string(v.phase)),
		"{{message}}", html.EscapeString(v.message),
		"{{elapsed}}", strconv.Itoa(int(v.elapsed/time.Second)),
		"{{refresh}}", strconv.Itoa(v.refresh),
	).Replace(p.HTML)
}

// builtinPageStyle is the built-in page's only styling: inline, so the page
// loads nothing else from a Service that cannot answer yet.
const builtinPageStyle = `body{margin:0;min-height:100vh;display:flex;align-items:center;justify-content:center;` +
	`font:16px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;background:#f4f5f7;color:#1f2733}` +
	`main{max-width:30rem;margin:1rem;padding:1.75rem 2rem;background:#fff;border-radius:10px;box-shadow:0 2px 10px rgba(0,0,0,.08)}` +
	`h1{font-size:1.3rem;margin:0 0 .4rem}` +
	`#elasti-phase{font-weight:600;margin:1rem 0 .25rem}` +
	`ol{list-style:none;margin:.5rem 0 1rem;padding:0}` +
	`li{position:relative;padding:.2rem 0 .2rem 1.7rem;color:#8b93a1}` +
	`li::before{content:"";position:absolute;left:0;top:.5rem;width:.85rem;height:.85rem;box-sizing:border-box;border:2px solid #c9ced6;border-radius:50%}` +
	`li.done{color:#1f2733}li.done::before{background:#2f9e63;border-color:#2f9e63}` +
	`li.now{color:#1f2733;font-weight:600}li.now::before{border-color:#2d6cdf;animation:beat 1s ease-in-out infinite alternate}` +
	`@keyframes beat{to{background:#2d6cdf}}` +
	`.small{color:#5d6675;font-size:.9rem;margin:.3rem 0}`

// builtinWakingPage writes the built-in page: the Service's name, the wake's
// phases with the earlier ones done and the current one marked, the
// operator's message and the seconds waited so far. It reloads itself
// through a meta refresh as well as the Refresh header, and needs no
// script.
func builtinWakingPage(v pageValues) string {
	svc := html.EscapeString(v.service)
	refresh := strconv.Itoa(v.refresh)
	current := 0
	for i, wp := range wakePhases {
		if wp.phase == v.phase {
			current = i
		}
	}
	var b strings.Builder
	b.WriteString(`<!DOCTYPE html>` + "\n" + `<html lang="en"><head><meta charset="utf-8">`)
	b.WriteString(`<meta name="viewport" content="width=device-width,initial-scale=1">`)
	b.WriteString(`<meta http-equiv="refresh" content="` + refresh + `">`)
	b.WriteString(`<title>` + svc + ` is starting</title><style>` + builtinPageStyle + `</style></head>` + "\n")
	b.WriteString(`<body><main>` + "\n")
	b.WriteString(`<h1>` + svc + ` is starting</h1>` + "\n")
	b.WriteString(`<p class="small">It was scaled down to zero, and your visit is bringing it back. ` +
		`This page checks again every ` + refresh + ` s and turns into the service once it answers.</p>` + "\n")
	b.WriteString(`<p id="elasti-phase" data-phase="` + string(wakePhases[current].phase) + `">` + wakePhases[current].label + `</p>` + "\n")
	b.WriteString(`<ol>` + "\n")
	for i, wp := range wakePhases {
		switch {
		case i < current:
			b.WriteString(`<li class="done">` + wp.label + `</li>` + "\n")
		case i == current:
			b.WriteString(`<li class="now" aria-current="step">` + wp.label + `</li>` + "\n")
		default:
			b.WriteString(`<li>` + wp.label + `</li>` + "\n")
		}
	}
	b.WriteString(`</ol>` + "\n")
	if v.message != "" {
		b.WriteString(`<p class="small" id="elasti-message">` + html.EscapeString(v.message) + `</p>` + "\n")
	}
	b.WriteString(`<p class="small">Waiting for <span id="elasti-elapsed">` + strconv.Itoa(int(v.elapsed/time.Second)) + `</span> s.</p>` + "\n")
	b.WriteString(`</main></body></html>` + "\n")
	return b.String()
}
