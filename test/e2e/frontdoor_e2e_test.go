//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/test/cluster"
)

// The front door is Traefik (v3.6.12, built from the Go module proxy by
// hack/traefik.sh), one process on the node that serves Kubernetes
// Ingresses and Gateway API routes on one entry point. Like every ingress
// controller and Gateway we know of, it reads the Service's EndpointSlices
// itself and sends each request to an endpoint they list, over connections
// it keeps alive to them: not through the ClusterIP, so kube-proxy is not
// involved. Each test routes the path prefix /<its namespace> to its own
// demo app.

// demoPeerHeader is the demo app's PeerHeader: the address a request came
// from, the front door's or a resolver's.
const demoPeerHeader = "X-Demoapp-Peer"

// startFrontDoor starts Traefik with its classes and the shared Gateway.
// It is a cluster component: tests call it before t.Parallel (see the
// package doc).
func startFrontDoor(t *testing.T, e *Env) {
	t.Helper()
	if err := traefikRelease(e.Cluster.RepoRoot); err != nil {
		t.Fatalf("Traefik: %v", err)
	}
	if err := e.ClusterCLI("traefik-start"); err != nil {
		t.Fatalf("start Traefik: %v", err)
	}
}

var (
	traefikOnce sync.Once
	traefikErr  error
)

// traefikRelease sets $ELASTI_TRAEFIK_DIR, which traefik-start reads, to
// what hack/traefik.sh prints, unless it is set already. The script waits
// for a build in progress (make test-e2e starts one in the background) or
// builds Traefik itself: on a fresh machine, minutes.
func traefikRelease(root string) error {
	traefikOnce.Do(func() {
		if os.Getenv(cluster.TraefikDirEnv) != "" {
			return
		}
		cmd := exec.Command(filepath.Join(root, "hack", "traefik.sh"))
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			traefikErr = fmt.Errorf("hack/traefik.sh: %w: %s", err, strings.TrimSpace(stderr.String()))
			return
		}
		// Before any test runs in parallel: startFrontDoor runs before
		// t.Parallel.
		traefikErr = os.Setenv(cluster.TraefikDirEnv, strings.TrimSpace(string(out)))
	})
	return traefikErr
}

// frontDoorURL is the front door's URL for the demo app in ns.
func (e *Env) frontDoorURL(ns string) string {
	return "http://" + e.Cluster.FrontDoorAddr().String() + "/" + ns + "/"
}

// frontDoorIngress routes /<ns> to the demo app's HTTP port.
func frontDoorIngress(ns string) *networkingv1.Ingress {
	return &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "demoapp", Namespace: ns},
		Spec: networkingv1.IngressSpec{
			IngressClassName: ptr.To(cluster.TraefikClass),
			Rules: []networkingv1.IngressRule{{IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
				Paths: []networkingv1.HTTPIngressPath{{
					Path:     "/" + ns,
					PathType: ptr.To(networkingv1.PathTypePrefix),
					Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
						Name: "demoapp", Port: networkingv1.ServiceBackendPort{Number: DemoHTTPPort},
					}},
				}},
			}}}},
		},
	}
}

// frontDoorHTTPRoute routes /<ns> on the shared Gateway to the demo app's
// HTTP port.
func frontDoorHTTPRoute(ns string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1",
		"kind":       "HTTPRoute",
		"metadata":   map[string]any{"name": "demoapp", "namespace": ns},
		"spec": map[string]any{
			"parentRefs": []any{map[string]any{"name": cluster.FrontDoorGateway, "namespace": cluster.FrontDoorNamespace}},
			"rules": []any{map[string]any{
				"matches":     []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": "/" + ns}}},
				"backendRefs": []any{map[string]any{"name": "demoapp", "port": int64(DemoHTTPPort)}},
			}},
		},
	}}
	return u
}

// frontDoorAnswer is one GET through the front door: when it was sent, and
// the address the demo app saw it come from.
type frontDoorAnswer struct {
	at   time.Time
	peer string
	err  error
}

