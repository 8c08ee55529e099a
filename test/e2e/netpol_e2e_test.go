//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"elasti.dev/elasti/internal/contract"
)

// relayGet asks the relay pod at relayIP (the demo app with RELAY=true) to
// GET target from its own address, giving up after wait, and returns
// target's status line and body as the relay saw them, or the relay's error
// (a refused or timed-out dial from that pod).
func relayGet(ctx context.Context, e *Env, relayIP, target string, wait time.Duration) (string, error) {
	q := url.Values{"url": {target}, "timeout": {wait.String()}}
	u := "http://" + net.JoinHostPort(relayIP, fmt.Sprint(DemoHTTPTarget)) + "/relay?" + q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	c := e.HTTPClient()
	c.Timeout = wait + 10*time.Second
	resp, err := c.Do(req)
	if err != nil {
		return "", fmt.Errorf("relay %s: %w", relayIP, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("relay %s could not GET %s: %s %s", relayIP, target, resp.Status, strings.TrimSpace(string(body)))
	}
	return string(body), nil
}

// policyWait is how long a relay waits for an answer in the policy checks:
// a connection the policy drops is never answered, and ends there.
const policyWait = 5 * time.Second

// TestNetworkPolicyNotBypassedThroughResolver runs on the local cluster's
// policy-enforcing network (kube-router's network policy controller, see
// docs/local-cluster.md). A NetworkPolicy admits to the backend only pods
// labelled role=frontend, and the resolvers, as docs/configuration.md tells
// users to. A pod without that label is kept from the backend: directly, and,
// once the target is warm, through the resolver port its ElastiService used
// while asleep. Before ports were unmapped in serve mode, that port led to
// the warm backend from any pod, whatever the policy said.
//
// The clients are pods (the demo app's relay), not the test process: the
// cluster's network admits everything from the node itself, as real network
// plugins do for kubelet probes.
func TestNetworkPolicyNotBypassedThroughResolver(t *testing.T) {
	t.Parallel()
	e := Get(t)
	e.InstallElasti(t)
	ns := e.NewNamespace(t)
	ctx := context.Background()

	relay := func(name string, labels map[string]string) *appsv1.Deployment {
		d := DemoAppDeployment(ns, name, 1)
		for k, v := range labels {
			d.Spec.Template.Labels[k] = v
		}
		c := &d.Spec.Template.Spec.Containers[0]
		c.Env = append(c.Env, corev1.EnvVar{Name: "RELAY", Value: "true"})
		return d
	}
	e.Create(t, DemoAppDeployment(ns, "guarded", 1), DemoAppService(ns, "guarded"),
		relay("frontend", map[string]string{"role": "frontend"}), relay("outsider", nil))
	if err := e.WaitRolledOut(ctx, ns, "guarded", "frontend", "outsider"); err != nil {
		t.Fatal(err)
	}
	e.WaitReadyEndpoints(t, ns, "guarded", 1, 2*time.Minute)
	podIP := func(app string) string {
		t.Helper()
		var ip string
		Eventually(t, time.Minute, time.Second, func(ctx context.Context) error {
			pods, err := e.Pods(ctx, ns, map[string]string{"app": app})
			if err != nil {
				return err
			}
			for _, p := range pods {
				if p.Status.PodIP != "" && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
					ip = p.Status.PodIP
					return nil
				}
			}
			return fmt.Errorf("no running pod of %s", app)
		})
		return ip
	}
	frontend, outsider := podIP("frontend"), podIP("outsider")
	backendURL := "http://" + net.JoinHostPort(podIP("guarded"), fmt.Sprint(DemoHTTPTarget)) + "/"
	serviceURL := fmt.Sprintf("http://guarded.%s.svc.cluster.local:%d/", ns, DemoHTTPPort)

	// Without a policy both relays reach the backend.
	for _, r := range []string{frontend, outsider} {
		Eventually(t, time.Minute, time.Second, func(ctx context.Context) error {
			body, err := relayGet(ctx, e, r, backendURL, policyWait)
			if err == nil && !strings.Contains(body, "hello from guarded-") {
				err = fmt.Errorf("relay %s got %q", r, body)
			}
			return err
		})
	}

	tcp := corev1.ProtocolTCP
	e.Create(t, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: ns},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr.To(intstr.FromInt32(DemoHTTPTarget))}},
				From: []networkingv1.NetworkPolicyPeer{
					{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "frontend"}}},
					// What docs/configuration.md asks of users: admit the
					// resolvers, which forward held requests from their own
					// addresses.
					{
						NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ElastiNamespace}},
						PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{contract.LabelComponent: contract.ComponentResolver}},
					},
				},
			}},
		},
	})
	// The policy is enforced: the outsider is cut off, the frontend is not.
	Eventually(t, time.Minute, time.Second, func(ctx context.Context) error {
		if body, err := relayGet(ctx, e, outsider, backendURL, policyWait); err == nil {
			return fmt.Errorf("outsider still reaches the backend under the policy: %q", body)
		}
		return nil
	})
	checkPolicy := func(ctx context.Context) error {
		if body, err := relayGet(ctx, e, outsider, backendURL, policyWait); err == nil {
			return fmt.Errorf("outsider reaches the backend directly: %q", body)
		}
		if body, err := relayGet(ctx, e, frontend, backendURL, policyWait); err != nil || !strings.Contains(body, "hello from guarded-") {
			return fmt.Errorf("frontend cut off from the backend: %q %w", body, err)
		}
		return nil
	}
	StableFor(t, 5*time.Second, time.Second, checkPolicy)

	// Put the target to sleep, then wake it with the frontend's request
	// through the Service: the resolvers are admitted, so the held request
	// is answered.
	e.Create(t, e.ElastiServiceFor(ns, "guarded", IdleQuery))
	e.WaitAsleep(t, ns, "guarded", 3*time.Minute)
	es, err := e.GetElastiService(ctx, ns, "guarded")
	if err != nil {
		t.Fatal(err)
	}
	port := resolverPort(t, es, "http")
	resolverIP := ""
	resolvers, err := e.Pods(ctx, ElastiNamespace, map[string]string{contract.LabelComponent: contract.ComponentResolver})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range resolvers {
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			resolverIP = p.Status.PodIP
			break
		}
	}
	if resolverIP == "" {
		t.Fatal("no running resolver pod")
	}
	viaResolver := "http://" + net.JoinHostPort(resolverIP, fmt.Sprint(port)) + "/"
	e.SetQuery(t, ns, "guarded", BusyQuery)
	// The relay waits for the wake, which takes longer than a policy check
	// on a machine busy with other tests.
	wakeCtx, cancel := context.WithTimeout(ctx, wakeTimeout)
	body, err := relayGet(wakeCtx, e, frontend, serviceURL, wakeTimeout)
	cancel()
	if err != nil || !strings.Contains(body, "200 OK") || !strings.Contains(body, "hello from guarded-") {
		t.Fatalf("frontend's request to the sleeping Service: %q %v", body, err)
	}

	// Warm and served directly: the resolver port leads nowhere, for the
	// outsider or anyone. Called by the resolver pod's own address, as
	// here, it answers 421 whether mapped or not (a scan learns nothing);
	// TestResolverPortIsolation shows the port unmapped after the linger
	// with the Service's name.
	e.WaitAwake(t, ns, "guarded", 2*time.Minute)
	backendURL = "http://" + net.JoinHostPort(podIP("guarded"), fmt.Sprint(DemoHTTPTarget)) + "/" // the woken pod's
	// The policy controller programs the woken pod's address a moment
	// after it starts: until then the outsider reaches it directly, which
	// is no bypass through the resolver. (This wait was hidden in the 30s
	// linger while the resolver port answered 404 only after it.)
	Eventually(t, 2*time.Minute, time.Second, checkPolicy)
	warmSince := time.Now()
	Eventually(t, 2*time.Minute, time.Second, func(ctx context.Context) error {
		body, err := relayGet(ctx, e, outsider, viaResolver, policyWait)
		if err != nil {
			return err
		}
		if !strings.HasPrefix(body, "404 ") && !strings.HasPrefix(body, "421 ") {
			return fmt.Errorf("outsider through resolver port %d of the warm target: %q, want a 404 or 421", port, body)
		}
		return nil
	})
	t.Logf("resolver port %d refuses the outsider %s after the target was served directly", port, time.Since(warmSince).Round(time.Second))
	StableFor(t, 10*time.Second, time.Second, func(ctx context.Context) error {
		if body, err := relayGet(ctx, e, outsider, viaResolver, policyWait); err == nil && strings.Contains(body, "hello from guarded-") {
			return fmt.Errorf("outsider reached the warm backend through resolver port %d: %q", port, body)
		}
		return checkPolicy(ctx)
	})
}
