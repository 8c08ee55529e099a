//go:build integration

package scaling_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/scaling"
	"elasti.dev/elasti/internal/testenv/estest"
)

// summaryLimit is scaling's maxSummaryBytes. TestKubeletSummaries serves a
// response of exactly this size and one a byte longer, so a limit that
// moves either way fails it.
const summaryLimit = 16 << 20

// kubeletToken is the operator's bearer token in these tests.
const kubeletToken = "token-of-the-operator"

// fakeKubelet is a kubelet's Summary API on 127.0.0.1, over TLS, that
// answers only requests with the operator's token: 401 without a token and
// 403 with another one, as a kubelet with Webhook authorization does.
type fakeKubelet struct {
	srv *httptest.Server
	// caFile holds the server's CA certificate, and caPEM the same bytes.
	caFile string
	caPEM  []byte
	// authorized counts the requests that carried the token.
	authorized atomic.Int64

	mu   sync.Mutex
	body []byte
}

func startKubelet(t *testing.T) *fakeKubelet {
	t.Helper()
	k := &fakeKubelet{}
	k.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/stats/summary" {
			http.NotFound(w, r)
			return
		}
		switch r.Header.Get("Authorization") {
		case "":
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		case "Bearer " + kubeletToken:
		default:
			http.Error(w, "Forbidden (user=system:serviceaccount:x:y, verb=get, resource=nodes, subresource=(stats, metrics))", http.StatusForbidden)
			return
		}
		k.authorized.Add(1)
		k.mu.Lock()
		body := k.body
		k.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	// The handshakes that a test refuses on purpose are not news.
	k.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	k.srv.StartTLS()
	t.Cleanup(k.srv.Close)
	if host, _, _ := net.SplitHostPort(k.srv.Listener.Addr().String()); host != "127.0.0.1" {
		t.Fatalf("the fake kubelet listens on %s, want 127.0.0.1", host)
	}
	k.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: k.srv.Certificate().Raw})
	k.caFile = filepath.Join(t.TempDir(), "kubelet-ca.crt")
	if err := os.WriteFile(k.caFile, k.caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return k
}

// serve sets what /stats/summary answers.
func (k *fakeKubelet) serve(body []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.body = body
}

func (k *fakeKubelet) port() int32 {
	return int32(k.srv.Listener.Addr().(*net.TCPAddr).Port)
}

// otherCA is a CA certificate that signed nothing the fake kubelet serves.
func otherCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "some other CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// kubeletNode creates a Node, with addresses and the kubelet's port written
// to its status as a kubelet writes them.
func kubeletNode(t *testing.T, name string, port int32, addresses ...corev1.NodeAddress) {
	t.Helper()
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := k8s.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, node) })
	node.Status.Addresses = addresses
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = port
	if err := k8s.Status().Update(ctx, node); err != nil {
		t.Fatalf("update the status of Node %s: %v", name, err)
	}
}

var loopback = corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}

// operatorSummaries builds the KubeletSummaries of the operator, reading Nodes
// from the real API server, with a rest.Config that carries token and,
// as the API server's CA, apiServerCA.
func operatorSummaries(t *testing.T, token string, apiServerCA []byte, caFile string, insecure bool) *scaling.KubeletSummaries {
	t.Helper()
	cfg := &rest.Config{
		Host: "https://api.invalid:6443", BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{CAData: apiServerCA},
	}
	rt, err := scaling.KubeletTransport(cfg, caFile, insecure)
	if err != nil {
		t.Fatal(err)
	}
	return &scaling.KubeletSummaries{Nodes: k8s, Transport: rt}
}

// summaryOfSize is a Summary API response of exactly n bytes: a node
// whose name pads it.
func summaryOfSize(n int) []byte {
	const head, tail = `{"node":{"nodeName":"`, `","startTime":null},"pods":[]}`
	return []byte(head + strings.Repeat("n", n-len(head)-len(tail)) + tail)
}