// getPeer GETs url with c and returns the demo app's PeerHeader of its
// answer, which must be the app's greeting.
func getPeer(ctx context.Context, c *http.Client, url string) (string, error) {
	h, body, err := get200(ctx, c, url)
	switch {
	case err != nil:
		return "", fmt.Errorf("%w: %s", err, strings.TrimSpace(body))
	case !strings.HasPrefix(body, "hello from "):
		return "", fmt.Errorf("unexpected body %q", body)
	}
	return h.Get(demoPeerHeader), nil
}

// resolverIPs are the addresses of the resolver pods now.
func (e *Env) resolverIPs(ctx context.Context) (map[string]bool, error) {
	pods, err := e.Pods(ctx, ElastiNamespace, nil)
	if err != nil {
		return nil, err
	}
	ips := map[string]bool{}
	for _, p := range pods {
		if strings.HasPrefix(p.Name, ResolverDeployment+"-") {
			for _, ip := range p.Status.PodIPs {
				ips[ip.IP] = true
			}
		}
	}
	return ips, nil
}

// TestFrontDoorWakesAtZero: through an Ingress and through a Gateway API
// HTTPRoute, a POST that arrives while the target is at zero reaches a
// resolver (the front door follows the proxy EndpointSlice), is held, wakes
// the target and is answered with its whole body (256 KiB, more than the
// resolver reads ahead while it holds). After the wake the front door moves
// back to the pod by itself: a keep-alive client's GETs, ten a second, stop
// reaching a resolver, and the test says how long that took. The front door
// keeps its own connections to the resolvers alive; they are not used once
// the proxy slice is gone.
func TestFrontDoorWakesAtZero(t *testing.T) {
	e := Get(t)
	startFrontDoor(t, e)
	t.Parallel()
	for _, route := range []struct {
		name   string
		object func(ns string) client.Object
	}{
		{"Ingress", func(ns string) client.Object { return frontDoorIngress(ns) }},
		{"HTTPRoute", func(ns string) client.Object { return frontDoorHTTPRoute(ns) }},
	} {
		t.Run(route.name, func(t *testing.T) {
			t.Parallel()
			ns, _ := demoApp(t, e)
			e.Create(t, route.object(ns))
			url := e.frontDoorURL(ns)
			answers(t, e, url, time.Minute) // the front door has the route
			e.Create(t, e.ElastiServiceFor(ns, "demoapp", IdleQuery))
			e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)
			// The answer to come must be the woken pod's, and the app stay
			// awake after it.
			e.SetQuery(t, ns, "demoapp", BusyQuery)

			ctx, cancel := context.WithTimeout(context.Background(), wakeTimeout)
			defer cancel()
			start := time.Now()
			if r := postSized(ctx, e.keepAliveClient(wakeTimeout), url, largePost); r.err != nil {
				t.Fatalf("POST through the %s at zero: %v", route.name, r.err)
			}
			answered := time.Since(start)
			es, err := e.GetElastiService(ctx, ns, "demoapp")
			if err != nil {
				t.Fatal(err)
			}
			if es.Status.LastScaledUpTime == nil || es.Status.LastScaledUpTime.Time.Before(start.Add(-time.Second)) {
				t.Errorf("the POST was answered in %s, but the ElastiService records no wake since it was sent (lastScaledUpTime %v)", answered.Round(time.Millisecond), es.Status.LastScaledUpTime)
			}
			t.Logf("POST of %d KiB through the %s at zero: held, woken and answered in %s", largePost>>10, route.name, answered.Round(time.Millisecond))

			e.WaitAwake(t, ns, "demoapp", time.Minute)
			awake := time.Now()
			moveBack(t, e, url, awake)
		})
	}
}

