package scaling

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// Reasons for an unhealthy network trigger, used as condition reasons.
const (
	ReasonKubeletUnavailable      = "KubeletUnavailable"
	ReasonNetworkStatsUnavailable = "NetworkStatsUnavailable"
)

// DefaultNetworkThreshold is a network trigger's threshold when it names
// none: the bytes per second, beyond its pods' probes, below which a
// target is idle. It was measured on the local cluster (docs/triggers.md,
// "How the network threshold was chosen"; the fixtures in
// testdata/network): a pod with probes only received from -8 to 15 B/s
// beyond what its probes account for, and one small keep-alive HTTP
// request every 5 s added 36 to 59 B/s. 20 sits between, with room for a
// metrics scrape every 30 s or less often.
const DefaultNetworkThreshold = 20

// Received bytes of one kubelet probe, measured on the local cluster
// (kubelet v1.37, testdata/network): the frames of a new TCP connection,
// of the request and of its close, as the pod's eth0 counts them.
const (
	// httpProbeBytes is an HTTP probe's frames around its request line and
	// headers; add the path, the Host header's value and custom headers.
	// GET /healthz to 10.244.0.3:8080 measured 463 bytes.
	httpProbeBytes = 440
	// tcpProbeBytes is a TCP probe: connect, then close.
	tcpProbeBytes = 280
	// grpcProbeBytes is a gRPC health probe, the HTTP/2 set-up included;
	// add the service name. Two runs measured 1060 and 1090 bytes.
	grpcProbeBytes = 1075
	// defaultProbePeriod is a probe's period when it names none.
	defaultProbePeriod = 10 * time.Second
)

// maxNetworkSlack bounds, in seconds of probe traffic, how far a pod's
// received bytes may fall behind its probes' estimate before the shortfall
// is forgotten (see networkPod.observe).
const maxNetworkSlack = 10 * time.Second

// SummaryReader reads a node's Summary API. KubeletSummaries is the
// operator's.
type SummaryReader interface {
	Summary(ctx context.Context, nodeName string) (*statsv1alpha1.Summary, error)
}

// evaluateNetwork evaluates a network trigger: the bytes the Service's
// ready pods received over the window (the cooldown period, at least
// minPodMetricsWindow), beyond what their readiness and liveness probes
// account for, summed and divided by the window, below the threshold is
// idle.
//
// The bytes come from the kubelets' Summary API (each pod's interfaces'
// rxBytes), read on every evaluation; the rate comes from the Evaluator's
// own history, as for podMetrics: until it covers a whole window the
// trigger reports active. A pod whose stats cannot be read makes the
// trigger unhealthy, which never allows a scale-down.
func (e *Evaluator) evaluateNetwork(ctx context.Context, es *elastiv1alpha1.ElastiService, t elastiv1alpha1.ScaleTrigger) Result {
	limit := e.networkThreshold()
	if t.Metadata.Threshold != nil {
		v, res := threshold(t.Metadata.Threshold)
		if res != nil {
			return *res
		}
		limit = v
	}
	thresholdText := strconv.FormatFloat(limit, 'g', -1, 64)
	if e.Kubelets == nil || e.Pods == nil {
		return unhealthy(ReasonKubeletUnavailable, "the operator has no kubelet or Pod reader")
	}
	slices, res := e.serviceSlices(ctx, es)
	if res != nil {
		return *res
	}
	refs, res := readyPodRefs(slices)
	if res != nil {
		return *res
	}
	pods := &corev1.PodList{}
	if len(refs) > 0 {
		if err := e.Pods.List(ctx, pods, client.InNamespace(es.Namespace)); err != nil {
			return unhealthy(ReasonKubeletUnavailable, fmt.Sprintf("list Pods in %s: %v", es.Namespace, err))
		}
	}
	byUID := make(map[string]*corev1.Pod, len(pods.Items))
	for i := range pods.Items {
		byUID[string(pods.Items[i].UID)] = &pods.Items[i]
	}

	now := e.clock().Now()
	samples, res := e.readNetwork(ctx, refs, byUID)
	if res != nil {
		return *res
	}
	window := podMetricsWindow(es)
	key := historyKey{namespace: es.Namespace, name: es.Name, uid: es.UID, spec: "network"}
	values := e.network.observe(key, now, samples)
	increase, since, covered := e.history.observe(key, now, window, values)
	rate := increase / window.Seconds()
	if !covered {
		return Result{State: StateActive, Value: rate, Message: fmt.Sprintf(
			"not enough history yet: samples since %s cover less than the %d s window; idle is possible from %s",
			since.UTC().Format(time.RFC3339), int64(window/time.Second), since.Add(window).UTC().Format(time.RFC3339))}
	}
	what := "bytes received beyond the probes"
	if len(refs) == 0 {
		what = "no ready pod to read; " + what
	}
	if rate < limit {
		return Result{State: StateIdle, Value: rate, Message: fmt.Sprintf("%s over %d s below the threshold %s B/s", what, int64(window/time.Second), thresholdText)}
	}
	return Result{State: StateActive, Value: rate, Message: fmt.Sprintf("%s over %d s at or above the threshold %s B/s", what, int64(window/time.Second), thresholdText)}
}