// TestKubeletSummaries reads the Summary API of a fake kubelet at the
// address and port of Nodes in a real API server, with the operator's
// token and each way of trusting the kubelet's certificate.
func TestKubeletSummaries(t *testing.T) {
	kubelet := startKubelet(t)
	t0, err := os.ReadFile("testdata/network/summary-t0.json")
	if err != nil {
		t.Fatal(err)
	}
	kubelet.serve(t0)
	kubeletNode(t, "kubelet-at-loopback", kubelet.port(), loopback)
	// A Node whose kubelet wrote its port but no address.
	kubeletNode(t, "kubelet-no-addresses", kubelet.port())
	other := otherCA(t)

	// read reads a node's Summary API, giving up after 30 s.
	read := func(t *testing.T, s *scaling.KubeletSummaries, node string) (*statsv1alpha1.Summary, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return s.Summary(ctx, node)
	}
	// parsed checks that got is summary-t0.json: its pods, and the bytes
	// probe10s had received.
	parsed := func(t *testing.T, got *statsv1alpha1.Summary) {
		t.Helper()
		var names []string
		var rx uint64
		for _, p := range got.Pods {
			names = append(names, p.PodRef.Namespace+"/"+p.PodRef.Name)
			if p.PodRef.Name == "probe10s" && p.Network != nil && p.Network.RxBytes != nil {
				rx = *p.Network.RxBytes
			}
		}
		// What the fixture holds, read here on its own.
		var fixture struct {
			Pods []struct {
				PodRef  struct{ Namespace, Name string } `json:"podRef"`
				Network struct {
					RxBytes uint64 `json:"rxBytes"`
				} `json:"network"`
			} `json:"pods"`
		}
		if err := json.Unmarshal(t0, &fixture); err != nil {
			t.Fatal(err)
		}
		var want []string
		var wantRx uint64
		for _, p := range fixture.Pods {
			want = append(want, p.PodRef.Namespace+"/"+p.PodRef.Name)
			if p.PodRef.Name == "probe10s" {
				wantRx = p.Network.RxBytes
			}
		}
		if strings.Join(names, " ") != strings.Join(want, " ") || len(want) != 5 || got.Node.NodeName != "elasti-node" {
			t.Errorf("summary of node %q with pods %v, want elasti-node with %v", got.Node.NodeName, names, want)
		}
		if rx != wantRx || rx == 0 {
			t.Errorf("probe10s received %d bytes, want %d (summary-t0.json)", rx, wantRx)
		}
	}

	t.Run("caFile trusted over the API server's CA", func(t *testing.T) {
		before := kubelet.authorized.Load()
		got, err := read(t, operatorSummaries(t, kubeletToken, other, kubelet.caFile, false), "kubelet-at-loopback")
		if err != nil {
			t.Fatal(err)
		}
		parsed(t, got)
		if n := kubelet.authorized.Load() - before; n != 1 {
			t.Errorf("the kubelet answered %d requests with the token, want 1", n)
		}
	})
	t.Run("no caFile: the API server's CA", func(t *testing.T) {
		got, err := read(t, operatorSummaries(t, kubeletToken, kubelet.caPEM, "", false), "kubelet-at-loopback")
		if err != nil {
			t.Fatal(err)
		}
		parsed(t, got)
	})
	t.Run("no caFile and an API server CA that did not sign the kubelet's certificate", func(t *testing.T) {
		before := kubelet.authorized.Load()
		_, err := read(t, operatorSummaries(t, kubeletToken, other, "", false), "kubelet-at-loopback")
		var unknown x509.UnknownAuthorityError
		if !errors.As(err, &unknown) {
			t.Fatalf("err = %v, want a certificate signed by an unknown authority", err)
		}
		if n := kubelet.authorized.Load() - before; n != 0 {
			t.Errorf("the token reached the kubelet %d times over an unverified connection", n)
		}
	})
	t.Run("insecure", func(t *testing.T) {
		got, err := read(t, operatorSummaries(t, kubeletToken, other, "", true), "kubelet-at-loopback")
		if err != nil {
			t.Fatal(err)
		}
		parsed(t, got)
	})

	for _, tc := range []struct {
		name, token, status string
	}{
		{"wrong token", "someone-elses-token", "403 Forbidden"},
		{"no token", "", "401 Unauthorized"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := read(t, operatorSummaries(t, tc.token, nil, kubelet.caFile, false), "kubelet-at-loopback")
			// errKubeletForbidden is unexported: what it wraps is its text.
			if err == nil || errors.Unwrap(err) == nil || errors.Unwrap(err).Error() != "refused by the kubelet" {
				t.Fatalf("err = %v, want one that wraps errKubeletForbidden", err)
			}
			for _, want := range []string{"/stats/summary answered " + tc.status, "nodes/stats"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err = %v, want it to say %q", err, want)
				}
			}
		})
	}

	t.Run("Node without addresses", func(t *testing.T) {
		_, err := read(t, operatorSummaries(t, kubeletToken, nil, kubelet.caFile, false), "kubelet-no-addresses")
		if err == nil || err.Error() != "node kubelet-no-addresses has no InternalIP, ExternalIP or Hostname address" {
			t.Errorf("err = %v, want that the Node has no address", err)
		}
	})
	t.Run("missing Node", func(t *testing.T) {
		_, err := read(t, operatorSummaries(t, kubeletToken, nil, kubelet.caFile, false), "kubelet-nowhere")
		if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "get Node kubelet-nowhere") {
			t.Errorf("err = %v, want a NotFound that names Node kubelet-nowhere", err)
		}
	})

	// The responses below replace summary-t0.json: no subtest runs after them.
	t.Run("not a Summary", func(t *testing.T) {
		kubelet.serve([]byte("<html>a proxy's login page</html>"))
		_, err := read(t, operatorSummaries(t, kubeletToken, nil, kubelet.caFile, false), "kubelet-at-loopback")
		if err == nil || !strings.Contains(err.Error(), "answered no Summary API response") {
			t.Errorf("err = %v, want that the kubelet answered no Summary API response", err)
		}
	})
	t.Run("at the size limit", func(t *testing.T) {
		kubelet.serve(summaryOfSize(summaryLimit))
		got, err := read(t, operatorSummaries(t, kubeletToken, nil, kubelet.caFile, false), "kubelet-at-loopback")
		if err != nil {
			t.Fatalf("a response of %d bytes: %v", summaryLimit, err)
		}
		if len(got.Node.NodeName) < summaryLimit-100 {
			t.Errorf("node name of %d bytes, want the padding of the %d-byte response", len(got.Node.NodeName), summaryLimit)
		}
	})
	t.Run("beyond the size limit", func(t *testing.T) {
		kubelet.serve(summaryOfSize(summaryLimit + 1))
		_, err := read(t, operatorSummaries(t, kubeletToken, nil, kubelet.caFile, false), "kubelet-at-loopback")
		if want := fmt.Sprintf("answered more than %d bytes", summaryLimit); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want %q", err, want)
		}
	})
}

