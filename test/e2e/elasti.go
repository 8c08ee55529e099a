package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/testenv/estest"
)

// ElastiNamespace is where the operator and the resolvers run.
const ElastiNamespace = "elasti-system"

// Deployments of the install.
const (
	OperatorDeployment = "elasti-operator"
	ResolverDeployment = "elasti-resolver"
)

// Trigger queries the tests switch between: IdleQuery always reads as idle
// (below Threshold), BusyQuery never does.
const (
	IdleQuery = "vector(0)"
	BusyQuery = "vector(1)"
	Threshold = "0.5"
)

// Overlay is the kustomize overlay of config/default the tests install:
// short polling intervals and probe periods, the cluster's Prometheus.
func (e *Env) Overlay() string {
	return filepath.Join(e.Cluster.RepoRoot, "test", "e2e", "testdata", "elasti")
}

var install struct {
	once sync.Once
	err  error
}

// InstallElasti applies the overlay (once per test binary) and waits until
// the operator and resolver Deployments are fully rolled out and ready. On a
// reused cluster that already runs Elasti it also restarts both: the images
// keep their tag (:dev) when rebuilt, so an unchanged Deployment would keep
// running the previous build.
func (e *Env) InstallElasti(t testing.TB) {
	t.Helper()
	install.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		var existing appsv1.Deployment
		err := e.Client.Get(ctx, client.ObjectKey{Namespace: ElastiNamespace, Name: OperatorDeployment}, &existing)
		reused := err == nil
		if _, err := e.Cluster.Kubectl(ctx, "", "apply", "--server-side", "--force-conflicts", "-k", e.Overlay()); err != nil {
			install.err = err
			return
		}
		if reused {
			if _, err := e.Cluster.Kubectl(ctx, "", "-n", ElastiNamespace, "rollout", "restart",
				"deployment/"+OperatorDeployment, "deployment/"+ResolverDeployment); err != nil {
				install.err = err
				return
			}
		}
		install.err = e.WaitRolledOut(ctx, ElastiNamespace, OperatorDeployment, ResolverDeployment)
	})
	if install.err != nil {
		t.Fatalf("install Elasti: %v", install.err)
	}
}

// WaitRolledOut waits until each named Deployment has all its replicas
// updated, ready and available.
func (e *Env) WaitRolledOut(ctx context.Context, ns string, names ...string) error {
	for _, name := range names {
		err := Poll(ctx, 3*time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
			var d appsv1.Deployment
			if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d); err != nil {
				return err
			}
			want := ptr.Deref(d.Spec.Replicas, 1)
			s := d.Status
			if s.ObservedGeneration < d.Generation || s.UpdatedReplicas != want || s.ReadyReplicas != want || s.AvailableReplicas != want || s.Replicas != want {
				return fmt.Errorf("deployment %s/%s: %d/%d updated, %d ready, %d available, %d total", ns, name, s.UpdatedReplicas, want, s.ReadyReplicas, s.AvailableReplicas, s.Replicas)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// ElastiServiceFor returns an ElastiService for Service svc and its
// Deployment of the same name, with a 5 s cooldown and one Prometheus
// trigger on the cluster's Prometheus; opts adjust it further.
func (e *Env) ElastiServiceFor(ns, svc, query string, opts ...estest.Option) *elastiv1alpha1.ElastiService {
	return estest.New(ns, svc, append([]estest.Option{
		estest.Cooldown(5), estest.Prometheus(e.Cluster.PrometheusURL(), query, Threshold),
	}, opts...)...)
}

// RequestRateQuery is the demo app's request rate in namespace ns, as a
// user would write it: idle when nobody calls it.
func RequestRateQuery(ns, app string) string {
	return fmt.Sprintf(`sum(rate(http_requests_total{namespace=%q,app=%q}[10s])) or vector(0)`, ns, app)
}

// SetQuery switches the ElastiService's trigger query.
func (e *Env) SetQuery(t testing.TB, ns, name, query string) {
	t.Helper()
	e.UpdateElastiService(t, ns, name, func(es *elastiv1alpha1.ElastiService) {
		es.Spec.Triggers[0].Metadata.Query = query
	})
}

// UpdateElastiService applies mutate to the ElastiService, retrying on
// conflicts.
func (e *Env) UpdateElastiService(t testing.TB, ns, name string, mutate func(*elastiv1alpha1.ElastiService)) {
	t.Helper()
	Eventually(t, 30*time.Second, 100*time.Millisecond, func(ctx context.Context) error {
		var es elastiv1alpha1.ElastiService
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &es); err != nil {
			return err
		}
		mutate(&es)
		return e.Client.Update(ctx, &es)
	})
}

// GetElastiService reads an ElastiService.
func (e *Env) GetElastiService(ctx context.Context, ns, name string) (*elastiv1alpha1.ElastiService, error) {
	var es elastiv1alpha1.ElastiService
	err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &es)
	return &es, err
}

// ProxySlices lists the EndpointSlices Elasti wrote for Service ns/svc.
func (e *Env) ProxySlices(ctx context.Context, ns, svc string) ([]discoveryv1.EndpointSlice, error) {
	var l discoveryv1.EndpointSliceList
	err := e.Client.List(ctx, &l, client.InNamespace(ns), client.MatchingLabels{
		discoveryv1.LabelServiceName: svc,
		contract.LabelManagedBy:      contract.ManagedBy,
	})
	return l.Items, err
}

// Replicas returns a Deployment's spec.replicas and generation.
func (e *Env) Replicas(ctx context.Context, ns, name string) (int32, int64, error) {
	scale, err := e.Clientset.AppsV1().Deployments(ns).GetScale(ctx, name, metav1.GetOptions{})
	if err != nil {
		return 0, 0, err
	}
	var d appsv1.Deployment
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &d); err != nil {
		return 0, 0, err
	}
	return scale.Spec.Replicas, d.Generation, nil
}

