//go:build bench

package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/test/e2e"
)

const (
	demoPort     = e2e.DemoHTTPTarget
	servicePort  = e2e.DemoHTTPPort
	appName      = "app"
	benchLabel   = "elasti.dev/bench"
	managedByNot = contract.LabelManagedBy + "!=" + contract.ManagedBy
)

// The pods of Elasti's components.
var (
	operatorPods = labels.Set{contract.LabelComponent: contract.ComponentOperator}
	resolverPods = labels.Set{contract.LabelComponent: contract.ComponentResolver}
)

// kube is the bench's view of the cluster, the end-to-end tests' Env; set
// by connect.
var kube *e2e.Env

func (b *bench) connect() error {
	if !b.cfg.Running() {
		return fmt.Errorf("the local cluster is not running (hack/bench.sh brings it up)")
	}
	// The scale figure creates 3,000 objects from eight workers.
	env, err := e2e.NewEnv(b.cfg, func(rc *rest.Config) { rc.QPS, rc.Burst = 200, 400 })
	if err != nil {
		return err
	}
	kube = env
	return nil
}

func (b *bench) serverVersion() string {
	v, err := kube.Clientset.Discovery().ServerVersion()
	if err != nil {
		return "unknown"
	}
	return v.GitVersion
}

// overlay is the kustomization the bench installs Elasti from.
func (b *bench) overlay() string { return filepath.Join(b.cfg.RepoRoot, "bench", "testdata", "elasti") }

// uninstall removes an Elasti an earlier run left on a reused cluster, so
// that "without Elasti" is true and the run measures fresh pods of the
// images just built. ElastiServices go first, while their operator can still
// release them.
func (b *bench) uninstall(ctx context.Context) error {
	var ns corev1.Namespace
	err := kube.Client.Get(ctx, client.ObjectKey{Name: e2e.ElastiNamespace}, &ns)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	logf("removing the Elasti an earlier run left installed")
	var l elastiv1alpha1.ElastiServiceList
	if err := kube.Client.List(ctx, &l); err == nil {
		seen := map[string]bool{}
		for _, es := range l.Items {
			if !seen[es.Namespace] {
				seen[es.Namespace] = true
				if err := deleteAllES(ctx, es.Namespace); err != nil {
					return err
				}
			}
		}
	}
	_, err = b.cfg.Kubectl(ctx, "", "delete", "--ignore-not-found", "--wait=true", "--timeout=3m", "-k", b.overlay())
	return err
}

// install applies bench/testdata/elasti (config/metrics-api with one operator
// and one resolver replica) and waits for both to be rolled out.
func (b *bench) install(ctx context.Context) error {
	if _, err := b.cfg.Kubectl(ctx, "", "apply", "--server-side", "--force-conflicts", "-k", b.overlay()); err != nil {
		return err
	}
	return kube.WaitRolledOut(ctx, e2e.ElastiNamespace, e2e.OperatorDeployment, e2e.ResolverDeployment)
}

func createNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{benchLabel: "true"}}}
	err := kube.Client.Create(ctx, ns)
	if apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s exists: an earlier bench left it; delete it first", name)
	}
	return err
}

// demoDeployment is the end-to-end tests' demo app (1 s readiness period),
// with env added.
func demoDeployment(ns, name string, replicas int32, env ...corev1.EnvVar) *appsv1.Deployment {
	d := e2e.DemoAppDeployment(ns, name, replicas)
	d.Spec.Template.Spec.Containers[0].Env = env
	return d
}

// ownReady counts the ready endpoints in Service ns/svc's own slices (not
// Elasti's proxy slice).
func ownReady(ctx context.Context, ns, svc string) (int, error) {
	l, err := kube.Clientset.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + svc + "," + managedByNot,
	})
	if err != nil {
		return 0, err
	}
	return readyCount(l.Items), nil
}

func readyCount(slices []discoveryv1.EndpointSlice) int {
	n := 0
	for _, s := range slices {
		for _, ep := range s.Endpoints {
			if contract.EndpointReady(ep.Conditions) {
				n++
			}
		}
	}
	return n
}

// waitReady waits until Service ns/svc has want ready endpoints of its own.
func waitReady(ctx context.Context, ns, svc string, want int) error {
	return waitReadyWithin(ctx, ns, svc, want, 3*time.Minute)
}

// waitReadyWithin is waitReady with a bound of its own.
func waitReadyWithin(ctx context.Context, ns, svc string, want int, bound time.Duration) error {
	return e2e.Poll(ctx, bound, 100*time.Millisecond, func(ctx context.Context) error {
		n, err := ownReady(ctx, ns, svc)
		if err != nil {
			return err
		}
		if n != want {
			return fmt.Errorf("%s/%s: %d ready endpoints, want %d", ns, svc, n, want)
		}
		return nil
	})
}

