//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/activation"
	"elasti.dev/elasti/internal/contract"
)

// activate POSTs an activation call for ns/name to the operator's Service
// from the node's network, with token as bearer unless empty, and returns the
// status code. The call goes over TLS verified as the resolver verifies it:
// against the CA the operator publishes in the ConfigMap
// elasti-activation-ca, for the Service's DNS name. With plain, it goes
// over plain HTTP instead.
func activate(ctx context.Context, e *Env, ns, name, token string, plain bool) (int, string, error) {
	var svc corev1.Service
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ElastiNamespace, Name: OperatorDeployment}, &svc); err != nil {
		return 0, "", err
	}
	body, err := json.Marshal(contract.ActivationRequest{Namespace: ns, ElastiService: name})
	if err != nil {
		return 0, "", err
	}
	scheme, c := "http", e.HTTPClient()
	if !plain {
		var ca corev1.ConfigMap
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ElastiNamespace, Name: "elasti-activation-ca"}, &ca); err != nil {
			return 0, "", fmt.Errorf("the operator's published CA: %w", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM([]byte(ca.Data["ca.crt"])) {
			return 0, "", fmt.Errorf("ConfigMap elasti-activation-ca holds no PEM certificate in ca.crt")
		}
		scheme = "https"
		c = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			DialContext:     e.Dialer.DialContext,
			TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: OperatorDeployment + "." + ElastiNamespace + ".svc", MinVersion: tls.VersionTLS12},
		}}
	}
	url := scheme + "://" + net.JoinHostPort(svc.Spec.ClusterIP, fmt.Sprint(contract.DefaultActivationPort)) + contract.ActivationPath
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, strings.TrimSpace(string(b)), nil
}

// TestActivationRefused: the operator's activation server refuses callers
// that are not the resolver's ServiceAccount, and the target stays at zero.
func TestActivationRefused(t *testing.T) {
	t.Parallel()
	e := Get(t)
	ns, _ := sleepyDemoApp(t, e, idle)
	e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)

	ctx := context.Background()
	// Valid tokens minted by the TokenRequest API: one of another
	// ServiceAccount (the namespace's default one) for Elasti's activation
	// audience, and one of the resolver's own ServiceAccount for the API
	// server's audience, which is what its API token is: neither may wake.
	mint := func(ns, sa string, audiences ...string) string {
		var token string
		Eventually(t, time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
			tr, err := e.Clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
				Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600), Audiences: audiences},
			}, metav1.CreateOptions{})
			if err == nil {
				token = tr.Status.Token
			}
			return err
		})
		return token
	}
	otherSA := mint(ns, "default", activation.Audience)
	resolverAPIToken := mint(ElastiNamespace, "elasti-resolver") // the install's resolver ServiceAccount

	cases := []struct {
		name, token string
		plain       bool
		want        int
	}{
		{"no token", "", false, http.StatusUnauthorized},
		{"not a token", "not-a-token", false, http.StatusUnauthorized},
		{"another ServiceAccount's token", otherSA, false, http.StatusForbidden},
		{"the resolver's API-audience token", resolverAPIToken, false, http.StatusUnauthorized},
		// The activation port speaks TLS only: Go's TLS server answers a
		// plain HTTP request with 400 before any handler runs.
		{"plain HTTP", otherSA, true, http.StatusBadRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var code int
			var body string
			// Transport errors only (kube-proxy, a restarted operator) are
			// retried; any answer is final.
			Eventually(t, 30*time.Second, 250*time.Millisecond, func(ctx context.Context) error {
				var err error
				code, body, err = activate(ctx, e, ns, "demoapp", c.token, c.plain)
				return err
			})
			if code != c.want {
				t.Errorf("activation with %s: %d %q, want %d", c.name, code, body, c.want)
			}
		})
	}

	// None of the calls woke the target.
	StableFor(t, 3*time.Second, 500*time.Millisecond, func(ctx context.Context) error {
		n, _, err := e.Replicas(ctx, ns, "demoapp")
		if err == nil && n != 0 {
			err = fmt.Errorf("refused activation calls left the target at %d replicas", n)
		}
		return err
	})
	es, err := e.GetElastiService(ctx, ns, "demoapp")
	if err != nil {
		t.Fatal(err)
	}
	if es.Status.Mode != elastiv1alpha1.ModeProxy {
		t.Errorf("mode %q after refused activation calls, want proxy", es.Status.Mode)
	}
}