// moveBack sends GETs on one kept-alive connection to the front door, ten a
// second, until 30 in a row reached the pod from the front door itself
// rather than through a resolver, and fails if that does not happen within
// a minute of awake (when the ElastiService was seen back in serve mode) or
// if any GET fails meanwhile.
func moveBack(t *testing.T, e *Env, url string, awake time.Time) {
	t.Helper()
	c := e.keepAliveClient(10 * time.Second)
	var answers []frontDoorAnswer
	direct, lastViaResolver := 0, time.Time{}
	deadline := awake.Add(time.Minute)
	for direct < 30 {
		if time.Now().After(deadline) {
			t.Fatalf("a minute after the wake the front door still sends through a resolver (last at %s; %d answers)", lastViaResolver.Format("15:04:05.000"), len(answers))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		a := frontDoorAnswer{at: time.Now()}
		a.peer, a.err = getPeer(ctx, c, url)
		cancel()
		answers = append(answers, a)
		if a.err != nil {
			t.Errorf("GET at %s after the wake: %v", a.at.Format("15:04:05.000"), a.err)
			direct = 0
		} else if resolvers, err := e.resolverIPs(context.Background()); err != nil {
			t.Fatal(err)
		} else if resolvers[a.peer] {
			lastViaResolver, direct = a.at, 0
		} else {
			direct++
		}
		time.Sleep(100 * time.Millisecond)
	}
	if lastViaResolver.IsZero() {
		t.Logf("after the wake every GET went to the pod directly (%d GETs)", len(answers))
		return
	}
	t.Logf("the front door moved back to the pod %s after the ElastiService was back in serve mode (last GET through a resolver at %s)",
		lastViaResolver.Sub(awake).Round(100*time.Millisecond), lastViaResolver.Format("15:04:05.000"))
}

// TestFrontDoorKeepAliveCycles: eight keep-alive clients POST through an
// Ingress, five times a second each, while the trigger always says idle.
//
// First with a grace period of 10 s: the front door balances every request
// over the endpoints it knows, so once it has applied the proxy slice some
// requests reach a resolver, which calls the scale-down off. Behind a front
// door a kept-alive client does not stay on the pod during the grace period
// as it does through kube-proxy (TestNoLossUnderLoad). The test sees
// scale-downs start and be called off, never reach zero. The grace period
// must outlast the front door's delay in applying the slice (Traefik: up to
// 2 s, its providersThrottleDuration): with the operator's default of 2 s, a
// first run saw the target go to zero under this traffic (every request
// still held and answered, as in the second part).
//
// Then with scaleDownGracePeriod 0s: there is no confirmation window, so
// the target goes to zero under traffic, three times. Every POST is
// answered and runs exactly once: at each scale-down the front door sends
// to the resolvers (which hold) and to the pod while it drains, and at each
// wake to the resolvers (which forward) until it has the pod again. The
// pod drains for 5 s, longer than the front door takes to drop it (Traefik
// applies an EndpointSlice change at most every 2 s, its
// providersThrottleDuration).
func TestFrontDoorKeepAliveCycles(t *testing.T) {
	e := Get(t)
	startFrontDoor(t, e)
	t.Parallel()
	l := newLedger(t)
	ns, _ := demoApp(t, e, withEnv("DRAIN", "5s"), l.mount)
	e.Create(t, frontDoorIngress(ns))
	url := e.frontDoorURL(ns)
	answers(t, e, url, time.Minute)

	// Bounded: at most 5 minutes of traffic.
	fleet := startKeepAliveFleet(e, url, 8, 200*time.Millisecond, 8*5*300)
	es := e.ElastiServiceFor(ns, "demoapp", IdleQuery)
	es.Spec.ScaleDownGracePeriod = "10s"
	e.Create(t, es)
	attempts, last := 0, ""
	StableFor(t, 30*time.Second, 100*time.Millisecond, func(ctx context.Context) error {
		es, err := e.GetElastiService(ctx, ns, "demoapp")
		if err != nil {
			return err
		}
		if es.Status.LastScaledDownTime != nil {
			return fmt.Errorf("scaled to zero at %s although every scale-down saw the front door's traffic", es.Status.LastScaledDownTime.Format("15:04:05"))
		}
		if c := Condition(es, elastiv1alpha1.ConditionActive); c != nil {
			if c.Reason == contract.ReasonScalingDown && last != contract.ReasonScalingDown {
				attempts++
			}
			last = c.Reason
		}
		return nil
	})
	if attempts == 0 {
		t.Error("no scale-down started in 30 s: the test did not exercise the call-off")
	}
	t.Logf("with a 10 s grace period: %d scale-downs started and called off by the front door's traffic; %d POSTs so far", attempts, fleet.sent.Load())

	e.UpdateElastiService(t, ns, "demoapp", func(es *elastiv1alpha1.ElastiService) { es.Spec.ScaleDownGracePeriod = "0s" })
	start := time.Now()
	e.cycles(t, ns, "demoapp", 3, 4*time.Minute, func() string {
		return fmt.Sprintf("%d POSTs so far", fleet.sent.Load())
	})
	e.SetQuery(t, ns, "demoapp", BusyQuery)
	e.WaitAwake(t, ns, "demoapp", 2*time.Minute)
	time.Sleep(2 * time.Second)
	fleet.finish()
	t.Logf("over %s and 3 cycles: %d keep-alive POSTs through the front door on %d connections (%d ok, %d failed)",
		time.Since(start).Round(time.Second), len(fleet.ok)+len(fleet.bad), fleet.dials.Load(), len(fleet.ok), len(fleet.bad))
	for i, f := range fleet.bad {
		if i == 10 {
			t.Errorf("... and %d more", len(fleet.bad)-10)
			break
		}
		t.Errorf("POST %s at %s (reused connection: %v): %v", f.id, f.at.Format("15:04:05.000"), f.reused, f.err)
	}
	checkLedger(t, t.Errorf, l, fleet.ok)
}

// frontDoorHost is the host name the Gateway routes of the demo app in ns
// answer to over HTTP (gRPC has no path prefix of its own to route by), and
// frontDoorGRPCHost the one for gRPC. The two must differ: a GRPCRoute with
// no matches takes every request for its host, so a WebSocket's GET sent to
// a host both routes share went to the gRPC backend (Traefik answered 500,
// "unsupported protocol scheme h2c", in a first run). The Gateway API
// leaves a host claimed by both kinds to the implementation.
func frontDoorHost(ns string) string     { return ns + ".front-door.test" }
func frontDoorGRPCHost(ns string) string { return "grpc." + ns + ".front-door.test" }

// frontDoorRoutesByHost routes frontDoorHost(ns) on the shared Gateway to
// the demo app's HTTP port (an HTTPRoute, for HTTP and WebSocket), and
// frontDoorGRPCHost(ns) to its h2c port (a GRPCRoute).
func frontDoorRoutesByHost(ns string) []client.Object {
	parents := []any{map[string]any{"name": cluster.FrontDoorGateway, "namespace": cluster.FrontDoorNamespace}}
	route := func(kind, host string, port int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "gateway.networking.k8s.io/v1",
			"kind":       kind,
			"metadata":   map[string]any{"name": "demoapp", "namespace": ns},
			"spec": map[string]any{
				"parentRefs": parents,
				"hostnames":  []any{host},
				"rules":      []any{map[string]any{"backendRefs": []any{map[string]any{"name": "demoapp", "port": port}}}},
			},
		}}
	}
	return []client.Object{route("HTTPRoute", frontDoorHost(ns), DemoHTTPPort), route("GRPCRoute", frontDoorGRPCHost(ns), DemoGRPCPort)}
}