func (e *Evaluator) networkThreshold() float64 {
	if e.NetworkThreshold > 0 {
		return e.NetworkThreshold
	}
	return DefaultNetworkThreshold
}

// serviceSlices lists the EndpointSlices of the ElastiService's Service.
func (e *Evaluator) serviceSlices(ctx context.Context, es *elastiv1alpha1.ElastiService) ([]discoveryv1.EndpointSlice, *Result) {
	if e.Endpoints == nil {
		r := unhealthy(ReasonEndpointsUnavailable, "the operator has no EndpointSlice reader")
		return nil, &r
	}
	slices := &discoveryv1.EndpointSliceList{}
	if err := e.Endpoints.List(ctx, slices, client.InNamespace(es.Namespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: es.Spec.Service}); err != nil {
		r := unhealthy(ReasonEndpointsUnavailable, fmt.Sprintf("list EndpointSlices of Service %s/%s: %v", es.Namespace, es.Spec.Service, err))
		return nil, &r
	}
	return slices.Items, nil
}

// podRef is one ready pod a network trigger reads.
type podRef struct {
	uid, namespace, name, node string
}

// readyPodRefs lists the Service's ready pods. An endpoint that names no
// pod (a Service whose EndpointSlices someone else writes) cannot be
// read from a kubelet: the trigger is then unhealthy.
func readyPodRefs(slices []discoveryv1.EndpointSlice) ([]podRef, *Result) {
	var out []podRef
	for _, ep := range readyEndpoints(slices) {
		ref := ep.endpoint.TargetRef
		if ref == nil || ref.Kind != "Pod" || ref.UID == "" {
			r := unhealthy(ReasonNetworkStatsUnavailable, fmt.Sprintf("endpoint %s of EndpointSlice %s names no pod; a network trigger reads pods' stats from their kubelets", ep.address, ep.slice))
			return nil, &r
		}
		p := podRef{uid: string(ref.UID), namespace: ref.Namespace, name: ref.Name}
		if p.namespace == "" {
			p.namespace = ep.namespace
		}
		if ep.endpoint.NodeName != nil {
			p.node = *ep.endpoint.NodeName
		}
		out = append(out, p)
	}
	return out, nil
}

// networkSample is one pod's reading.
type networkSample struct {
	// at is when the kubelet took it (cAdvisor refreshes it every 10 to 15
	// s), or when it was read, for a kubelet that gives no time.
	at      time.Time
	rxBytes uint64
	// probeRate is the bytes per second the pod's probes are expected to
	// send it (probeBytesPerSecond).
	probeRate float64
	// started is when the pod started, from the kubelet.
	started time.Time
}

