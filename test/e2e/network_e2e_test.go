//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller"
	"elasti.dev/elasti/internal/controller/plan"
	"elasti.dev/elasti/internal/testenv/estest"
)

// networkTrigger gives an ElastiService one network trigger with the
// operator's default threshold, in place of its prometheus trigger.
func networkTrigger(es *elastiv1alpha1.ElastiService) {
	es.Spec.Triggers = []elastiv1alpha1.ScaleTrigger{{Type: elastiv1alpha1.TriggerTypeNetwork}}
}

// networkApp is demoApp with an ElastiService whose only trigger is a
// network trigger; opts adjust the ElastiService.
func networkApp(t *testing.T, e *Env, opts ...estest.Option) (string, string) {
	t.Helper()
	ns, ip := demoApp(t, e)
	e.Create(t, estest.New(ns, "demoapp", append([]estest.Option{estest.Cooldown(5), networkTrigger}, opts...)...))
	return ns, ip
}

// stopPrometheus stops the cluster's Prometheus until the test ends.
func stopPrometheus(t *testing.T, e *Env) {
	t.Helper()
	if err := e.ClusterCLI("prometheus-stop"); err != nil {
		t.Fatalf("stop Prometheus: %v", err)
	}
	t.Cleanup(func() {
		if err := e.ClusterCLI("prometheus-start"); err != nil {
			t.Errorf("restart Prometheus: %v", err)
		}
	})
}

// stayAwake checks, for d, that the demo app in ns never leaves serve mode
// nor loses its replica, and that its triggers were evaluated as active
// meanwhile (not merely skipped). The callers hold 100 s: the trigger's
// 60 s window, then 40 s of the trigger measuring. (150 s until
// 2026-12-02, shortened because this test runs alone, Prometheus being
// stopped, and was the longest of that part of the suite.)
func stayAwake(t *testing.T, e *Env, ns string, d time.Duration) {
	t.Helper()
	StableFor(t, d, time.Second, func(ctx context.Context) error {
		es, err := e.GetElastiService(ctx, ns, "demoapp")
		if err != nil {
			return err
		}
		if es.Status.LastScaledDownTime != nil || es.Status.Mode == elastiv1alpha1.ModeProxy {
			return fmt.Errorf("went to sleep (mode %q, conditions %s)", es.Status.Mode, conditions(es))
		}
		n, _, err := e.Replicas(ctx, ns, "demoapp")
		if err == nil && n == 0 {
			err = errors.New("scaled to zero")
		}
		return err
	})
	// The trigger's own measure said active: not an unhealthy trigger
	// (a kubelet answering 500 for a moment, say), which keeps the target
	// awake too.
	Eventually(t, 30*time.Second, time.Second, func(ctx context.Context) error {
		es, err := e.GetElastiService(ctx, ns, "demoapp")
		if err != nil {
			return err
		}
		c := Condition(es, elastiv1alpha1.ConditionIdle)
		if c == nil || c.Reason != plan.ReasonTriggerActive || !strings.Contains(c.Message, "bytes received beyond the probes") {
			return fmt.Errorf("idle condition %+v, want reason %s from the network trigger's measure", c, plan.ReasonTriggerActive)
		}
		t.Logf("still awake after %s: %s", d, c.Message)
		return nil
	})
}

