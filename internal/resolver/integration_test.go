//go:build integration

package resolver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/activation"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/resolver/endpoints"
	"elasti.dev/elasti/internal/resolver/ports"
	"elasti.dev/elasti/internal/testenv"
	"elasti.dev/elasti/internal/testenv/estest"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{}, func(e *testenv.Env) { env = e })
}

// podIP stands for the woken pod in EndpointSlices; the API server refuses
// loopback endpoint addresses. The test's dialer maps it to the loopback
// upstream and refuses every other address, so no traffic leaves the host.
const podIP = "192.0.2.10"

func loopbackDialer(upstream string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil || host != podIP {
			return nil, fmt.Errorf("test dialer: refusing %s: only %s (mapped to loopback) is dialed", addr, podIP)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, upstream)
	}
}

// sliceWaker is the Waker behind the real activation server in this
// test: a wake makes the target's pod "ready" by writing the Service's own
// EndpointSlice, as the EndpointSlice controller would once the pod is up.
type sliceWaker struct {
	c    client.Client
	port int32
}

func (w *sliceWaker) Wake(ctx context.Context, key types.NamespacedName) (activation.WakeResult, error) {
	es := &elastiv1alpha1.ElastiService{}
	if err := w.c.Get(ctx, key, es); err != nil {
		if apierrors.IsNotFound(err) {
			return activation.WakeResult{}, nil
		}
		return activation.WakeResult{}, err
	}
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: key.Namespace, Name: es.Spec.Service + "-own",
			Labels: map[string]string{discoveryv1.LabelServiceName: es.Spec.Service, contract.LabelManagedBy: "endpointslice-controller.k8s.io"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(w.port), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{podIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: key.Namespace, Name: es.Spec.Service + "-pod"}}},
	}
	if err := w.c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return activation.WakeResult{}, err
	}
	return activation.WakeResult{Found: true, Replicas: 1}, nil
}

func TestIntegrationInformersAndActivation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k8s := env.Client
	const ns = "resolver-it"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "elasti-resolver"}}); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "elasti-resolver", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("request a ServiceAccount token: %v", err)
	}
	tokenPath := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenPath, []byte(tr.Status.Token), 0o600); err != nil {
		t.Fatal(err)
	}

	// The pod: a loopback HTTP server.
	up := echoUpstream(t)
	_, upPort, _ := net.SplitHostPort(upstreamAddr(up))
	podPort, _ := strconv.Atoi(upPort)

	// The operator's real activation server with a real TokenReview.
	srv := &activation.Server{
		Authenticator: &activation.Authenticator{Client: k8s, ServiceAccountNamespace: ns, ServiceAccountName: "elasti-resolver"},
		Waker:         &sliceWaker{c: k8s, port: int32(podPort)},
		Log:           logr.Discard(),
	}
	operator := &http.Server{Handler: srv.Handler()}
	ol, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = operator.Serve(ol) }()
	t.Cleanup(func() { _ = operator.Close() })
	operatorURL := "http://" + ol.Addr().String()

	h := newHarness(t, 2, func(o *Options) {
		o.Activation.Activator = activation.NewClient(activation.ClientOptions{OperatorURL: operatorURL, TokenPath: tokenPath})
		o.Upstream.DialContext = loopbackDialer(upstreamAddr(up))
	})
	synced, err := ports.Watch(ctx, env.Config, h.ports, h.endpoints, ports.WatchOptions{Log: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	h.eventually("the informers have synced", synced)

	// The ElastiService, with its resolver port in status.proxyPorts.
	es := estest.New(ns, "web", estest.Service("websvc"))
	if err := k8s.Create(ctx, es); err != nil {
		t.Fatal(err)
	}
	es.Status.ProxyPorts = []elastiv1alpha1.ProxyPort{{Name: "http", Port: 80, Protocol: "TCP", ResolverPort: int32(h.base)}}
	es.Status.Mode = elastiv1alpha1.ModeProxy
	if err := k8s.Status().Update(ctx, es); err != nil {
		t.Fatalf("write status.proxyPorts: %v", err)
	}
	h.eventually("the port mapping arrives through the informer", func() bool {
		target, ok := h.ports.Lookup(ctx, int32(h.base), 0, nil)
		return ok && target.Service == types.NamespacedName{Namespace: ns, Name: "websvc"} && target.PortName == "http"
	})

	// Elasti's own proxy slice for the Service must never count as ready.
	proxySlice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: "websvc-elasti",
			Labels: map[string]string{discoveryv1.LabelServiceName: "websvc", contract.LabelManagedBy: contract.ManagedBy},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(h.base)), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"192.0.2.99"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}
	if err := k8s.Create(ctx, proxySlice); err != nil {
		t.Fatal(err)
	}

	// A request is held, activation reaches the real server, which
	// authenticates the resolver's token and "wakes" the pod; the slice
	// event releases the request to the pod.
	r := get(h.client(), ctx, "http://"+h.addr(0)+"/woken", map[string]string{"Host": "websvc." + ns})
	if r.err != nil || r.status != http.StatusOK || r.body != "GET /woken " {
		t.Fatalf("held request: status %d body %q err %v", r.status, r.body, r.err)
	}
	if got := h.endpoints.Ready(types.NamespacedName{Namespace: ns, Name: "websvc"}, "http"); len(got) != 1 || got[0] != net.JoinHostPort(podIP, upPort) {
		t.Errorf("ready endpoints = %v, want only the Service's own pod", got)
	}
	// The wake writes the slice before it answers, so the slice event can
	// release the request before the waker has counted the answer.
	h.eventually("the activation is counted as ok", func() bool {
		return testutil.ToFloat64(h.r.metrics.Activations.WithLabelValues(ns, "web", ActivationOK)) >= 1
	})

	// The pod turns terminating: no longer ready.
	own := &discoveryv1.EndpointSlice{}
	if err := k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "websvc-own"}, own); err != nil {
		t.Fatal(err)
	}
	own.Endpoints[0].Conditions.Terminating = ptr.To(true)
	if err := k8s.Update(ctx, own); err != nil {
		t.Fatal(err)
	}
	h.eventually("the terminating endpoint is dropped", func() bool {
		return len(h.endpoints.Ready(types.NamespacedName{Namespace: ns, Name: "websvc"}, "http")) == 0
	})

	// A token of another identity is refused with 403, an invalid one with 401.
	if err := k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "intruder"}}); err != nil {
		t.Fatal(err)
	}
	other, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "intruder", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for token, want := range map[string]int{other.Status.Token: http.StatusForbidden, "not-a-token": http.StatusUnauthorized} {
		p := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(p, []byte(token), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := activation.NewClient(activation.ClientOptions{OperatorURL: operatorURL, TokenPath: p}).Activate(ctx, ns, "web")
		var ce *activation.StatusError
		if !errors.As(err, &ce) || ce.StatusCode != want {
			t.Errorf("activation with a foreign token: %v, want status %d", err, want)
		}
	}
	if _, err := activation.NewClient(activation.ClientOptions{OperatorURL: operatorURL, TokenPath: tokenPath}).Activate(ctx, ns, "missing"); !errors.As(err, new(*activation.StatusError)) {
		t.Errorf("activation of a missing ElastiService: %v, want a 404 StatusError", err)
	}

	// Deleting the ElastiService unmaps its port.
	if err := k8s.Delete(ctx, es); err != nil {
		t.Fatal(err)
	}
	h.eventually("the mapping goes with the ElastiService", func() bool {
		_, ok := h.ports.Lookup(ctx, int32(h.base), 0, nil)
		return !ok
	})
}