// frontDoorDialer dials the front door whatever the address asked for, as a
// client that resolves the route's host name to it would.
func (e *Env) frontDoorDialer(ctx context.Context, _, _ string) (net.Conn, error) {
	return e.Dialer.DialContext(ctx, "tcp", e.Cluster.FrontDoorAddr().String())
}

// TestFrontDoorGatewayProtocols: a WebSocket (HTTPRoute) and a gRPC call
// over h2c (GRPCRoute), each opened through the Gateway while the target is
// at zero, are held through the wake and answered: the front door speaks
// HTTP/1.1 with its Upgrade, and h2c, to the resolver as to the pod.
func TestFrontDoorGatewayProtocols(t *testing.T) {
	e := Get(t)
	startFrontDoor(t, e)
	t.Parallel()
	ns, _ := sleepyDemoApp(t, e, idle)
	e.Create(t, frontDoorRoutesByHost(ns)...)
	host := net.JoinHostPort(frontDoorHost(ns), fmt.Sprint(cluster.FrontDoorPort))
	// The routes are in place once the front door answers by the host name;
	// the app is asleep or going to sleep by then, and a request would wake
	// it, so the check reads the routes' status instead.
	Eventually(t, time.Minute, time.Second, func(ctx context.Context) error {
		for _, kind := range []string{"HTTPRoute", "GRPCRoute"} {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion("gateway.networking.k8s.io/v1")
			u.SetKind(kind)
			if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demoapp"}, u); err != nil {
				return err
			}
			parents, _, _ := unstructured.NestedSlice(u.Object, "status", "parents")
			accepted := false
			for _, p := range parents {
				conds, _, _ := unstructured.NestedSlice(p.(map[string]any), "conditions")
				for _, c := range conds {
					m := c.(map[string]any)
					if m["type"] == "Accepted" && m["status"] == "True" {
						accepted = true
					}
				}
			}
			if !accepted {
				return fmt.Errorf("%s not accepted by the Gateway yet: %v", kind, parents)
			}
		}
		return nil
	})

	t.Run("websocket", func(t *testing.T) {
		atZero(t, e, ns, "demoapp", func(ctx context.Context) error {
			d := websocket.Dialer{NetDialContext: e.frontDoorDialer, HandshakeTimeout: wakeTimeout}
			return wsPingPong(ctx, d, "ws://"+host+"/ws")
		})
	})
	t.Run("grpc h2c", func(t *testing.T) {
		atZero(t, e, ns, "demoapp", func(ctx context.Context) error {
			grpcHost := net.JoinHostPort(frontDoorGRPCHost(ns), fmt.Sprint(cluster.FrontDoorPort))
			conn, err := grpc.NewClient("passthrough:///"+grpcHost,
				grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return e.frontDoorDialer(ctx, "tcp", addr) }))
			if err != nil {
				return err
			}
			defer conn.Close()
			var out wrapperspb.StringValue
			if err := conn.Invoke(ctx, "/elasti.demo.Echo/Echo", wrapperspb.String("wake"), &out); err != nil {
				return err
			}
			if out.GetValue() != "wake" {
				return fmt.Errorf("echo returned %q, want %q", out.GetValue(), "wake")
			}
			return nil
		})
	})
}