// networkRecording is testdata/network: pod probe10s and the three Summary
// API responses with when they were read.
type networkRecording struct {
	probe10s  corev1.Pod
	summaries [3]*statsv1alpha1.Summary
	at        [3]time.Time
}

func readNetworkRecording(t *testing.T) networkRecording {
	t.Helper()
	read := func(name string, v any) {
		b, err := os.ReadFile("testdata/network/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	var rec networkRecording
	var pods corev1.PodList
	read("pods.json", &pods)
	for _, p := range pods.Items {
		if p.Name == "probe10s" {
			rec.probe10s = p
		}
	}
	if rec.probe10s.Name == "" {
		t.Fatal("pods.json has no pod probe10s")
	}
	times, err := os.ReadFile("testdata/network/times.txt")
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(times))
	if len(fields) != len(rec.at) {
		t.Fatalf("times.txt holds %d times, want %d", len(fields), len(rec.at))
	}
	for i, f := range fields {
		if rec.at[i], err = time.Parse(time.RFC3339Nano, f); err != nil {
			t.Fatal(err)
		}
		rec.summaries[i] = &statsv1alpha1.Summary{}
		read(fmt.Sprintf("summary-t%d.json", i), rec.summaries[i])
	}
	return rec
}

// TestNetworkEvaluatorThroughAPIServerAndKubelet evaluates network
// triggers as the operator does: the Service's EndpointSlice and the Pod
// from a real API server, the Node's kubelet address from it too, and the
// recorded Summary API responses from a kubelet at that address, the
// recorded pod renamed to the one created here. The pod got a request
// every 5 s: active with the default threshold, idle with 100 B/s.
func TestNetworkEvaluatorThroughAPIServerAndKubelet(t *testing.T) {
	ctx := context.Background()
	rec := readNetworkRecording(t)
	ns := namespace(t, "network")
	kubelet := startKubelet(t)
	const nodeName = "kubelet-network-trigger"
	kubeletNode(t, nodeName, kubelet.port(), loopback)

	// The recorded pod's containers with their probes; it stays Pending,
	// as there is no kubelet to run it, which the trigger does not mind.
	recorded := rec.probe10s.Spec.Containers[0]
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-0", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{
			Name: recorded.Name, Image: recorded.Image, Ports: recorded.Ports,
			ReadinessProbe: recorded.ReadinessProbe, LivenessProbe: recorded.LivenessProbe,
		}}},
	}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// The recorded pod's IP: its HTTP probe's Host header, and so its
	// estimated bytes, depends on it.
	podIP := rec.probe10s.Status.PodIP
	pod.Status.PodIP, pod.Status.PodIPs = podIP, []corev1.PodIP{{IP: podIP}}
	if err := k8s.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: "web-abcde", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{podIP},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			NodeName:   ptr.To(nodeName),
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod.Name, UID: pod.UID},
		}},
	}
	if err := k8s.Create(ctx, slice); err != nil {
		t.Fatal(err)
	}

	// responses are the recorded summaries with probe10s as the pod above.
	var responses [3][]byte
	for i, s := range rec.summaries {
		renamed := 0
		for j := range s.Pods {
			if s.Pods[j].PodRef.Name == "probe10s" {
				s.Pods[j].PodRef = statsv1alpha1.PodReference{Name: pod.Name, Namespace: ns, UID: string(pod.UID)}
				renamed++
			}
		}
		if renamed != 1 {
			t.Fatalf("summary-t%d.json lists probe10s %d times, want once", i, renamed)
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		responses[i] = b
	}

	network := func(name string, threshold *elastiv1alpha1.Threshold) *elastiv1alpha1.ElastiService {
		es := estest.New(ns, name, estest.Service("web"), estest.Cooldown(60))
		es.UID = types.UID("uid-" + name)
		es.Spec.Triggers = []elastiv1alpha1.ScaleTrigger{{Type: elastiv1alpha1.TriggerTypeNetwork, Metadata: elastiv1alpha1.TriggerMetadata{Threshold: threshold}}}
		return es
	}
	busy := network("web", nil)
	lenient := network("web-lenient", ptr.To(elastiv1alpha1.Threshold("100")))
	clk := clocktesting.NewFakePassiveClock(rec.at[0])
	summaries := operatorSummaries(t, kubeletToken, nil, kubelet.caFile, false)
	summaries.Clock = clk
	ev := &scaling.Evaluator{Endpoints: k8s, Pods: k8s, Clock: clk, Kubelets: summaries}
	var got, gotLenient scaling.Result
	for i := range responses {
		clk.SetTime(rec.at[i])
		kubelet.serve(responses[i])
		got, gotLenient = ev.Evaluate(ctx, busy), ev.Evaluate(ctx, lenient)
		if i == len(responses)-1 {
			break
		}
		for _, r := range []scaling.Result{got, gotLenient} {
			if r.State != scaling.StateActive || !strings.Contains(r.Message, "not enough history yet") {
				t.Fatalf("evaluation at %s: %+v, want active for want of a whole window of history", rec.at[i].Format(time.RFC3339), r)
			}
		}
	}
	if got.State != scaling.StateActive || got.Value < scaling.DefaultNetworkThreshold ||
		!strings.Contains(got.Message, "at or above the threshold 20 B/s") {
		t.Errorf("a request every 5 s, default threshold: %+v, want active at 20 B/s or more", got)
	}
	if gotLenient.State != scaling.StateIdle || gotLenient.Value != got.Value {
		t.Errorf("the same pod, threshold 100 B/s: %+v, want idle at the %.1f B/s of the default threshold's evaluation", gotLenient, got.Value)
	}
	t.Logf("web-0: %.1f B/s beyond its probes", got.Value)
	if n := kubelet.authorized.Load(); n != 3 {
		t.Errorf("the kubelet answered %d Summary API requests, want 3: one a round, which both triggers share", n)
	}

	// The kubelet refusing the operator: the trigger is unhealthy with the
	// kubelet's answer, not prefixed with the node as other kubelet errors
	// are, which is how the Evaluator treats errKubeletForbidden.
	refused := &scaling.Evaluator{
		Endpoints: k8s, Pods: k8s, Clock: clk,
		Kubelets: operatorSummaries(t, "someone-elses-token", nil, kubelet.caFile, false),
	}
	r := refused.Evaluate(ctx, busy)
	if r.State != scaling.StateUnhealthy || r.Reason != scaling.ReasonKubeletUnavailable ||
		!strings.HasPrefix(r.Message, "trigger 0: https://127.0.0.1:") || !strings.Contains(r.Message, "nodes/stats") {
		t.Errorf("refused by the kubelet: %+v, want unhealthy %s with the kubelet's answer and nodes/stats", r, scaling.ReasonKubeletUnavailable)
	}
}
