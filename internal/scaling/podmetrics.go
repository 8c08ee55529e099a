package scaling

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
)

// Reasons for an unhealthy podMetrics trigger, used as condition reasons.
const (
	ReasonEndpointsUnavailable = "EndpointsUnavailable"
	ReasonPodScrapeFailed      = "PodScrapeFailed"
	ReasonMetricsPageInvalid   = "MetricsPageInvalid"
	ReasonMetricNotFound       = "MetricNotFound"
)

const (
	// defaultMetricsPath is scraped when a podMetrics trigger has no path.
	defaultMetricsPath = "/metrics"
	// minPodMetricsWindow is the shortest window a podMetrics trigger
	// measures a rate over, whatever the cooldown period: a rate needs two
	// samples some time apart.
	minPodMetricsWindow = time.Minute
)

// evaluatePodMetrics evaluates a podMetrics trigger: the named counter,
// scraped from every ready pod of the ElastiService's Service and summed,
// rising by less than threshold per second over the window (the cooldown
// period) is idle.
//
// The rate comes from the Evaluator's own history of the pods' counters.
// Until that history covers a whole window the trigger reports active, so
// an operator that just started, or a new leader, waits one window before
// it lets a target sleep. A ready pod that cannot be scraped, or whose page
// lacks the counter, makes the trigger unhealthy, which never allows a
// scale-down.
//
// With no ready pod, nothing is scraped and the observation counts as no
// traffic: no pod could take a request through the Service. That matches a
// prometheus trigger whose query ends in "or vector(0)" (the form the docs
// ask for). The controller evaluates triggers only while the target has
// replicas (see needsTriggers in internal/controller), so this is a target
// whose pods are all starting or failing, and pods that served within the
// window still count until their samples leave it.
func (e *Evaluator) evaluatePodMetrics(ctx context.Context, es *elastiv1alpha1.ElastiService, t elastiv1alpha1.ScaleTrigger) Result {
	md := t.Metadata
	if md.Threshold == nil {
		// The admission policy asks prometheus triggers only for a
		// threshold. A rate is never below 0, so without one this
		// trigger could never report idle: say so instead.
		return unhealthy(ReasonInvalidThreshold, "a podMetrics trigger needs metadata.threshold, the request rate per second below which the target is idle, such as 0.01")
	}
	limit, res := threshold(md.Threshold)
	if res != nil {
		return *res
	}
	slices, res := e.serviceSlices(ctx, es)
	if res != nil {
		return *res
	}
	s := scrapeSpec{metric: md.MetricName, labels: md.Labels, headers: md.Headers, timeout: e.timeout(), transport: e.transport()}
	creds, res := readCredentials(ctx, e.Secrets, es.Namespace, md)
	if res != nil {
		return *res
	}
	s.authorization = creds.header
	pods := readyPodTargets(slices, md.Port, metricsPath(md.Path))
	scraped := scrapeAll(ctx, pods, s)

	values := map[string]float64{}
	var failed, absent []podScrape
	for _, p := range scraped {
		switch {
		case errors.Is(p.err, errSeriesAbsent):
			absent = append(absent, p)
		case p.err != nil:
			failed = append(failed, p)
		default:
			values[p.pod.key] = p.value
		}
	}
	now := e.clock().Now()
	window := podMetricsWindow(es)
	key := historyKey{namespace: es.Namespace, name: es.Name, uid: es.UID, spec: historySpec(md)}
	// A pod without the series, beside one that has it or after one had
	// it within the window, has not counted yet (a pod an HPA added and
	// kept when it scaled in, one that restarted): its counter is 0. Never
	// seen on any pod, the name or the labels may be wrong, and the
	// trigger stays unhealthy.
	if len(values) > 0 || e.history.seen(key, now) {
		for _, p := range absent {
			values[p.pod.key] = 0
		}
	} else {
		failed = append(failed, absent...)
	}
	increase, since, covered := e.history.observe(key, now, window, values)
	rate := increase / window.Seconds()

	if len(failed) > 0 {
		return scrapeFailure(failed)
	}
	r := podMetricsResult(rate, limit, since, covered, len(pods) == 0, window, md)
	if perSecond, span := e.history.recentRate(key, now, RateWindow); span > 0 {
		r.Rate = &Rate{PerSecond: perSecond, Span: span, At: now}
	}
	return r
}

// podMetricsResult says what a podMetrics trigger's rate over its window
// means.
func podMetricsResult(rate, limit float64, since time.Time, covered, noPods bool, window time.Duration, md elastiv1alpha1.TriggerMetadata) Result {
	if !covered {
		// The message names times, not the seconds gathered so far, so that
		// it stays the same from one evaluation to the next.
		return Result{State: StateActive, Value: rate, Message: fmt.Sprintf(
			"not enough history yet: samples since %s cover less than the %d s window; idle is possible from %s",
			since.UTC().Format(time.RFC3339), int64(window/time.Second), since.Add(window).UTC().Format(time.RFC3339))}
	}
	what := "rate of " + md.MetricName
	if noPods {
		what = "no ready pod to scrape; rate of " + md.MetricName
	}
	if rate < limit {
		return Result{State: StateIdle, Value: rate, Message: fmt.Sprintf("%s over %d s below the threshold %s", what, int64(window/time.Second), thresholdText(md.Threshold))}
	}
	return Result{State: StateActive, Value: rate, Message: fmt.Sprintf("%s over %d s at or above the threshold %s", what, int64(window/time.Second), thresholdText(md.Threshold))}
}