// TestFrontDoorWakingPage: a page load through an Ingress while the target
// is at zero gets the waking page (503 with Refresh, as the resolver sends
// it; the front door passes it on), and the page loads that follow get the
// woken app's answer.
//   - A browser-like client polls through the front door from zero.
//   - Headless Chromium, given the front door's address (relayed to
//     loopback: it cannot use the test's dialer), opens the page while the
//     target wakes, shows the waking page, and reloads itself through the
//     front door into the app's answer.
//   - An API client's request sent meanwhile is held and answered by the
//     app, not given the page.
func TestFrontDoorWakingPage(t *testing.T) {
	e := Get(t)
	startFrontDoor(t, e)
	t.Parallel()
	// 20 s of boot, as in TestWakingPage: Chromium must find the page on a
	// busy machine.
	ns, _ := demoApp(t, e, withEnv("STARTUP_DELAY", "20s"))
	e.Create(t, frontDoorIngress(ns))
	url := e.frontDoorURL(ns)
	answers(t, e, url, time.Minute)
	es := e.ElastiServiceFor(ns, "demoapp", IdleQuery)
	es.Spec.Proxy = &elastiv1alpha1.ProxySpec{WakingPage: &elastiv1alpha1.WakingPage{RefreshSeconds: 1}}
	e.Create(t, es)
	e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)
	browser, navigations := startChromium(t)
	e.SetQuery(t, ns, "demoapp", BusyQuery)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var (
		pages     int
		pollErr   error
		api       error
		polling   sync.WaitGroup
		firstPage = make(chan struct{})
		apiDone   = make(chan struct{})
	)
	polling.Go(func() {
		c := e.keepAliveClient(30 * time.Second)
		pollErr = Poll(ctx, 3*time.Minute, 250*time.Millisecond, func(pctx context.Context) error {
			req, _ := http.NewRequestWithContext(pctx, http.MethodGet, url, nil)
			req.Header.Set("Accept", browserAccept)
			resp, err := c.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			switch {
			case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Refresh") == "1":
				if pages++; pages == 1 {
					close(firstPage)
					// The wake has begun: an API client's request now, on
					// the test's context (each poll's ends with the poll).
					go func() {
						defer close(apiDone)
						body, err := GetWith(ctx, e.LongHTTPClient(), url, "")
						if err == nil && !strings.HasPrefix(body, "hello from demoapp-") {
							err = fmt.Errorf("body %q", body)
						}
						api = err
					}()
				}
				return errors.New("waking")
			case resp.StatusCode == http.StatusOK && strings.HasPrefix(string(body), "hello from demoapp-"):
				return nil
			}
			return fmt.Errorf("%s: %q", resp.Status, body)
		})
	})
	pageURL := "http://" + e.loopbackForward(t, e.Cluster.FrontDoorAddr().String()) + "/" + ns + "/"
	select {
	case <-firstPage:
		browserOpensWakingPage(t, browser, pageURL, filepath.Join(artifactsDir(t), "front-door-waking-page.png"))
	case <-ctx.Done():
	}
	polling.Wait()
	if pollErr != nil {
		t.Fatalf("page loads through the front door: %v (%d waking pages)", pollErr, pages)
	}
	if pages == 0 {
		t.Fatal("no page load got the waking page: the front door did not pass it on, or the app was awake")
	}
	<-apiDone
	if api != nil {
		t.Errorf("an API client's request during the wake: %v", api)
	}
	t.Logf("%d waking pages through the front door, then the app's answer", pages)
	browserReloadsIntoAnswer(ctx, t, browser, navigations, pageURL, filepath.Join(artifactsDir(t), "front-door-waking-page-answered.png"))
}

