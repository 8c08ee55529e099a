package scaling

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// summaries serves Summary API responses, one node's at a time.
type summaries struct {
	summary *statsv1alpha1.Summary
	err     error
	nodes   []string
}

func (s *summaries) Summary(_ context.Context, node string) (*statsv1alpha1.Summary, error) {
	s.nodes = append(s.nodes, node)
	return s.summary, s.err
}

func readSummary(t *testing.T, name string) *statsv1alpha1.Summary {
	t.Helper()
	s := &statsv1alpha1.Summary{}
	if err := json.Unmarshal(readFixture(t, "network/"+name), s); err != nil {
		t.Fatal(err)
	}
	return s
}

// networkFixture is what testdata/network/record.sh recorded from the
// local cluster's kubelet: the pods, three Summary API responses 30 s
// apart and when each was read.
type networkFixture struct {
	pods       []corev1.Pod
	summaries  [3]*statsv1alpha1.Summary
	at         [3]time.Time
	probeRates map[string]float64
}

func readNetworkFixture(t *testing.T) networkFixture {
	t.Helper()
	var pods corev1.PodList
	if err := json.Unmarshal(readFixture(t, "network/pods.json"), &pods); err != nil {
		t.Fatal(err)
	}
	times := strings.Fields(string(readFixture(t, "network/times.txt")))
	if len(times) != 3 {
		t.Fatalf("times.txt holds %d times, want 3", len(times))
	}
	f := networkFixture{pods: pods.Items, probeRates: map[string]float64{}}
	for i, s := range times {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		f.at[i] = v
		f.summaries[i] = readSummary(t, fmt.Sprintf("summary-t%d.json", i))
	}
	for i := range f.pods {
		f.probeRates[f.pods[i].Name] = probeBytesPerSecond(&f.pods[i])
	}
	return f
}

// networkService is an ElastiService with a network trigger over one pod,
// and that pod's Service's EndpointSlice.
func networkService(pod *corev1.Pod, threshold *elastiv1alpha1.Threshold) (*elastiv1alpha1.ElastiService, *discoveryv1.EndpointSlice) {
	es := &elastiv1alpha1.ElastiService{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: types.UID("es-" + pod.Name)},
		Spec: elastiv1alpha1.ElastiServiceSpec{
			Service: pod.Name, CooldownPeriod: 60,
			Triggers: []elastiv1alpha1.ScaleTrigger{{Type: elastiv1alpha1.TriggerTypeNetwork, Metadata: elastiv1alpha1.TriggerMetadata{Threshold: threshold}}},
		},
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name + "-x1", Labels: map[string]string{discoveryv1.LabelServiceName: pod.Name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{pod.Status.PodIP},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			NodeName:   ptr.To(pod.Spec.NodeName),
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		}},
	}
	return es, slice
}

// TestNetworkFixtureProbeModel checks the probe model against the kubelet's
// own figures: over the recorded minute, each idle pod received what its
// probes account for, give or take the threshold, and the pod that got a
// request every 5 s received more than the threshold beyond its probes.
func TestNetworkFixtureProbeModel(t *testing.T) {
	f := readNetworkFixture(t)
	// Each pod's bytes and the time the kubelet took them (cAdvisor's
	// sample, some seconds before the summary was read).
	rx := func(s *statsv1alpha1.Summary, name string) (float64, time.Time) {
		for i := range s.Pods {
			if s.Pods[i].PodRef.Name == name {
				v, ok := podRxBytes(&s.Pods[i])
				if !ok {
					t.Fatalf("no rxBytes for %s", name)
				}
				return float64(v), s.Pods[i].Network.Time.Time
			}
		}
		t.Fatalf("no pod %s in the summary", name)
		return 0, time.Time{}
	}
	excess := map[string]float64{}
	for name, rate := range f.probeRates {
		v0, t0 := rx(f.summaries[0], name)
		v2, t2 := rx(f.summaries[2], name)
		excess[name] = (v2-v0)/t2.Sub(t0).Seconds() - rate
		t.Logf("%s: probes %.1f B/s, beyond them %.1f B/s (over %s)", name, rate, excess[name], t2.Sub(t0))
	}
	if len(excess) != 4 {
		t.Fatalf("pods = %v, want noprobe, probe1s, probegrpc and probe10s", excess)
	}
	for _, idle := range []string{"noprobe", "probe1s", "probegrpc"} {
		if math.Abs(excess[idle]) >= DefaultNetworkThreshold {
			t.Errorf("%s, with probes only: %.1f B/s beyond the probes, want within ±%d", idle, excess[idle], DefaultNetworkThreshold)
		}
	}
	if excess["probe10s"] < DefaultNetworkThreshold {
		t.Errorf("probe10s, one request every 5 s: %.1f B/s beyond the probes, want at least %d", excess["probe10s"], DefaultNetworkThreshold)
	}
	if f.probeRates["noprobe"] != 0 || f.probeRates["probe1s"] <= f.probeRates["probe10s"] {
		t.Errorf("probe rates = %v: noprobe has no probe, and probe1s probes most", f.probeRates)
	}
}