// TestNetworkTriggerWithoutPrometheus: with the cluster's Prometheus
// stopped for the whole test, network triggers (the kubelets' Summary API,
// no metrics in the app) put an HTTP and a plain TCP service to sleep after
// their cooldown and wake them on a request; keep awake a service that gets
// one small keep-alive request every 5 s, and one whose open WebSocket
// exchanges a message every 2 s, each of which sleeps once its client
// stops; and a request in the confirmation window calls the sleep off. A
// podMetrics trigger (the app's own counter, scraped by the operator)
// keeps the app awake under a request every 5 s, lets it sleep once they
// stop, and the app wakes on the next request, without Prometheus too.
//
// The demo app's HTTP readiness probe runs every second: about 460 B/s the
// trigger must set aside, ten times what the 5 s requests send.
func TestNetworkTriggerWithoutPrometheus(t *testing.T) {
	e := Get(t)
	e.InstallElasti(t)
	stopPrometheus(t, e)

	t.Run("HTTP service sleeps and wakes", func(t *testing.T) {
		t.Parallel()
		ns, ip := networkApp(t, e)
		start := time.Now()
		e.WaitAsleep(t, ns, "demoapp", 4*time.Minute)
		t.Logf("asleep %s after the ElastiService was created (cooldown 5 s, network window 60 s)", time.Since(start).Round(time.Second))
		body := []byte(strings.Repeat("network trigger ", 256))
		Eventually(t, 2*time.Minute, time.Second, func(ctx context.Context) error {
			return postWithBody(ctx, e.keepAliveClient(time.Minute), httpURL(ip, DemoHTTPPort), body)
		})
	})

	t.Run("podMetrics: the app's own counter, no Prometheus", func(t *testing.T) {
		t.Parallel()
		ns, ip := demoApp(t, e)
		// The demo app creates its counter's series on its first request
		// (until then the trigger says MetricNotFound, and keeps it awake).
		answers(t, e, httpURL(ip, DemoHTTPPort), time.Minute)
		e.Create(t, estest.New(ns, "demoapp", estest.Cooldown(5), estest.PodMetrics("http_requests_total", DemoHTTPTarget, "0.01")))
		// A request every 5 s (0.2/s) is above the threshold: awake.
		c := e.keepAliveClient(30 * time.Second)
		stop := every(5*time.Second, func(ctx context.Context) error {
			_, err := getBody(ctx, c, httpURL(ip, DemoHTTPPort))
			return err
		})
		StableFor(t, 90*time.Second, time.Second, func(ctx context.Context) error {
			n, _, err := e.Replicas(ctx, ns, "demoapp")
			if err == nil && n == 0 {
				err = errors.New("scaled to zero while the counter rises")
			}
			return err
		})
		if errs := stop(); len(errs) > 0 {
			t.Errorf("requests failed: %v", errs)
		}
		e.WaitAsleep(t, ns, "demoapp", 4*time.Minute)
		Eventually(t, 2*time.Minute, time.Second, func(ctx context.Context) error {
			return postWithBody(ctx, e.keepAliveClient(time.Minute), httpURL(ip, DemoHTTPPort), []byte("wake"))
		})
	})

	t.Run("TCP echo service sleeps and wakes", func(t *testing.T) {
		t.Parallel()
		ns := e.NewNamespace(t)
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"},
			Spec: corev1.ServiceSpec{
				Selector: DemoAppDeployment(ns, "echo", 1).Spec.Selector.MatchLabels,
				Ports:    []corev1.ServicePort{{Name: "tcp", Port: DemoTCPPort, TargetPort: intstr.FromString("tcp")}},
			},
		}
		e.Create(t, DemoAppDeployment(ns, "echo", 1), svc)
		e.WaitReadyEndpoints(t, ns, "echo", 1, 2*time.Minute)
		if err := e.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "echo"}, svc); err != nil {
			t.Fatal(err)
		}
		ip := svc.Spec.ClusterIP
		Eventually(t, time.Minute, 500*time.Millisecond, func(ctx context.Context) error {
			return e.tcpEcho(ctx, ip, "before") // until kube-proxy routes the Service
		})
		e.Create(t, estest.New(ns, "echo", estest.Cooldown(5), networkTrigger))
		e.WaitAsleep(t, ns, "echo", 4*time.Minute)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := e.tcpEcho(ctx, ip, "wake", "again"); err != nil {
			t.Fatalf("TCP echo at zero: %v", err)
		}
	})

	t.Run("a request every 5 s keeps the target awake", func(t *testing.T) {
		t.Parallel()
		ns, ip := networkApp(t, e)
		answers(t, e, httpURL(ip, DemoHTTPPort), time.Minute) // kube-proxy routes the Service
		// The smallest request a client sends: a GET on a kept-alive
		// connection, about 200 bytes with its ACK.
		c := e.keepAliveClient(30 * time.Second)
		stop := every(5*time.Second, func(ctx context.Context) error {
			_, err := getBody(ctx, c, httpURL(ip, DemoHTTPPort))
			return err
		})
		stayAwake(t, e, ns, 100*time.Second)
		if errs := stop(); len(errs) > 0 {
			t.Errorf("requests failed: %v", errs)
		}
		e.WaitAsleep(t, ns, "demoapp", 4*time.Minute)
	})

	t.Run("an open WebSocket with a message every 2 s keeps the target awake", func(t *testing.T) {
		t.Parallel()
		ns, _ := networkApp(t, e)
		url := "ws://" + net.JoinHostPort("demoapp."+ns+".svc.cluster.local", fmt.Sprint(DemoHTTPPort)) + "/ws"
		d := websocket.Dialer{NetDialContext: e.Dialer.DialContext, HandshakeTimeout: 30 * time.Second}
		var conn *websocket.Conn
		Eventually(t, time.Minute, 500*time.Millisecond, func(ctx context.Context) error {
			c, _, err := d.DialContext(ctx, url, nil) // until kube-proxy routes the Service
			conn = c
			return err
		})
		defer conn.Close()
		n := 0
		stop := every(2*time.Second, func(context.Context) error {
			n++
			msg := fmt.Sprintf("tick %d", n)
			_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
			_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			if err := conn.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
				return err
			}
			_, got, err := conn.ReadMessage()
			if err == nil && string(got) != msg {
				err = fmt.Errorf("echo returned %q, want %q", got, msg)
			}
			return err
		})
		stayAwake(t, e, ns, 100*time.Second)
		if errs := stop(); len(errs) > 0 {
			t.Errorf("WebSocket exchange failed: %v", errs)
		}
		conn.Close()
		e.WaitAsleep(t, ns, "demoapp", 4*time.Minute)
	})

	t.Run("a request in the confirmation window cancels the sleep", func(t *testing.T) {
		t.Parallel()
		ns, ip := networkApp(t, e, func(es *elastiv1alpha1.ElastiService) {
			es.Spec.ScaleDownGracePeriod = "30s"
		})
		answers(t, e, httpURL(ip, DemoHTTPPort), time.Minute)
		// The network trigger reports idle once its history covers a
		// window; the operator then writes the proxy slice and waits 30 s.
		Eventually(t, 4*time.Minute, 200*time.Millisecond, func(ctx context.Context) error {
			es, err := e.GetElastiService(ctx, ns, "demoapp")
			if err != nil {
				return err
			}
			if c := Condition(es, elastiv1alpha1.ConditionActive); c == nil || c.Reason != contract.ReasonScalingDown {
				return fmt.Errorf("no scale-down under way (conditions %s)", conditions(es))
			}
			return nil
		})
		// New clients, one a second, each on a new connection: kube-proxy
		// sends each to a resolver or to the pod (the proxy slice takes it a
		// moment to program), and one reaching a resolver is enough. (A
		// kept-alive connection opened before the window would stay on the
		// pod, where only the trigger sees it.)
		Eventually(t, 25*time.Second, time.Second, func(ctx context.Context) error {
			c := &http.Client{Transport: &http.Transport{DialContext: e.Dialer.DialContext, DisableKeepAlives: true}}
			if _, err := getBody(ctx, c, httpURL(ip, DemoHTTPPort)); err != nil {
				t.Errorf("request in the confirmation window: %v", err)
			}
			n, err := e.EventCount(ctx, ns, "demoapp", controller.EventSleepCancelled)
			if err == nil && n == 0 {
				err = errors.New("no SleepCancelled Event")
			}
			return err
		})
		es, err := e.GetElastiService(context.Background(), ns, "demoapp")
		if err != nil {
			t.Fatal(err)
		}
		if es.Status.LastScaledDownTime != nil {
			t.Errorf("scaled to zero at %s although traffic came in the confirmation window", es.Status.LastScaledDownTime)
		}
		if es.Status.LastSleepCancelledTime == nil {
			t.Error("status.lastSleepCancelledTime is unset")
		}
	})
}

// every calls f every interval until the returned stop is called, and
// stop returns f's errors.
func every(interval time.Duration, f func(ctx context.Context) error) (stop func() []error) {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var errs []error
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			callCtx, callCancel := context.WithTimeout(ctx, interval+30*time.Second)
			if err := f(callCtx); err != nil && ctx.Err() == nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s: %w", time.Now().Format("15:04:05"), err))
				mu.Unlock()
			}
			callCancel()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() []error {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return errs
	}
}

// getBody GETs url with c and returns the body of a 200 answer.
func getBody(ctx context.Context, c *http.Client, url string) (string, error) {
	_, body, err := get200(ctx, c, url)
	return body, err
}

// get200 GETs url with c and returns the headers and body of a 200 answer;
// another status is an error (the body is returned with it).
func get200(ctx context.Context, c *http.Client, url string) (http.Header, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return resp.Header, string(b), err
}