// ingressRateHPA is docs/hpa.md's set-up 3: an HPA at minReplicas 0 on the
// Object metric requests_per_second of the Ingress in ns that routes to the
// demo app (Traefik's router counter through Prometheus and the Prometheus
// adapter's custom metrics API), with a target of 100 a second.
func ingressRateHPA(ns string) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: "demoapp", Namespace: ns},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "demoapp"},
			MinReplicas:    ptr.To[int32](0),
			MaxReplicas:    10,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ObjectMetricSourceType,
				Object: &autoscalingv2.ObjectMetricSource{
					DescribedObject: autoscalingv2.CrossVersionObjectReference{APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Name: "demoapp"},
					Metric:          autoscalingv2.MetricIdentifier{Name: cluster.IngressRequestRate},
					Target:          autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: ptr.To(resource.MustParse("100"))},
				},
			}},
		},
	}
}

// ingressReading is the HPA's current reading of its Object metric, or an
// error saying why there is none (the HPA's ScalingActive condition).
func ingressReading(h *autoscalingv2.HorizontalPodAutoscaler) (resource.Quantity, error) {
	for _, m := range h.Status.CurrentMetrics {
		if m.Object != nil && m.Object.Current.Value != nil {
			return *m.Object.Current.Value, nil
		}
	}
	for _, c := range h.Status.Conditions {
		if c.Type == autoscalingv2.ScalingActive && c.Status != "True" {
			return resource.Quantity{}, fmt.Errorf("HPA has no reading: ScalingActive %s/%s: %s", c.Status, c.Reason, c.Message)
		}
	}
	return resource.Quantity{}, errors.New("HPA has no reading of its Object metric yet")
}

