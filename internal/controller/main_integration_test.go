//go:build integration

package controller

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/triggerpoll"
	"elasti.dev/elasti/internal/controller/wakecalls"
	"elasti.dev/elasti/internal/scaling"
	"elasti.dev/elasti/internal/testenv"
	"elasti.dev/elasti/internal/testenv/estest"
)

var (
	env *testenv.Env
	k8s client.Client
)

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{KEDAAndRollouts: true}, func(e *testenv.Env) { env, k8s = e, e.Client })
}

// fakeTriggers lets a test set what the triggers say.
type fakeTriggers struct{ state atomic.Value }

func newFakeTriggers(s scaling.State) *fakeTriggers {
	f := &fakeTriggers{}
	f.set(s)
	return f
}

func (f *fakeTriggers) set(s scaling.State) { f.state.Store(s) }

func (f *fakeTriggers) Evaluate(context.Context, *elastiv1alpha1.ElastiService) scaling.Result {
	s := f.state.Load().(scaling.State)
	if s == scaling.StateUnhealthy {
		return scaling.Result{State: s, Reason: scaling.ReasonQueryFailed, Message: "fake failure"}
	}
	return scaling.Result{State: s, Message: "fake " + string(s)}
}

// operator is one running operator for one test.
type operator struct {
	ns, resolverNS string
	waker          *wakecalls.Waker
	triggers       *triggerpoll.Poller
	mgr            ctrl.Manager
	// stop stops the manager and waits for it; the test's cleanup calls it
	// too.
	stop func()
}

type operatorOptions struct {
	cfg      func(*Config)
	triggers triggerpoll.Evaluator
	deps     func(*Deps)
	// rest, if set, is the identity the operator runs as (default: admin).
	rest *rest.Config
	// intercept, if set, wraps the manager's client: a test puts another
	// writer's write right before one of the operator's own.
	intercept *interceptor.Funcs
}

var nsCounter atomic.Int64

// newNamespace creates a namespace with a unique name. envtest has no
// namespace controller, so namespaces are never removed; unique names keep
// the tests apart.
func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	name := fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%100000, nsCounter.Add(1))
	if err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return name
}

// startOperator runs a manager limited to a fresh namespace, with a fresh
// resolver namespace, until the test ends.
func startOperator(t *testing.T, o operatorOptions) *operator {
	t.Helper()
	op := &operator{ns: newNamespace(t, "es"), resolverNS: newNamespace(t, "resolvers")}
	cfg := DefaultConfig()
	cfg.ResolverNamespace = op.resolverNS
	cfg.WatchNamespaces = []string{op.ns}
	cfg.GracePeriod = 300 * time.Millisecond
	cfg.PollingInterval = 300 * time.Millisecond
	cfg.SkipNameValidation = true
	cfg.WakeTimeout = 30 * time.Second
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	restConfig := env.Config
	if o.rest != nil {
		restConfig = o.rest
	}
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                 env.Scheme,
		Cache:                  CacheOptions(cfg),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		NewClient: func(config *rest.Config, options client.Options) (client.Client, error) {
			if o.intercept == nil {
				return client.New(config, options)
			}
			c, err := client.NewWithWatch(config, options)
			if err != nil {
				return nil, err
			}
			return interceptor.NewClient(c, *o.intercept), nil
		},
	})
	if err != nil {
		t.Fatalf("create manager: %v", err)
	}
	deps := Deps{Triggers: o.triggers}
	if o.deps != nil {
		o.deps(&deps)
	}
	ctx, cancel := context.WithCancel(context.Background())
	parts, err := Setup(ctx, mgr, cfg, deps)
	if err != nil {
		cancel()
		t.Fatalf("set up the controller: %v", err)
	}
	op.waker, op.triggers = parts.Waker, parts.Triggers
	op.mgr = mgr
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	var once sync.Once
	op.stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(op.stop)
	return op
}

// eventually is the integration tests' one polling helper.
var eventually = testenv.Eventually

// never checks that fn keeps returning nil for the whole duration.
func never(t *testing.T, d time.Duration, what string, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

const wait = 60 * time.Second

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func mustCreate(t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8s.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

// testPodLabel is on the pod template of every Deployment createDeployment
// makes, for a Service that selects more than one of them.
const testPodLabel = "elasti-envtest"

func createDeployment(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	labels := map[string]string{"app": name}
	mustCreate(t, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name, testPodLabel: "yes"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1"}}},
			},
		},
	})
}

func deploymentReplicas(t *testing.T, ns, name string) int32 {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, d); err != nil {
		t.Fatalf("get deployment %s/%s: %v", ns, name, err)
	}
	return ptr.Deref(d.Spec.Replicas, 1)
}

func wantReplicas(ns, name string, want int32) func() error {
	return func() error {
		d := &appsv1.Deployment{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, d); err != nil {
			return err
		}
		if got := ptr.Deref(d.Spec.Replicas, 1); got != want {
			return fmt.Errorf("deployment %s has %d replicas, want %d", name, got, want)
		}
		return nil
	}
}

func createService(t *testing.T, ns, name string, ports ...corev1.ServicePort) {
	t.Helper()
	if len(ports) == 0 {
		ports = []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), AppProtocol: ptr.To("http")}}
	}
	mustCreate(t, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Ports: ports, Selector: map[string]string{"app": name}},
	})
}