// WaitAsleep waits until ElastiService ns/name is in proxy mode with a proxy
// slice listing ready resolvers, and its Deployment is at zero replicas with
// no ready endpoint of its own.
func (e *Env) WaitAsleep(t testing.TB, ns, name string, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, 200*time.Millisecond, func(ctx context.Context) error { return e.Asleep(ctx, ns, name) })
}

// Asleep returns nil once ElastiService ns/name is at zero as a client sees
// it: proxy mode, a proxy slice with ready resolvers, the target at zero
// replicas, its pods gone from the Service's own slices, and kube-proxy no
// longer routing to them. Otherwise it says what is still missing.
func (e *Env) Asleep(ctx context.Context, ns, name string) error {
	es, err := e.GetElastiService(ctx, ns, name)
	if err != nil {
		return err
	}
	if es.Status.Mode != elastiv1alpha1.ModeProxy {
		return fmt.Errorf("elastiservice %s/%s: mode %q, want proxy (conditions %s)", ns, name, es.Status.Mode, conditions(es))
	}
	slices, err := e.ProxySlices(ctx, ns, es.Spec.Service)
	if err != nil {
		return err
	}
	if len(slices) != 1 || readyIn(slices[0]) == 0 {
		return fmt.Errorf("service %s/%s: %d proxy slices, want 1 with ready resolvers", ns, es.Spec.Service, len(slices))
	}
	n, _, err := e.Replicas(ctx, ns, es.Spec.ScaleTargetRef.Name)
	if err != nil {
		return err
	}
	if n != 0 {
		return fmt.Errorf("target %s/%s has %d replicas, want 0", ns, es.Spec.ScaleTargetRef.Name, n)
	}
	// At zero means the pods are gone, not only asked to go: until a pod has
	// terminated, kube-proxy may still send it new connections it will never
	// answer (the Kubernetes termination race, which Elasti does not add to).
	left, err := e.ownEndpoints(ctx, ns, es.Spec.Service)
	if err != nil {
		return err
	}
	if left > 0 {
		return fmt.Errorf("service %s/%s still lists %d endpoints of its own pods", ns, es.Spec.Service, left)
	}
	// And kube-proxy has caught up: it no longer sends the Service's new
	// connections to a pod that is gone.
	return e.kubeProxyConverged(ctx, ns, es.Spec.Service)
}

// kubeProxyConverged checks that every address kube-proxy's iptables rules
// send Service ns/svc to is a ready endpoint in the Service's EndpointSlices
// now (the resolvers' proxy slice included).
func (e *Env) kubeProxyConverged(ctx context.Context, ns, svc string) error {
	var l discoveryv1.EndpointSliceList
	if err := e.Client.List(ctx, &l, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: svc}); err != nil {
		return err
	}
	ready := map[string]bool{}
	for _, s := range l.Items {
		for _, ep := range s.Endpoints {
			if contract.EndpointReady(ep.Conditions) {
				for _, a := range ep.Addresses {
					ready[a] = true
				}
			}
		}
	}
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", e.Cluster.NetNS, "iptables-save", "-t", "nat").Output()
	if err != nil {
		return fmt.Errorf("read kube-proxy's rules: %w", err)
	}
	comment := fmt.Sprintf("--comment \"%s/%s:", ns, svc)
	for _, line := range strings.Split(string(out), "\n") {
		_, dest, ok := strings.Cut(line, "--to-destination ")
		if !ok || !strings.Contains(line, comment) {
			continue
		}
		host, _, err := net.SplitHostPort(strings.Fields(dest)[0])
		if err != nil {
			return fmt.Errorf("parse kube-proxy rule %q: %w", line, err)
		}
		if !ready[host] {
			return fmt.Errorf("kube-proxy still sends %s/%s to %s, which is no ready endpoint", ns, svc, host)
		}
	}
	return nil
}

// OwnReadyEndpoints counts the ready endpoints (contract.EndpointReady) of
// Service ns/svc's own EndpointSlices, leaving out Elasti's proxy slice.
func (e *Env) OwnReadyEndpoints(ctx context.Context, ns, svc string) (int, error) {
	return e.countOwn(ctx, ns, svc, readyIn)
}