// createProxied creates ElastiService ns/name for Service svc and writes its
// status as the operator would: mode, and one HTTP port on resolverPort.
func createProxied(ctx context.Context, t *testing.T, ns, name, svc string, mode elastiv1alpha1.Mode, resolverPort int32) *elastiv1alpha1.ElastiService {
	t.Helper()
	es := estest.New(ns, name, estest.Service(svc))
	if err := env.Client.Create(ctx, es); err != nil {
		t.Fatal(err)
	}
	es.Status.ProxyPorts = []elastiv1alpha1.ProxyPort{{Name: "http", Port: 80, Protocol: "TCP", ResolverPort: resolverPort}}
	es.Status.Mode = mode
	if err := env.Client.Status().Update(ctx, es); err != nil {
		t.Fatalf("write the status of %s/%s: %v", ns, name, err)
	}
	return es
}

func createNamespaces(ctx context.Context, t *testing.T, names ...string) {
	t.Helper()
	for _, ns := range names {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestIntegrationNamespaceScope: two installs scoped to different
// namespaces, whose operators each allocated the same resolver port, each
// map that port to their own ElastiService. A resolver watching every
// namespace sees two claims on the port and maps it to neither.
func TestIntegrationNamespaceScope(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	createNamespaces(ctx, t, "scope-a", "scope-b")
	const port = 20500
	createProxied(ctx, t, "scope-a", "web", "websvc", elastiv1alpha1.ModeProxy, port)
	createProxied(ctx, t, "scope-b", "web", "websvc", elastiv1alpha1.ModeProxy, port)

	watch := func(namespaces ...string) *ports.PortMap {
		pm := ports.NewPortMap()
		synced, err := ports.Watch(ctx, env.Config, pm, endpoints.New(), ports.WatchOptions{Namespaces: namespaces, Log: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		(&harness{t: t}).eventually("the ElastiService informer has synced", synced)
		return pm
	}
	a, b, all := watch("scope-a"), watch("scope-b"), watch()
	for ns, pm := range map[string]*ports.PortMap{"scope-a": a, "scope-b": b} {
		target, ok := pm.Lookup(ctx, port, 0, nil)
		if want := (types.NamespacedName{Namespace: ns, Name: "web"}); !ok || target.ElastiService != want {
			t.Errorf("resolver scoped to %s: port %d maps to %v (%v), want %s", ns, port, target.ElastiService, ok, want)
		}
	}
	if target, ok := all.Lookup(ctx, port, 0, nil); ok {
		t.Errorf("unscoped resolver maps the doubly claimed port %d to %s, want neither", port, target.ElastiService)
	}
}

// TestIntegrationSlicesFollowedOnlyWhileMapped: the resolver follows the
// EndpointSlices of a Service only while one of its ports is mapped. A
// Service whose ElastiService is in serve mode is not watched at all, and
// becomes forwardable once the ElastiService goes to proxy mode; back in
// serve mode, its slices are dropped when the port's linger ends.
func TestIntegrationSlicesFollowedOnlyWhileMapped(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ns = "slices-it"
	createNamespaces(ctx, t, ns)
	up := echoUpstream(t)
	_, upPort, _ := net.SplitHostPort(upstreamAddr(up))
	podPort, _ := strconv.Atoi(upPort)
	h := newHarness(t, 2, func(o *Options) {
		o.Upstream.DialContext = loopbackDialer(upstreamAddr(up))
		o.Ports.ReleasedPortLinger = time.Second
	})
	synced, err := ports.Watch(ctx, env.Config, h.ports, h.endpoints, ports.WatchOptions{Namespaces: []string{ns}, Log: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	h.eventually("the ElastiService informer has synced", synced)

	// Both Services have a ready pod of their own.
	for _, svc := range []string{"svc-a", "svc-b"} {
		s := &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: ns, Name: svc + "-own",
				Labels: map[string]string{discoveryv1.LabelServiceName: svc, contract.LabelManagedBy: "endpointslice-controller.k8s.io"},
			},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(podPort)), Protocol: ptr.To(corev1.ProtocolTCP)}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{podIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: svc + "-pod"}}},
		}
		if err := env.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	svcA := types.NamespacedName{Namespace: ns, Name: "svc-a"}
	svcB := types.NamespacedName{Namespace: ns, Name: "svc-b"}
	// A in serve mode first, then B in proxy mode: once B's slices are in,
	// the resolver has seen A's ElastiService too (one watch, in order).
	a := createProxied(ctx, t, ns, "a", "svc-a", elastiv1alpha1.ModeServe, int32(h.base))
	createProxied(ctx, t, ns, "b", "svc-b", elastiv1alpha1.ModeProxy, int32(h.base+1))
	h.eventually("B's own slice is followed", func() bool { return len(h.endpoints.Ready(svcB, "http")) == 1 })
	if h.endpoints.Feeding(svcA) || h.endpoints.AnyReady(svcA) {
		t.Fatalf("A's slices are followed while A is in serve mode")
	}
	if r := get(h.client(), ctx, "http://"+h.addr(0)+"/", nil); r.status != http.StatusNotFound {
		t.Fatalf("A's port in serve mode: status %d err %v, want 404", r.status, r.err)
	}
	if r := get(h.client(), ctx, "http://"+h.addr(1)+"/b", nil); r.err != nil || r.status != http.StatusOK || r.body != "GET /b " {
		t.Fatalf("B's port: status %d body %q err %v", r.status, r.body, r.err)
	}

	// A goes to proxy mode: its port maps, its slices are followed, and a
	// request is forwarded to its pod.
	a.Status.Mode = elastiv1alpha1.ModeProxy
	if err := env.Client.Status().Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	h.eventually("A's port is mapped", func() bool {
		_, ok := h.ports.Lookup(ctx, int32(h.base), 0, nil)
		return ok
	})
	if r := get(h.client(), ctx, "http://"+h.addr(0)+"/a", nil); r.err != nil || r.status != http.StatusOK || r.body != "GET /a " {
		t.Fatalf("A's port in proxy mode: status %d body %q err %v", r.status, r.body, r.err)
	}

	// Back to serve: after the linger, A's slices are forgotten.
	a.Status.Mode = elastiv1alpha1.ModeServe
	if err := env.Client.Status().Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	h.eventually("A's slices are dropped after the linger", func() bool {
		return !h.endpoints.Feeding(svcA) && !h.endpoints.AnyReady(svcA)
	})
	if !h.endpoints.AnyReady(svcB) {
		t.Error("B's slices went with A's")
	}

	// A resolver that starts now (a restart) finds B mapped and its slice
	// in its first lists, and only B.
	pm, eps := ports.NewPortMap(), endpoints.New()
	if _, err := ports.Watch(ctx, env.Config, pm, eps, ports.WatchOptions{Namespaces: []string{ns}, Log: testLogger(t)}); err != nil {
		t.Fatal(err)
	}
	h.eventually("a new resolver has B's endpoint", func() bool { return len(eps.Ready(svcB, "http")) == 1 })
	if eps.Feeding(svcA) || eps.AnyReady(svcA) {
		t.Error("a new resolver follows A's slices while A is in serve mode")
	}
}