// TestFrontDoorHPAObjectMetric follows docs/hpa.md's set-up 3 on the local
// cluster: the HPA scales on the requests per second the front door routed
// by the Ingress (an Object metric, which still reads while the pods are
// gone), its minReplicas is 0, and the ElastiService names it and has no
// triggers. The HPA reads the metric (no FailedGetObjectMetric); once the
// reading is zero Elasti puts the target to sleep, proxy first; a POST
// through the Ingress at zero is held, wakes the target and is answered;
// and the HPA's reading then shows that request's traffic.
func TestFrontDoorHPAObjectMetric(t *testing.T) {
	e := Get(t)
	startFrontDoor(t, e)
	t.Parallel()
	ns, _ := demoApp(t, e)
	e.Create(t, frontDoorIngress(ns))
	url := e.frontDoorURL(ns)
	// The first answer through the Ingress gives Traefik's router its
	// counter: until then the adapter has no series to serve for it.
	answers(t, e, url, time.Minute)
	hpas := e.Clientset.AutoscalingV2().HorizontalPodAutoscalers(ns)
	e.Create(t, ingressRateHPA(ns))
	es := e.ElastiServiceFor(ns, "demoapp", IdleQuery)
	es.Spec.Triggers = nil // the HPA's reading alone says when the target is idle
	es.Spec.Autoscaler = &elastiv1alpha1.AutoscalerRef{Type: elastiv1alpha1.AutoscalerHPA, Name: "demoapp"}
	e.Create(t, es)

	// The rate over one minute falls to zero and Elasti takes the last
	// step; the HPA must have read the metric on the way.
	read := false
	Eventually(t, 4*time.Minute, time.Second, func(ctx context.Context) error {
		h, err := hpas.Get(ctx, "demoapp", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, err := ingressReading(h); err != nil {
			return err
		}
		read = true
		n, _, err := e.Replicas(ctx, ns, "demoapp")
		if err == nil && n != 0 {
			err = fmt.Errorf("target at %d replicas", n)
		}
		return err
	})
	if !read {
		t.Fatal("the HPA never read the Ingress's request rate")
	}
	e.WaitAsleep(t, ns, "demoapp", time.Minute)
	t.Log("the HPA read the Ingress's request rate, and at zero Elasti put the target to sleep")

	ctx, cancel := context.WithTimeout(context.Background(), wakeTimeout)
	defer cancel()
	start := time.Now()
	if r := postSized(ctx, e.keepAliveClient(wakeTimeout), url, largePost); r.err != nil {
		t.Fatalf("POST through the Ingress at zero: %v", r.err)
	}
	t.Logf("POST through the Ingress at zero answered in %s", time.Since(start).Round(time.Millisecond))
	// Traffic through the front door while awake: the HPA's reading, a
	// rate over one minute, rises above zero.
	fleet := startKeepAliveFleet(e, url, 2, 200*time.Millisecond, 2*5*60)
	defer fleet.finish()
	Eventually(t, 2*time.Minute, time.Second, func(ctx context.Context) error {
		h, err := hpas.Get(ctx, "demoapp", metav1.GetOptions{})
		if err != nil {
			return err
		}
		v, err := ingressReading(h)
		if err == nil && v.IsZero() {
			err = errors.New("the HPA reads 0 requests per second through the Ingress under traffic")
		}
		if err == nil {
			t.Logf("the HPA reads %s requests per second through the Ingress", v.String())
		}
		return err
	})
}