// readNetwork reads every pod's received bytes, one Summary API request
// per node.
func (e *Evaluator) readNetwork(ctx context.Context, refs []podRef, pods map[string]*corev1.Pod) (map[string]networkSample, *Result) {
	byNode := map[string][]podRef{}
	for _, p := range refs {
		if pod := pods[p.uid]; pod != nil && pod.Spec.NodeName != "" {
			p.node = pod.Spec.NodeName
		}
		if p.node == "" {
			r := unhealthy(ReasonNetworkStatsUnavailable, fmt.Sprintf("pod %s/%s has no node", p.namespace, p.name))
			return nil, &r
		}
		byNode[p.node] = append(byNode[p.node], p)
	}
	nodes := make([]string, 0, len(byNode))
	for n := range byNode {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	out := make(map[string]networkSample, len(refs))
	now := e.clock().Now()
	for _, node := range nodes {
		rctx, cancel := context.WithTimeout(ctx, e.timeout())
		summary, err := e.Kubelets.Summary(rctx, node)
		cancel()
		if err != nil {
			r := unhealthy(ReasonKubeletUnavailable, fmt.Sprintf("node %s: %v", node, err))
			if errors.Is(err, errKubeletForbidden) {
				r.Message = err.Error()
			}
			return nil, &r
		}
		stats := make(map[string]*statsv1alpha1.PodStats, len(summary.Pods))
		for i := range summary.Pods {
			stats[summary.Pods[i].PodRef.UID] = &summary.Pods[i]
		}
		for _, p := range byNode[node] {
			rx, ok := podRxBytes(stats[p.uid])
			if !ok {
				r := unhealthy(ReasonNetworkStatsUnavailable, fmt.Sprintf(
					"the kubelet of node %s reports no received bytes for pod %s/%s; its stats provider may not see pods' network (docs/triggers.md)", node, p.namespace, p.name))
				return nil, &r
			}
			s := networkSample{at: now, rxBytes: rx, started: stats[p.uid].StartTime.Time}
			if t := stats[p.uid].Network.Time.Time; t.After(s.started) && !t.After(now) {
				s.at = t
			}
			if pod := pods[p.uid]; pod != nil {
				s.probeRate = probeBytesPerSecond(pod)
			}
			out[p.uid] = s
		}
	}
	return out, nil
}

// podRxBytes sums the bytes a pod received on all its interfaces, or on
// its default one when the kubelet lists none.
func podRxBytes(ps *statsv1alpha1.PodStats) (uint64, bool) {
	if ps == nil || ps.Network == nil {
		return 0, false
	}
	n := ps.Network
	if len(n.Interfaces) == 0 {
		if n.RxBytes == nil {
			return 0, false
		}
		return *n.RxBytes, true
	}
	var sum uint64
	for _, i := range n.Interfaces {
		if i.RxBytes == nil {
			return 0, false
		}
		sum += *i.RxBytes
	}
	return sum, true
}

// probeBytesPerSecond estimates the bytes per second a pod's readiness and
// liveness probes send it, from the probes' definitions and the sizes
// measured on the local cluster (httpProbeBytes and the rest). Startup
// probes stop once they succeed and exec probes use no network: neither
// counts. HTTPS probes are counted as HTTP ones, which leaves out their TLS
// handshake: the estimate is then low, which errs towards awake.
func probeBytesPerSecond(pod *corev1.Pod) float64 {
	var rate float64
	add := func(c corev1.Container) {
		for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
			if p == nil {
				continue
			}
			period := defaultProbePeriod
			if p.PeriodSeconds > 0 {
				period = time.Duration(p.PeriodSeconds) * time.Second
			}
			rate += float64(probeBytes(pod, c, p)) / period.Seconds()
		}
	}
	for _, c := range pod.Spec.Containers {
		add(c)
	}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(c) // a sidecar, probed for the pod's lifetime
		}
	}
	return rate
}

// probeBytes estimates one probe's received bytes.
func probeBytes(pod *corev1.Pod, c corev1.Container, p *corev1.Probe) int {
	switch {
	case p.HTTPGet != nil:
		h := p.HTTPGet
		host := h.Host
		if host == "" {
			host = pod.Status.PodIP
		}
		port := h.Port.String()
		if n, ok := namedPort(c, h.Port.StrVal); ok {
			port = strconv.Itoa(int(n))
		}
		n := httpProbeBytes + len(h.Path) + len(net.JoinHostPort(host, port))
		for _, hd := range h.HTTPHeaders {
			n += len(hd.Name) + len(": ") + len(hd.Value) + len("\r\n")
		}
		return n
	case p.TCPSocket != nil:
		return tcpProbeBytes
	case p.GRPC != nil:
		n := grpcProbeBytes
		if p.GRPC.Service != nil {
			n += len(*p.GRPC.Service)
		}
		return n
	}
	return 0
}