// createES creates an ElastiService for service and deployment, with a 1 s
// cooldown and a Prometheus trigger on a closed port; opts adjust it.
func createES(t *testing.T, ns, name, service, deployment string, opts ...estest.Option) *elastiv1alpha1.ElastiService {
	t.Helper()
	es := estest.New(ns, name, append([]estest.Option{
		estest.Service(service), estest.Deployment(deployment),
		estest.Cooldown(1), // 0 would be omitted and defaulted to 900
		estest.Prometheus("http://127.0.0.1:1", "vector(0)", "1"),
	}, opts...)...)
	mustCreate(t, es)
	return es
}

func getES(t *testing.T, ns, name string) *elastiv1alpha1.ElastiService {
	t.Helper()
	es := &elastiv1alpha1.ElastiService{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, es); err != nil {
		t.Fatalf("get ElastiService %s/%s: %v", ns, name, err)
	}
	return es
}

func wantMode(ns, name string, mode elastiv1alpha1.Mode) func() error {
	return func() error {
		es := &elastiv1alpha1.ElastiService{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, es); err != nil {
			return err
		}
		if es.Status.Mode != mode {
			return fmt.Errorf("mode %q, want %q (conditions %v)", es.Status.Mode, mode, es.Status.Conditions)
		}
		return nil
	}
}

func wantCondition(ns, name, typ string, status metav1.ConditionStatus, reason string) func() error {
	return func() error {
		es := &elastiv1alpha1.ElastiService{}
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, es); err != nil {
			return err
		}
		c := meta.FindStatusCondition(es.Status.Conditions, typ)
		if c == nil || c.Status != status || (reason != "" && c.Reason != reason) {
			return fmt.Errorf("condition %s is %+v, want %s/%s", typ, c, status, reason)
		}
		return nil
	}
}

// createResolver creates a resolver pod and sets its status as a kubelet
// would.
func createResolver(t *testing.T, ns, name string, ready bool, ips ...string) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{contract.LabelComponent: contract.ComponentResolver}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "resolver", Image: "example.invalid/resolver:1"}}},
	}
	mustCreate(t, pod)
	setResolverStatus(t, ns, name, ready, ips...)
}

func setResolverStatus(t *testing.T, ns, name string, ready bool, ips ...string) {
	t.Helper()
	pod := &corev1.Pod{}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, pod); err != nil {
		t.Fatalf("get pod: %v", err)
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	pod.Status.PodIPs = nil
	for _, ip := range ips {
		pod.Status.PodIPs = append(pod.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	if len(ips) > 0 {
		pod.Status.PodIP = ips[0]
	}
	if err := k8s.Status().Update(context.Background(), pod); err != nil {
		t.Fatalf("update pod status: %v", err)
	}
}

func deletePod(t *testing.T, ns, name string) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := k8s.Delete(context.Background(), pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatalf("delete pod %s: %v", name, err)
	}
}

// setOwnSlice writes the Service's own EndpointSlice, as the endpointslice
// controller would, with one endpoint that is ready or not.
func setOwnSlice(t *testing.T, ns, service string, ready bool) {
	t.Helper()
	name := service + "-own"
	s := &discoveryv1.EndpointSlice{}
	err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, s)
	exists := err == nil
	if !exists {
		s = &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			discoveryv1.LabelServiceName: service, contract.LabelManagedBy: "endpointslice-controller.k8s.io",
		}}, AddressType: discoveryv1.AddressTypeIPv4}
	}
	s.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}}
	s.Ports = []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(8080)), Protocol: ptr.To(corev1.ProtocolTCP)}}
	if exists {
		err = k8s.Update(context.Background(), s)
	} else {
		err = k8s.Create(context.Background(), s)
	}
	if err != nil {
		t.Fatalf("write own EndpointSlice: %v", err)
	}
}

// proxySlicesOf lists the proxy slices of a Service.
func proxySlicesOf(ns, service string) ([]discoveryv1.EndpointSlice, error) {
	list := &discoveryv1.EndpointSliceList{}
	if err := k8s.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{
		discoveryv1.LabelServiceName: service, contract.LabelManagedBy: contract.ManagedBy,
	}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

func wantProxySlices(ns, service string, n int) func() error {
	return func() error {
		s, err := proxySlicesOf(ns, service)
		if err != nil {
			return err
		}
		if len(s) != n {
			return fmt.Errorf("%d proxy slices for %s, want %d", len(s), service, n)
		}
		return nil
	}
}

func patchAnnotation(t *testing.T, ns, name, key, value string) {
	t.Helper()
	es := getES(t, ns, name)
	orig := es.DeepCopy()
	if es.Annotations == nil {
		es.Annotations = map[string]string{}
	}
	es.Annotations[key] = value
	if err := k8s.Patch(context.Background(), es, client.MergeFrom(orig)); err != nil {
		t.Fatalf("annotate: %v", err)
	}
}

func scaledObject(ns, name, target string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{"scaleTargetRef": map[string]any{"name": target}, "triggers": []any{map[string]any{
			"type": "cpu", "metricType": "Utilization", "metadata": map[string]any{"value": "50"},
		}}},
	}}
	u.SetGroupVersionKind(scaling.ScaledObjectGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}