func fixtureEvaluator(f networkFixture, pod *corev1.Pod, slice *discoveryv1.EndpointSlice) (*Evaluator, *summaries) {
	kubelet := &summaries{}
	live := fake.NewClientBuilder().WithObjects(slice, pod.DeepCopy()).Build()
	return &Evaluator{Endpoints: live, Pods: live, Kubelets: kubelet, Clock: clocktesting.NewFakePassiveClock(f.at[0])}, kubelet
}

// TestNetworkEvaluatorOnFixture runs the evaluator over the recorded
// summaries: the two idle pods' services report idle, the one with a
// request every 5 s reports active.
func TestNetworkEvaluatorOnFixture(t *testing.T) {
	f := readNetworkFixture(t)
	want := map[string]State{"noprobe": StateIdle, "probe1s": StateIdle, "probegrpc": StateIdle, "probe10s": StateActive}
	for i := range f.pods {
		pod := &f.pods[i]
		t.Run(pod.Name, func(t *testing.T) {
			es, slice := networkService(pod, nil)
			e, kubelet := fixtureEvaluator(f, pod, slice)
			var r Result
			for i := range f.summaries {
				e.Clock.(*clocktesting.FakePassiveClock).SetTime(f.at[i])
				kubelet.summary = f.summaries[i]
				r = e.Evaluate(context.Background(), es)
				if i < 2 && (r.State != StateActive || !strings.Contains(r.Message, "not enough history yet")) {
					t.Fatalf("evaluation %d = %+v, want active for want of history", i, r)
				}
			}
			if r.State != want[pod.Name] {
				t.Errorf("state = %s (%.1f B/s: %s), want %s", r.State, r.Value, r.Message, want[pod.Name])
			}
			t.Logf("%s: %.1f B/s beyond the probes", pod.Name, r.Value)
			if n := pod.Spec.NodeName; fmt.Sprint(kubelet.nodes) != fmt.Sprint([]string{n, n, n}) {
				t.Errorf("summaries read from nodes %v, want %s three times", kubelet.nodes, n)
			}
		})
	}
}

func TestNetworkEvaluatorUnhealthy(t *testing.T) {
	f := readNetworkFixture(t)
	var pod *corev1.Pod
	for i := range f.pods {
		if f.pods[i].Name == "probe10s" {
			pod = &f.pods[i]
		}
	}
	es, slice := networkService(pod, nil)
	noNetwork := readSummary(t, "summary-t0.json")
	for i := range noNetwork.Pods {
		noNetwork.Pods[i].Network = nil
	}
	notPod := slice.DeepCopy()
	notPod.Endpoints[0].TargetRef = nil
	for _, tc := range []struct {
		name    string
		slice   *discoveryv1.EndpointSlice
		kubelet *summaries
		reason  string
		message string
	}{
		{"kubelet refuses", slice, &summaries{err: fmt.Errorf("https://10.0.0.1:10250/stats/summary answered 403 Forbidden: grant nodes/stats: %w", errKubeletForbidden)}, ReasonKubeletUnavailable, "nodes/stats"},
		{"kubelet down", slice, &summaries{err: errors.New("connection refused")}, ReasonKubeletUnavailable, "node elasti-node: connection refused"},
		{"no network stats", slice, &summaries{summary: noNetwork}, ReasonNetworkStatsUnavailable, "reports no received bytes for pod measure/probe10s"},
		{"pod gone from the summary", slice, &summaries{summary: &statsv1alpha1.Summary{}}, ReasonNetworkStatsUnavailable, "reports no received bytes"},
		{"endpoint without a pod", notPod, &summaries{summary: f.summaries[0]}, ReasonNetworkStatsUnavailable, "names no pod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			live := fake.NewClientBuilder().WithObjects(tc.slice, pod.DeepCopy()).Build()
			e := &Evaluator{Endpoints: live, Pods: live, Kubelets: tc.kubelet, Clock: clocktesting.NewFakePassiveClock(f.at[0])}
			r := e.Evaluate(context.Background(), es)
			if r.State != StateUnhealthy || r.Reason != tc.reason || !strings.Contains(r.Message, tc.message) {
				t.Errorf("result = %+v, want unhealthy %s with %q", r, tc.reason, tc.message)
			}
		})
	}
}