func namedPort(c corev1.Container, name string) (int32, bool) {
	if name == "" {
		return 0, false
	}
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort, true
		}
	}
	return 0, false
}

// networkPods is the Evaluator's memory of network triggers' pods, beside
// the counter history: for each pod, the bytes it received beyond its
// probes, as a counter that never goes down. Its zero value is ready.
type networkPods struct {
	mu        sync.Mutex
	byKey     map[historyKey]map[string]*networkPod
	lastSweep time.Time
}

// networkForget is how long a pod's state outlives its last reading.
const networkForget = 15 * time.Minute

// observe turns one round of readings into the counter values the history
// takes, by pod UID.
func (n *networkPods) observe(key historyKey, now time.Time, samples map[string]networkSample) map[string]float64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.byKey == nil {
		n.byKey = map[historyKey]map[string]*networkPod{}
	}
	if now.Sub(n.lastSweep) >= sweepEvery {
		n.lastSweep = now
		for k, pods := range n.byKey {
			for uid, p := range pods {
				if now.Sub(p.seen) > networkForget {
					delete(pods, uid)
				}
			}
			if len(pods) == 0 {
				delete(n.byKey, k)
			}
		}
	}
	pods := n.byKey[key]
	if pods == nil {
		pods = map[string]*networkPod{}
		n.byKey[key] = pods
	}
	out := make(map[string]float64, len(samples))
	for uid, s := range samples {
		p := pods[uid]
		if p == nil {
			p = newNetworkPod(s)
			pods[uid] = p
		} else {
			p.observe(s)
		}
		p.seen = now
		out[uid] = p.total
	}
	return out
}

// networkPod is one pod's received bytes beyond its probes.
//
// Probes arrive in bursts (one every period), so the pod's bytes run ahead
// of a steady estimate just after a probe and behind it just before the
// next. slack is how far the bytes are behind the estimate since total
// last grew; only bytes that make up the slack and go beyond it add to
// total. total is then the running maximum of (bytes − estimate), which
// stops growing once it has seen the top of the probes' sawtooth, while
// any traffic beyond the probes raises it. The slack is bounded by
// maxNetworkSlack of probe traffic, so that an estimate that runs high
// cannot hide more than that much later traffic.
type networkPod struct {
	// at is the time of the last sample, seen when it was last read.
	at, seen time.Time
	raw      uint64
	slack    float64
	total    float64
}

// newNetworkPod starts a pod's state: its bytes since it started beyond
// its probes' estimate over that time, or 0. (A pod already there when
// the trigger's history starts counts from its first sample whatever
// this is: see counterHistory.record.)
func newNetworkPod(s networkSample) *networkPod {
	total := float64(s.rxBytes)
	if !s.started.IsZero() && s.at.After(s.started) {
		total -= s.probeRate * s.at.Sub(s.started).Seconds()
	}
	return &networkPod{at: s.at, raw: s.rxBytes, total: max(total, 0)}
}

// observe takes a pod's new sample; the same sample again (the kubelet had
// not refreshed it) adds nothing.
func (p *networkPod) observe(s networkSample) {
	now := s.at
	if !now.After(p.at) {
		return
	}
	received := float64(s.rxBytes) - float64(p.raw)
	if s.rxBytes < p.raw {
		// The counter restarted (the pod's sandbox was re-created): all
		// it holds is new.
		received = float64(s.rxBytes)
	}
	p.slack += received - s.probeRate*now.Sub(p.at).Seconds()
	if p.slack > 0 {
		p.total += p.slack
		p.slack = 0
	}
	if floor := -s.probeRate * maxNetworkSlack.Seconds(); p.slack < floor {
		p.slack = floor
	}
	p.at, p.raw = now, s.rxBytes
}