// ownEndpoints counts the endpoints of Service ns/svc's own EndpointSlices
// (not Elasti's proxy slice), whatever their conditions.
func (e *Env) ownEndpoints(ctx context.Context, ns, svc string) (int, error) {
	return e.countOwn(ctx, ns, svc, func(s discoveryv1.EndpointSlice) int { return len(s.Endpoints) })
}

// countOwn sums count over Service ns/svc's own EndpointSlices.
func (e *Env) countOwn(ctx context.Context, ns, svc string, count func(discoveryv1.EndpointSlice) int) (int, error) {
	var l discoveryv1.EndpointSliceList
	if err := e.Client.List(ctx, &l, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: svc}); err != nil {
		return 0, err
	}
	n := 0
	for _, s := range l.Items {
		if s.Labels[contract.LabelManagedBy] != contract.ManagedBy {
			n += count(s)
		}
	}
	return n, nil
}

// WaitAwake waits until ElastiService ns/name is in serve mode, its proxy
// slice is gone and the target has at least one ready endpoint.
func (e *Env) WaitAwake(t testing.TB, ns, name string, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, 200*time.Millisecond, func(ctx context.Context) error { return e.Awake(ctx, ns, name) })
}

// Awake returns nil once ElastiService ns/name is in serve mode, its proxy
// slice is gone and the target has at least one ready endpoint.
func (e *Env) Awake(ctx context.Context, ns, name string) error {
	es, err := e.GetElastiService(ctx, ns, name)
	if err != nil {
		return err
	}
	if es.Status.Mode != elastiv1alpha1.ModeServe {
		return fmt.Errorf("elastiservice %s/%s: mode %q, want serve", ns, name, es.Status.Mode)
	}
	slices, err := e.ProxySlices(ctx, ns, es.Spec.Service)
	if err != nil {
		return err
	}
	if len(slices) != 0 {
		return fmt.Errorf("service %s/%s still has %d proxy slices", ns, es.Spec.Service, len(slices))
	}
	n, err := e.ReadyEndpoints(ctx, ns, es.Spec.Service)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("service %s/%s has no ready endpoint", ns, es.Spec.Service)
	}
	return nil
}

func readyIn(s discoveryv1.EndpointSlice) int {
	n := 0
	for _, ep := range s.Endpoints {
		if contract.EndpointReady(ep.Conditions) {
			n++
		}
	}
	return n
}

func conditions(es *elastiv1alpha1.ElastiService) string {
	var parts []string
	for _, c := range es.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
	}
	return strings.Join(parts, " ")
}

// Condition returns the ElastiService's condition of type typ, or nil.
func Condition(es *elastiv1alpha1.ElastiService, typ string) *metav1.Condition {
	return meta.FindStatusCondition(es.Status.Conditions, typ)
}

// EventCount counts the Events with reason on the object named name in ns,
// including the repeats a series folds into one Event.
func (e *Env) EventCount(ctx context.Context, ns, name, reason string) (int, error) {
	l, err := e.Clientset.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.AndSelectors(
		fields.OneTermEqualSelector("involvedObject.name", name),
		fields.OneTermEqualSelector("reason", reason),
	).String()})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, ev := range l.Items {
		switch {
		case ev.Series != nil && ev.Series.Count > 0:
			n += int(ev.Series.Count)
		case ev.Count > 0:
			n += int(ev.Count)
		default:
			n++
		}
	}
	return n, nil
}

// LongHTTPClient is HTTPClient with a timeout long enough for a wake on a
// busy machine.
func (e *Env) LongHTTPClient() *http.Client {
	c := e.HTTPClient()
	c.Timeout = 90 * time.Second
	return c
}

// GetPrefix GETs url and wants 200 OK and a body that starts with want.
func GetPrefix(c *http.Client, url, want string) error {
	body, err := GetWith(context.Background(), c, url, "")
	if err != nil {
		return err
	}
	if !strings.HasPrefix(body, want) {
		return fmt.Errorf("GET %s: body %q, want it to start with %q", url, body, want)
	}
	return nil
}

// GetWith sends one GET with client and returns the body of a 200 answer; host,
// when set, overrides the Host header.
func GetWith(ctx context.Context, c *http.Client, url, host string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	if host != "" {
		req.Host = host
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return string(body), fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return string(body), nil
}

// DeleteAndWait deletes obj and waits until it is gone.
func (e *Env) DeleteAndWait(t testing.TB, obj client.Object, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := e.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete %T %s: %v", obj, obj.GetName(), err)
	}
	Eventually(t, timeout, 200*time.Millisecond, func(ctx context.Context) error {
		err := e.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return errors.New("still there")
	})
}

// Pods lists the pods of namespace ns matching labels.
func (e *Env) Pods(ctx context.Context, ns string, labels map[string]string) ([]corev1.Pod, error) {
	var l corev1.PodList
	err := e.Client.List(ctx, &l, client.InNamespace(ns), client.MatchingLabels(labels))
	return l.Items, err
}