func TestNetworkThresholdFromSpec(t *testing.T) {
	f := readNetworkFixture(t)
	for i := range f.pods {
		if f.pods[i].Name != "probe10s" {
			continue
		}
		// probe10s received about 37 B/s beyond its probes: a threshold of
		// 100 calls that idle, the default calls it active.
		es, slice := networkService(&f.pods[i], ptr.To(elastiv1alpha1.Threshold("100")))
		e, kubelet := fixtureEvaluator(f, &f.pods[i], slice)
		var r Result
		for j := range f.summaries {
			e.Clock.(*clocktesting.FakePassiveClock).SetTime(f.at[j])
			kubelet.summary = f.summaries[j]
			r = e.Evaluate(context.Background(), es)
		}
		if r.State != StateIdle {
			t.Errorf("with threshold 100: %+v, want idle", r)
		}
	}
}

// TestNetworkPodSawtooth feeds a pod that gets an HTTP probe every second
// (463 bytes each) and is read at uneven times: what goes beyond the
// probes stays under one probe's bytes, while 42 B/s of traffic on top
// shows at that rate.
func TestNetworkPodSawtooth(t *testing.T) {
	const probe, rate = 463.0, 463.0
	start := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, traffic := range []float64{0, 42} {
		received := func(at time.Time) uint64 {
			secs := at.Sub(start).Seconds()
			return uint64(math.Floor(secs)*probe + secs*traffic)
		}
		p := newNetworkPod(networkSample{at: start, rxBytes: 0, probeRate: rate, started: start})
		at := start
		var mid float64
		for at.Before(start.Add(20 * time.Minute)) {
			at = at.Add(time.Duration(5+rng.IntN(25000)) * time.Millisecond)
			p.observe(networkSample{at: at, rxBytes: received(at), probeRate: rate, started: start})
			if mid == 0 && at.After(start.Add(10*time.Minute)) {
				mid = p.total
			}
		}
		got := (p.total - mid) / at.Sub(start.Add(10*time.Minute)).Seconds()
		switch {
		case traffic == 0 && p.total > probe:
			t.Errorf("probes only: %.0f bytes beyond the probes after 20 min, want at most one probe's %.0f", p.total, probe)
		case traffic > 0 && math.Abs(got-traffic) > 5:
			t.Errorf("probes and %.0f B/s: %.1f B/s beyond the probes over the last 10 min", traffic, got)
		}
	}
}

func TestNetworkPodCounterReset(t *testing.T) {
	start := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	p := newNetworkPod(networkSample{at: start, rxBytes: 10000, started: start.Add(-time.Hour)})
	p.observe(networkSample{at: start.Add(10 * time.Second), rxBytes: 10500})
	p.observe(networkSample{at: start.Add(10 * time.Second), rxBytes: 10500}) // the same sample again
	if p.total != 10500 {
		t.Fatalf("total = %.0f, want 10500", p.total)
	}
	// The sandbox was re-created: its counter restarted at 0 and is at 300.
	p.observe(networkSample{at: start.Add(20 * time.Second), rxBytes: 300})
	if p.total != 10800 {
		t.Errorf("after the reset total = %.0f, want 10800: the new counter's 300 bytes all count", p.total)
	}
}

func TestProbeBytesPerSecond(t *testing.T) {
	pod := &corev1.Pod{
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}}},
				LivenessProbe:  &corev1.Probe{PeriodSeconds: 5, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("http")}}},
				StartupProbe:   &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}},
			}},
			InitContainers: []corev1.Container{
				{Name: "sidecar", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 9090}}}},
				{Name: "init", ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{}}}},
				{Name: "exec", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}},
			},
		},
		Status: corev1.PodStatus{PodIP: "10.244.0.3"},
	}
	// 463 for GET /healthz at 10.244.0.3:8080 each second, 280 every 5 s,
	// a gRPC probe every 10 s (the default period); no startup, plain init
	// or exec probe.
	want := 463.0 + 280.0/5 + 1075.0/10
	if got := probeBytesPerSecond(pod); math.Abs(got-want) > 1e-9 {
		t.Errorf("probe bytes per second = %v, want %v", got, want)
	}
}