// resolverPort returns the resolver port of Service port name in the
// ElastiService's status.
func resolverPort(t testing.TB, es *elastiv1alpha1.ElastiService, name string) int32 {
	t.Helper()
	for _, p := range es.Status.ProxyPorts {
		if p.Name == name {
			return p.ResolverPort
		}
	}
	t.Fatalf("elastiservice %s/%s has no resolver port for %q: %v", es.Namespace, es.Name, name, es.Status.ProxyPorts)
	return 0
}

// unmappedResolverPort returns a resolver port of the install's range that
// no ElastiService in the cluster holds now, picked at random.
func (e *Env) unmappedResolverPort(ctx context.Context) (int32, error) {
	var all elastiv1alpha1.ElastiServiceList
	if err := e.Client.List(ctx, &all); err != nil {
		return 0, err
	}
	taken := map[int32]bool{}
	for _, es := range all.Items {
		for _, p := range es.Status.ProxyPorts {
			taken[p.ResolverPort] = true
		}
	}
	var free []int32
	for p := int32(contract.DefaultPortRangeStart); p <= contract.DefaultPortRangeEnd; p++ {
		if !taken[p] {
			free = append(free, p)
		}
	}
	if len(free) == 0 {
		return 0, errors.New("every resolver port is taken")
	}
	return free[rand.N(len(free))], nil
}

