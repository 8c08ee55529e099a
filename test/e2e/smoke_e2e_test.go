//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/wrapperspb"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestSmoke proves the local cluster carries real traffic: the demo app is
// reachable by ClusterIP and by DNS name from inside the cluster network, on
// every protocol it serves, and its EndpointSlice follows a 0->1->0 scale.
func TestSmoke(t *testing.T) {
	t.Parallel()
	e := Get(t)
	ns := e.NewNamespace(t)
	const name = "demoapp"
	e.Create(t, DemoAppDeployment(ns, name, 1), DemoAppService(ns, name))
	e.WaitReadyEndpoints(t, ns, name, 1, 2*time.Minute)

	var svc corev1.Service
	if err := e.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &svc); err != nil {
		t.Fatal(err)
	}
	dnsName := fmt.Sprintf("%s.%s.svc.cluster.local", name, ns)
	hosts := map[string]string{"ClusterIP": svc.Spec.ClusterIP, "DNS": dnsName}

	for via, host := range hosts {
		t.Run("http via "+via, func(t *testing.T) {
			// kube-proxy may program a new Service a moment after its
			// endpoints appear: retry briefly.
			url := fmt.Sprintf("http://%s/", net.JoinHostPort(host, fmt.Sprint(DemoHTTPPort)))
			Eventually(t, 30*time.Second, 200*time.Millisecond, func(ctx context.Context) error {
				body, err := e.HTTPGet(ctx, url)
				if err == nil && !strings.HasPrefix(body, "hello from "+name) {
					return fmt.Errorf("unexpected body %q", body)
				}
				return err
			})
		})
	}
	t.Run("grpc health and echo via DNS", func(t *testing.T) {
		target := net.JoinHostPort(dnsName, fmt.Sprint(DemoGRPCPort))
		conn, err := grpc.NewClient("passthrough:///"+target,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
				return e.Dialer.DialContext(ctx, "tcp", addr)
			}))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		Eventually(t, 30*time.Second, 200*time.Millisecond, func(ctx context.Context) error {
			resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
			if err != nil {
				return err
			}
			if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				return fmt.Errorf("health %v", resp.GetStatus())
			}
			var out wrapperspb.StringValue
			if err := conn.Invoke(ctx, "/elasti.demo.Echo/Echo", wrapperspb.String("ping"), &out); err != nil {
				return err
			}
			if out.GetValue() != "ping" {
				return fmt.Errorf("echo returned %q", out.GetValue())
			}
			return nil
		})
	})
	t.Run("tcp echo via ClusterIP", func(t *testing.T) {
		addr := net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(DemoTCPPort))
		Eventually(t, 30*time.Second, 200*time.Millisecond, func(ctx context.Context) error {
			conn, err := e.Dialer.DialContext(ctx, "tcp", addr)
			if err != nil {
				return err
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := fmt.Fprintln(conn, "ping"); err != nil {
				return err
			}
			line, err := bufio.NewReader(conn).ReadString('\n')
			if err != nil {
				return err
			}
			if line != "ping\n" {
				return fmt.Errorf("echo returned %q", line)
			}
			return nil
		})
	})
	t.Run("websocket echo via DNS", func(t *testing.T) {
		d := websocket.Dialer{NetDialContext: e.Dialer.DialContext, HandshakeTimeout: 5 * time.Second}
		url := fmt.Sprintf("ws://%s/ws", net.JoinHostPort(dnsName, fmt.Sprint(DemoHTTPPort)))
		Eventually(t, 30*time.Second, 200*time.Millisecond, func(ctx context.Context) error {
			conn, _, err := d.DialContext(ctx, url, nil)
			if err != nil {
				return err
			}
			defer conn.Close()
			if err := conn.WriteMessage(websocket.TextMessage, []byte("ping")); err != nil {
				return err
			}
			_, msg, err := conn.ReadMessage()
			if err != nil {
				return err
			}
			if string(msg) != "ping" {
				return fmt.Errorf("echo returned %q", msg)
			}
			return nil
		})
	})
	if t.Failed() {
		return
	}

	t.Run("scale 0->1->0 and the EndpointSlice follows", func(t *testing.T) {
		e.Scale(t, ns, name, 0)
		e.WaitReadyEndpoints(t, ns, name, 0, time.Minute)

		start := time.Now()
		e.Scale(t, ns, name, 1)
		e.WaitReadyEndpoints(t, ns, name, 1, 2*time.Minute)
		t.Logf("0->1: ready endpoint after %s", time.Since(start).Round(10*time.Millisecond))
		url := fmt.Sprintf("http://%s/", net.JoinHostPort(dnsName, fmt.Sprint(DemoHTTPPort)))
		Eventually(t, 30*time.Second, 200*time.Millisecond, func(ctx context.Context) error {
			_, err := e.HTTPGet(ctx, url)
			return err
		})

		e.Scale(t, ns, name, 0)
		e.WaitReadyEndpoints(t, ns, name, 0, time.Minute)
	})
}