// waitNoPods waits until the app has no pods at all (none terminating) and
// no ready endpoint.
func waitNoPods(ctx context.Context, ns, app string) error {
	return e2e.Poll(ctx, 2*time.Minute, 100*time.Millisecond, func(ctx context.Context) error {
		pods, err := kube.Pods(ctx, ns, map[string]string{"app": app})
		if err != nil {
			return err
		}
		if len(pods) != 0 {
			return fmt.Errorf("%s/%s: %d pods left", ns, app, len(pods))
		}
		n, err := ownReady(ctx, ns, app)
		if err != nil {
			return err
		}
		if n != 0 {
			return fmt.Errorf("%s/%s: %d ready endpoints left", ns, app, n)
		}
		return nil
	})
}

// waitAsleep waits until ElastiService ns/name is asleep as the end-to-end
// tests and the demo mean it (e2e.Env.Asleep): proxy mode with a ready
// resolver in its proxy slice, the target at zero with no endpoint of its
// own, and kube-proxy no longer routing to the old pods.
func waitAsleep(ctx context.Context, ns, name string) error {
	return e2e.Poll(ctx, 2*time.Minute, 100*time.Millisecond, func(ctx context.Context) error { return kube.Asleep(ctx, ns, name) })
}

// waitAwake waits until ElastiService ns/name is awake (e2e.Env.Awake):
// serve mode, no proxy slice, a ready endpoint of the target.
func waitAwake(ctx context.Context, ns, name string) error {
	return e2e.Poll(ctx, 2*time.Minute, 50*time.Millisecond, func(ctx context.Context) error { return kube.Awake(ctx, ns, name) })
}

func clusterIP(ctx context.Context, ns, name string) (string, error) {
	var svc corev1.Service
	if err := kube.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &svc); err != nil {
		return "", err
	}
	return svc.Spec.ClusterIP, nil
}

// deleteAllES deletes a namespace's Deployments first (so the deletion
// finalizer has no target to wake) and then its ElastiServices, and waits
// until they are gone. A delete of 10,000 objects at once can outlast the
// API server's request timeout (it goes on deleting after it answered), so
// both deletes are repeated, 10 s apart, until none is left.
func deleteAllES(ctx context.Context, ns string) error {
	return e2e.Poll(ctx, 10*time.Minute, 10*time.Second, func(ctx context.Context) error {
		for _, o := range []client.Object{&appsv1.Deployment{}, &elastiv1alpha1.ElastiService{}} {
			if err := kube.Client.DeleteAllOf(ctx, o, client.InNamespace(ns)); err != nil && !apierrors.IsNotFound(err) {
				logf("delete the %T of %s (repeated): %v", o, ns, err)
			}
		}
		var l metav1.PartialObjectMetadataList
		l.SetGroupVersionKind(elastiv1alpha1.GroupVersion.WithKind("ElastiServiceList"))
		if err := kube.Client.List(ctx, &l, client.InNamespace(ns), client.Limit(1)); err != nil {
			return err
		}
		if len(l.Items) != 0 {
			return fmt.Errorf("%s: ElastiServices left", ns)
		}
		return nil
	})
}

// cleanup removes the bench's namespaces (so a reused cluster is left as it
// was, Elasti installed), bounded in time.
func (b *bench) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	for _, ns := range []string{nsScale, nsSlow, nsBurst, nsHPA, nsDoze, nsTails, nsCold, nsPlain} {
		if err := deleteAllES(ctx, ns); err != nil {
			// The API server goes on deleting for many minutes, and a
			// test run on this cluster meanwhile times out its reads.
			logf("cleanup %s: %v; the cluster is still deleting the bench's objects: take it down (make cluster-down) before running tests on it", ns, err)
		}
		err := kube.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if err != nil && !apierrors.IsNotFound(err) {
			logf("delete namespace %s: %v", ns, err)
		}
	}
}

// scrape reads a component's Prometheus metrics from inside the node's
// network namespace.
func (b *bench) scrape(ctx context.Context, url string) (string, error) {
	// Uncompressed: gzipping a scrape every 100 ms during the burst cost
	// the resolver the allocations the bench measures (compress/flate led
	// its heap profile).
	c := kube.HTTPClient()
	c.Transport.(*http.Transport).DisableCompression = true
	return e2e.GetWith(ctx, c, url, "")
}