// TestResolverPortIsolation: a resolver port leads to its own Service only.
// With two services asleep, a request on A's resolver port that names B in
// its Host header (or in an absolute-form target) is refused with 421 and
// wakes no one; one that names A is answered by A's pods; B stays asleep
// throughout; and a resolver port no ElastiService holds is refused.
func TestResolverPortIsolation(t *testing.T) {
	t.Parallel()
	e := Get(t)
	e.InstallElasti(t)
	ns := e.NewNamespace(t)
	for _, app := range []string{"app-a", "app-b"} {
		e.Create(t, DemoAppDeployment(ns, app, 1), DemoAppService(ns, app))
	}
	for _, app := range []string{"app-a", "app-b"} {
		e.WaitReadyEndpoints(t, ns, app, 1, 2*time.Minute)
		e.Create(t, e.ElastiServiceFor(ns, app, IdleQuery))
	}
	for _, app := range []string{"app-a", "app-b"} {
		e.WaitAsleep(t, ns, app, 2*time.Minute)
	}
	ctx := context.Background()
	a, err := e.GetElastiService(ctx, ns, "app-a")
	if err != nil {
		t.Fatal(err)
	}
	portA := resolverPort(t, a, "http")
	resolvers, err := e.Pods(ctx, ElastiNamespace, map[string]string{contract.LabelComponent: contract.ComponentResolver})
	if err != nil {
		t.Fatal(err)
	}
	var resolverIP string
	for _, p := range resolvers {
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			resolverIP = p.Status.PodIP
			break
		}
	}
	if resolverIP == "" {
		t.Fatal("no running resolver pod")
	}

	hostA, hostB := "app-a."+ns+".svc.cluster.local", "app-b."+ns+".svc.cluster.local"
	t.Run("A's port with B's Host", func(t *testing.T) {
		c := e.HTTPClient()
		for _, path := range []string{"/", "http://" + hostB + "/"} {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(resolverIP, fmt.Sprint(portA))+"/", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = hostB
			if path != "/" {
				// Absolute-form request target naming B as well.
				req.URL.Opaque = path
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatalf("request %s on A's resolver port: %v", path, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusMisdirectedRequest {
				t.Errorf("request %s on A's resolver port %d with Host %s: %s %q, want 421", path, portA, hostB, resp.Status, body)
			}
		}
		n, _, err := e.Replicas(ctx, ns, "app-a")
		if err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("app-a at %d replicas after requests that named B only", n)
		}
	})

	// A answers once woken and then stays up; B must never wake.
	e.SetQuery(t, ns, "app-a", BusyQuery)
	t.Run("A's port with A's Host", func(t *testing.T) {
		c := e.LongHTTPClient()
		for _, path := range []string{"/", "http://" + hostA + "/"} {
			reqCtx, cancel := context.WithTimeout(ctx, wakeTimeout)
			req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, "http://"+net.JoinHostPort(resolverIP, fmt.Sprint(portA))+"/", nil)
			if err != nil {
				cancel()
				t.Fatal(err)
			}
			req.Host = hostA
			if path != "/" {
				req.URL.Opaque = path
			}
			resp, err := c.Do(req)
			if err != nil {
				cancel()
				t.Fatalf("request %s on A's resolver port: %v", path, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			cancel()
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(body), "hello from app-a-") {
				t.Errorf("request %s on A's resolver port %d with Host %s: %s %q, want A's answer", path, portA, hostA, resp.Status, body)
			}
		}
	})

	// A scan of the port range calls the resolver pod by its address: a
	// mapped port (B's, asleep) and an unmapped one give the same 421, and
	// nothing wakes.
	t.Run("a scan by the resolver's address", func(t *testing.T) {
		b, err := e.GetElastiService(ctx, ns, "app-b")
		if err != nil {
			t.Fatal(err)
		}
		answer := func(ctx context.Context, port int32) (string, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(resolverIP, fmt.Sprint(port))+"/", nil)
			if err != nil {
				return "", err
			}
			resp, err := e.HTTPClient().Do(req)
			if err != nil {
				return "", err
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return fmt.Sprintf("%s %s", resp.Status, body), nil
		}
		portB := resolverPort(t, b, "http")
		mapped, err := answer(ctx, portB)
		if err != nil || !strings.HasPrefix(mapped, "421 ") {
			t.Fatalf("B's port %d by the resolver's address: %q %v, want 421", portB, mapped, err)
		}
		Eventually(t, 2*time.Minute, time.Second, func(ctx context.Context) error {
			unmapped, err := e.unmappedResolverPort(ctx)
			if err != nil {
				return err
			}
			got, err := answer(ctx, unmapped)
			if err != nil {
				return err
			}
			if got != mapped {
				return fmt.Errorf("unmapped port %d answers %q, mapped port %d %q: a scan tells them apart", unmapped, got, portB, mapped)
			}
			return nil
		})
	})

	// Other tests' ElastiServices take and release resolver ports while
	// this one runs, and a released port stays mapped for the 30s linger:
	// a port that no ElastiService held when listed but is answered
	// otherwise than with 404 is left for another one, free on a fresh
	// list. A resolver that forwarded unmapped ports would answer none of
	// them with 404.
	t.Run("unmapped port refused", func(t *testing.T) {
		Eventually(t, 2*time.Minute, time.Second, func(ctx context.Context) error {
			unmapped, err := e.unmappedResolverPort(ctx)
			if err != nil {
				return err
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(resolverIP, fmt.Sprint(unmapped))+"/", nil)
			if err != nil {
				return err
			}
			req.Host = hostB
			resp, err := e.HTTPClient().Do(req)
			if err != nil {
				return fmt.Errorf("unmapped port %d: %w, want a 404 answer", unmapped, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				return fmt.Errorf("unmapped port %d: %s %q, want 404", unmapped, resp.Status, body)
			}
			t.Logf("unmapped port %d: %s %q", unmapped, resp.Status, strings.TrimSpace(string(body)))
			return nil
		})
	})

	// Once A is warm and served directly, its resolver port is no way
	// around the Service: after the released-port linger (30s, while
	// routing converges) the resolver no longer maps it. Before, a warm
	// backend stayed reachable through resolverIP:port from any pod,
	// whatever NetworkPolicies protected it.
	t.Run("A's port once A is warm", func(t *testing.T) {
		e.WaitAwake(t, ns, "app-a", 2*time.Minute)
		warmSince := time.Now()
		Eventually(t, 2*time.Minute, time.Second, func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(resolverIP, fmt.Sprint(portA))+"/", nil)
			if err != nil {
				return err
			}
			// A's own name: by the resolver's address the port answers
			// 421, mapped or not (the scan subtest).
			req.Host = hostA
			resp, err := e.HTTPClient().Do(req)
			if err != nil {
				return err
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				return fmt.Errorf("A's resolver port %d while A is warm: %s %q, want 404", portA, resp.Status, body)
			}
			return nil
		})
		t.Logf("A's resolver port unmapped %s after A was served directly", time.Since(warmSince).Round(time.Second))
	})

	// B never woke.
	StableFor(t, 3*time.Second, 500*time.Millisecond, func(ctx context.Context) error {
		n, _, err := e.Replicas(ctx, ns, "app-b")
		if err == nil && n != 0 {
			err = fmt.Errorf("app-b at %d replicas: a request for it went through another Service's port", n)
		}
		return err
	})
	b, err := e.GetElastiService(ctx, ns, "app-b")
	if err != nil {
		t.Fatal(err)
	}
	if b.Status.Mode != elastiv1alpha1.ModeProxy {
		t.Errorf("app-b mode %q, want proxy", b.Status.Mode)
	}
}
