//go:build bench

package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
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
	operatorSel  = "app.kubernetes.io/component=operator"
	resolverSel  = "app.kubernetes.io/component=resolver"
	managedByNot = contract.LabelManagedBy + "!=" + contract.ManagedBy
)

// kube is the bench's view of the cluster.
type kube struct {
	c  client.Client
	cs kubernetes.Interface
}

func (b *bench) connect() error {
	if !b.cfg.Running() {
		return fmt.Errorf("the local cluster is not running (hack/bench.sh brings it up)")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", b.cfg.Kubeconfig())
	if err != nil {
		return err
	}
	rc.QPS, rc.Burst = 200, 400
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(elastiv1alpha1.AddToScheme(scheme))
	c, err := client.New(rc, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	benchKube = kube{c: c, cs: cs}
	return nil
}

// benchKube is set by connect.
var benchKube kube

func (b *bench) serverVersion() string {
	v, err := benchKube.cs.Discovery().ServerVersion()
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
	err := benchKube.c.Get(ctx, client.ObjectKey{Name: e2e.ElastiNamespace}, &ns)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	logf("removing the Elasti an earlier run left installed")
	var l elastiv1alpha1.ElastiServiceList
	if err := benchKube.c.List(ctx, &l); err == nil {
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

// install applies bench/testdata/elasti (config/default with one operator
// and one resolver replica) and waits for both to be rolled out.
func (b *bench) install(ctx context.Context) error {
	if _, err := b.cfg.Kubectl(ctx, "", "apply", "--server-side", "--force-conflicts", "-k", b.overlay()); err != nil {
		return err
	}
	return e2e.WaitRolledOut(ctx, benchKube.c, e2e.ElastiNamespace, e2e.OperatorDeployment, e2e.ResolverDeployment)
}

func createNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{benchLabel: "true"}}}
	err := benchKube.c.Create(ctx, ns)
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

// demoService has one HTTP port, so each ElastiService takes one resolver
// port.
func demoService(ns, name string) *corev1.Service { return e2e.DemoAppHTTPService(ns, name) }

// elastiService has no triggers: it never sleeps on its own. The bench puts
// the target to zero itself, and the operator then moves the Service to
// proxy mode ("someone else put the target at zero").
func elastiService(ns, name string, maxHeld int32) *elastiv1alpha1.ElastiService {
	es := &elastiv1alpha1.ElastiService{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: elastiv1alpha1.ElastiServiceSpec{
			Service:           name,
			ScaleTargetRef:    elastiv1alpha1.ScaleTargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
			MinTargetReplicas: 1,
			CooldownPeriod:    900,
		},
	}
	if maxHeld > 0 {
		es.Spec.Proxy = &elastiv1alpha1.ProxySpec{MaxHeldRequests: maxHeld}
	}
	return es
}

func scaleTo(ctx context.Context, ns, name string, n int32) error {
	s, err := benchKube.cs.AppsV1().Deployments(ns).GetScale(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	s.Spec.Replicas = n
	_, err = benchKube.cs.AppsV1().Deployments(ns).UpdateScale(ctx, name, s, metav1.UpdateOptions{})
	return err
}

// ownReady counts the ready endpoints in Service ns/svc's own slices (not
// Elasti's proxy slice).
func ownReady(ctx context.Context, ns, svc string) (int, error) {
	l, err := benchKube.cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
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
			if ptr.Deref(ep.Conditions.Ready, false) && !ptr.Deref(ep.Conditions.Terminating, false) {
				n++
			}
		}
	}
	return n
}

func proxySlices(ctx context.Context, ns, svc string) ([]discoveryv1.EndpointSlice, error) {
	l, err := benchKube.cs.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + svc + "," + contract.LabelManagedBy + "=" + contract.ManagedBy,
	})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