// podMetricsWindow is the window a podMetrics trigger measures over: the
// cooldown period, as for a prometheus trigger's uptime check, and at least
// minPodMetricsWindow.
func podMetricsWindow(es *elastiv1alpha1.ElastiService) time.Duration {
	w := time.Duration(es.Spec.CooldownPeriod) * time.Second
	if w < minPodMetricsWindow {
		return minPodMetricsWindow
	}
	return w
}

func metricsPath(p string) string {
	if p == "" {
		return defaultMetricsPath
	}
	return p
}

// historySpec identifies what a trigger's samples measure.
func historySpec(md elastiv1alpha1.TriggerMetadata) string {
	keys := make([]string, 0, len(md.Labels))
	for k := range md.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%d|%s", md.MetricName, md.Port, metricsPath(md.Path))
	for _, k := range keys {
		fmt.Fprintf(&b, "|%s=%q", k, md.Labels[k])
	}
	return b.String()
}

// scrapeFailure words the failures of one round: the first pod by name,
// and how many more failed.
func scrapeFailure(failed []podScrape) Result {
	sort.Slice(failed, func(i, j int) bool { return failed[i].pod.name < failed[j].pod.name })
	f := failed[0]
	reason := ReasonPodScrapeFailed
	switch {
	case errors.Is(f.err, errMetricNotFound):
		reason = ReasonMetricNotFound
	case errors.Is(f.err, errPageInvalid):
		reason = ReasonMetricsPageInvalid
	}
	msg := fmt.Sprintf("pod %s (%s): %v", f.pod.name, f.pod.url, f.err)
	if n := len(failed) - 1; n > 0 {
		msg += fmt.Sprintf("; and %d more pods", n)
	}
	return unhealthy(reason, msg)
}

// podTarget is one ready pod to scrape.
type podTarget struct {
	// key identifies the pod in the history: its UID, or its address when
	// the endpoint names no pod.
	key string
	// name is namespace/name, or the address, for messages.
	name string
	url  string
}

// readyPodTargets lists the pods to scrape: each ready endpoint (see
// readyEndpoints) at http://<address>:<port><path>.
func readyPodTargets(slices []discoveryv1.EndpointSlice, port int32, path string) []podTarget {
	var out []podTarget
	for _, ep := range readyEndpoints(slices) {
		p := podTarget{key: ep.address, name: ep.address, url: "http://" + net.JoinHostPort(ep.address, strconv.Itoa(int(port))) + path}
		if ref := ep.endpoint.TargetRef; ref != nil && ref.Kind == "Pod" {
			p.name = ep.namespace + "/" + ref.Name
			if ref.Namespace != "" {
				p.name = ref.Namespace + "/" + ref.Name
			}
			if ref.UID != "" {
				p.key = string(ref.UID)
			}
		}
		out = append(out, p)
	}
	return out
}

// readyEndpoint is one ready endpoint of a Service's own EndpointSlices.
type readyEndpoint struct {
	endpoint discoveryv1.Endpoint
	// address is the endpoint's first address; namespace and slice are
	// its EndpointSlice's.
	address, namespace, slice string
}

// readyEndpoints lists the ready endpoints of the Service's own
// EndpointSlices (Elasti's proxy slices list resolvers, not pods), each
// pod once even when dual-stack slices list it twice (IPv4 preferred).
func readyEndpoints(slices []discoveryv1.EndpointSlice) []readyEndpoint {
	own := make([]discoveryv1.EndpointSlice, 0, len(slices))
	for _, s := range slices {
		if s.Labels[contract.LabelManagedBy] == contract.ManagedBy || s.AddressType == discoveryv1.AddressTypeFQDN {
			continue
		}
		own = append(own, s)
	}
	sort.Slice(own, func(i, j int) bool {
		if own[i].AddressType != own[j].AddressType {
			return own[i].AddressType == discoveryv1.AddressTypeIPv4
		}
		return own[i].Name < own[j].Name
	})
	seen := map[string]bool{}
	var out []readyEndpoint
	for _, s := range own {
		for _, ep := range s.Endpoints {
			if len(ep.Addresses) == 0 || !contract.EndpointReady(ep.Conditions) {
				continue
			}
			key := ep.Addresses[0]
			if ref := ep.TargetRef; ref != nil && ref.Kind == "Pod" && ref.UID != "" {
				key = string(ref.UID)
			}
			if seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, readyEndpoint{endpoint: ep, address: ep.Addresses[0], namespace: s.Namespace, slice: s.Name})
		}
	}
	return out
}
