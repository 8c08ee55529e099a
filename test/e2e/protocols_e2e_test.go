//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Second HTTP port of the multi-port Service: the demo app's HTTP listener
// again, under another Service port.
const demoHTTPAltPort = 8081

// wakeTimeout bounds one call at zero: a wake on a busy 2-core machine.
const wakeTimeout = 90 * time.Second

// atZero puts ElastiService ns/name to sleep (idle trigger), then makes the
// trigger busy so that the next call is the only wake, and runs call. The
// call gets one attempt: it must be held and answered.
func atZero(t *testing.T, e *Env, ns, name string, call func(ctx context.Context) error) {
	t.Helper()
	e.SetQuery(t, ns, name, IdleQuery)
	e.WaitAsleep(t, ns, name, 2*time.Minute)
	e.SetQuery(t, ns, name, BusyQuery)
	ctx, cancel := context.WithTimeout(context.Background(), wakeTimeout)
	defer cancel()
	start := time.Now()
	if err := call(ctx); err != nil {
		t.Fatalf("call at zero failed after %s: %v", time.Since(start).Round(time.Millisecond), err)
	}
	t.Logf("call at zero answered in %s", time.Since(start).Round(time.Millisecond))
	e.WaitAwake(t, ns, name, time.Minute)
}

// TestMultiPortHTTPWake: a Service with two HTTP ports; a request at zero on
// either port wakes the target and is answered on that port.
func TestMultiPortHTTPWake(t *testing.T) {
	t.Parallel()
	e := Get(t)
	e.InstallElasti(t)
	ns := e.NewNamespace(t)
	svc := DemoAppService(ns, "demoapp")
	svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{
		Name: "http-alt", Port: demoHTTPAltPort, TargetPort: intstr.FromString("http"), AppProtocol: ptr.To("http"),
	})
	e.Create(t, DemoAppDeployment(ns, "demoapp", 1), svc)
	e.WaitReadyEndpoints(t, ns, "demoapp", 1, 2*time.Minute)
	e.Create(t, e.ElastiServiceFor(ns, "demoapp", IdleQuery))
	clusterIP := svc.Spec.ClusterIP
	if clusterIP == "" {
		t.Fatal("the created Service has no ClusterIP")
	}

	e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)
	es, err := e.GetElastiService(context.Background(), ns, "demoapp")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int32]bool{}
	for _, p := range es.Status.ProxyPorts {
		if seen[p.ResolverPort] {
			t.Errorf("resolver port %d allocated twice: %v", p.ResolverPort, es.Status.ProxyPorts)
		}
		seen[p.ResolverPort] = true
	}
	if len(es.Status.ProxyPorts) != 4 {
		t.Errorf("status.proxyPorts = %v, want one per Service port (4)", es.Status.ProxyPorts)
	}

	for _, port := range []int{DemoHTTPPort, demoHTTPAltPort} {
		t.Run(fmt.Sprintf("port %d", port), func(t *testing.T) {
			atZero(t, e, ns, "demoapp", func(ctx context.Context) error {
				body, err := GetWith(ctx, e.LongHTTPClient(), httpURL(clusterIP, port), "")
				if err == nil && !strings.HasPrefix(body, "hello from demoapp") {
					err = fmt.Errorf("body %q", body)
				}
				return err
			})
		})
	}
}

// TestProtocolsThroughWake: WebSocket, gRPC over h2c and a plain TCP echo,
// each opened while the target is at zero, are held through the wake.
func TestProtocolsThroughWake(t *testing.T) {
	t.Parallel()
	e := Get(t)
	ns, clusterIP := sleepyDemoApp(t, e, idle)
	dnsName := "demoapp." + ns + ".svc.cluster.local"

	t.Run("websocket", func(t *testing.T) {
		atZero(t, e, ns, "demoapp", func(ctx context.Context) error {
			d := websocket.Dialer{NetDialContext: e.Dialer.DialContext, HandshakeTimeout: wakeTimeout}
			return wsPingPong(ctx, d, "ws://"+net.JoinHostPort(dnsName, fmt.Sprint(DemoHTTPPort))+"/ws")
		})
	})

	t.Run("grpc h2c", func(t *testing.T) {
		atZero(t, e, ns, "demoapp", func(ctx context.Context) error { return e.grpcEcho(ctx, clusterIP, "wake") })
	})

	t.Run("tcp echo", func(t *testing.T) {
		atZero(t, e, ns, "demoapp", func(ctx context.Context) error { return e.tcpEcho(ctx, clusterIP, "ping", "pong") })
	})
}

// grpcEcho calls the demo app's echo RPC over h2c on ip's gRPC port, on a
// connection of its own, and checks that msg comes back.
func (e *Env) grpcEcho(ctx context.Context, ip, msg string) error {
	conn, err := grpc.NewClient("passthrough:///"+net.JoinHostPort(ip, fmt.Sprint(DemoGRPCPort)),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return e.Dialer.DialContext(ctx, "tcp", addr)
		}))
	if err != nil {
		return err
	}
	defer conn.Close()
	var out wrapperspb.StringValue
	if err := conn.Invoke(ctx, "/elasti.demo.Echo/Echo", wrapperspb.String(msg), &out); err != nil {
		return err
	}
	if out.GetValue() != msg {
		return fmt.Errorf("echo returned %q, want %q", out.GetValue(), msg)
	}
	return nil
}

// tcpEcho opens one connection to ip's TCP echo port and, in turn, writes
// each line of msgs and checks that it comes back, until ctx's deadline.
// The first line is written as soon as the connection opens: at zero, it
// waits in the resolver with the connection.
func (e *Env) tcpEcho(ctx context.Context, ip string, msgs ...string) error {
	conn, err := e.Dialer.DialContext(ctx, "tcp", net.JoinHostPort(ip, fmt.Sprint(DemoTCPPort)))
	if err != nil {
		return err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	r := bufio.NewReader(conn)
	for _, msg := range msgs {
		if _, err := fmt.Fprintln(conn, msg); err != nil {
			return err
		}
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if line != msg+"\n" {
			return fmt.Errorf("echo returned %q, want %q", line, msg)
		}
	}
	return nil
}

// wsPingPong opens a WebSocket to the demo app's echo at url with d and
// has two messages echoed. A refused handshake's error carries the answer's
// status, headers and the start of its body.
func wsPingPong(ctx context.Context, d websocket.Dialer, url string) error {
	conn, resp, err := d.DialContext(ctx, url, nil)
	if err != nil {
		if resp != nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			return fmt.Errorf("handshake: %w: %s %q (%s)", err, resp.Status, body, resp.Header)
		}
		return fmt.Errorf("handshake: %w", err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	for _, msg := range []string{"ping", "pong"} {
		if err := conn.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
			return err
		}
		_, got, err := conn.ReadMessage()
		if err != nil {
			return err
		}
		if string(got) != msg {
			return fmt.Errorf("echo returned %q, want %q", got, msg)
		}
	}
	return nil
}