func podsOf(ctx context.Context, ns, selector string) ([]corev1.Pod, error) {
	l, err := benchKube.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// waitReady waits until Service ns/svc has want ready endpoints of its own.
func waitReady(ctx context.Context, ns, svc string, want int) error {
	return e2e.Poll(ctx, 3*time.Minute, 100*time.Millisecond, func(ctx context.Context) error {
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
		pods, err := podsOf(ctx, ns, "app="+app)
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

func getES(ctx context.Context, ns, name string) (*elastiv1alpha1.ElastiService, error) {
	var es elastiv1alpha1.ElastiService
	err := benchKube.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &es)
	return &es, err
}

// waitMode waits for ElastiService ns/name to reach mode; in proxy mode also
// for a proxy slice listing a ready resolver, in serve mode for no proxy
// slice.
func waitMode(ctx context.Context, ns, name string, mode elastiv1alpha1.Mode) error {
	return e2e.Poll(ctx, 2*time.Minute, 50*time.Millisecond, func(ctx context.Context) error {
		es, err := getES(ctx, ns, name)
		if err != nil {
			return err
		}
		if es.Status.Mode != mode {
			return fmt.Errorf("%s/%s: mode %q, want %q", ns, name, es.Status.Mode, mode)
		}
		slices, err := proxySlices(ctx, ns, es.Spec.Service)
		if err != nil {
			return err
		}
		if mode == elastiv1alpha1.ModeProxy && readyCount(slices) == 0 {
			return fmt.Errorf("%s/%s: no proxy slice with a ready resolver yet", ns, name)
		}
		if mode == elastiv1alpha1.ModeServe && len(slices) != 0 {
			return fmt.Errorf("%s/%s: proxy slice still there", ns, name)
		}
		return nil
	})
}

func clusterIP(ctx context.Context, ns, name string) (string, error) {
	var svc corev1.Service
	if err := benchKube.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &svc); err != nil {
		return "", err
	}
	return svc.Spec.ClusterIP, nil
}

// ---- process memory, read from /proc on this machine ----

// containerPID finds the main process of a pod's first container: the
// process whose cgroup path names the container's ID.
func containerPID(pod *corev1.Pod) (int, error) {
	if len(pod.Status.ContainerStatuses) == 0 || pod.Status.ContainerStatuses[0].ContainerID == "" {
		return 0, fmt.Errorf("pod %s has no running container", pod.Name)
	}
	id := pod.Status.ContainerStatuses[0].ContainerID
	if i := strings.Index(id, "://"); i >= 0 {
		id = id[i+3:]
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	best := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cg, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if err != nil || !strings.Contains(string(cg), id) {
			continue
		}
		// The container's init is its lowest PID.
		if best == 0 || pid < best {
			best = pid
		}
	}
	if best == 0 {
		return 0, fmt.Errorf("no process of container %s (pod %s)", id[:min(12, len(id))], pod.Name)
	}
	return best, nil
}

// memMiB returns a process' VmRSS and VmHWM (peak RSS) in MiB.
func memMiB(pid int) (rss, peak float64, err error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		if err != nil {
			return 0, 0, err
		}
		if k == "VmRSS" {
			rss = kb / 1024
		} else {
			peak = kb / 1024
		}
	}
	return rss, peak, sc.Err()
}

// resetPeak resets a process' VmHWM to its current RSS (clear_refs 5).
func resetPeak(pid int) error {
	return os.WriteFile(filepath.Join("/proc", strconv.Itoa(pid), "clear_refs"), []byte("5"), 0)
}

// componentPID returns the PID of the only pod of an Elasti component.
func componentPID(ctx context.Context, selector string) (int, *corev1.Pod, error) {
	pods, err := podsOf(ctx, e2e.ElastiNamespace, selector)
	if err != nil {
		return 0, nil, err
	}
	var running []corev1.Pod
	for _, p := range pods {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running = append(running, p)
		}
	}
	if len(running) != 1 {
		return 0, nil, fmt.Errorf("%d running pods for %s, want 1", len(running), selector)
	}
	pid, err := containerPID(&running[0])
	return pid, &running[0], err
}

// sampleRSS reads a component's RSS n times, one second apart.
func sampleRSS(ctx context.Context, selector string, n int) ([]float64, error) {
	pid, _, err := componentPID(ctx, selector)
	if err != nil {
		return nil, err
	}
	var xs []float64
	for i := range n {
		if i > 0 {
			select {
			case <-ctx.Done():
				return xs, ctx.Err()
			case <-time.After(time.Second):
			}
		}
		rss, _, err := memMiB(pid)
		if err != nil {
			return xs, err
		}
		xs = append(xs, rss)
	}
	return xs, nil
}

// ---- Prometheus text scraping ----

func (b *bench) scrape(ctx context.Context, url string) (string, error) {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: b.cfg.NodeDialer().DialContext, DisableKeepAlives: true}}
	return e2e.GetWith(ctx, c, url, "")
}
