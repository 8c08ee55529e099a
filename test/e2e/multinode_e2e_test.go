//go:build e2e && multinode

package e2e

// The multi-node scenarios: `make test-multinode` runs them on a local
// cluster of two nodes (elasti-cluster run --nodes 2). Each test places the
// resolvers and the target on nodes of its choosing and sends its traffic
// from the nodes it names: a client in a node's network namespace is
// routed by that node's kube-proxy, as a pod or a host-network process on
// that node would be.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/controller"
	"elasti.dev/elasti/internal/controller/refusals"
	"elasti.dev/elasti/test/cluster"
)

// hostnameLabel is the well-known label the kubelet puts on its Node.
const hostnameLabel = "kubernetes.io/hostname"

// twoNodes returns the cluster's first node and a further one, both Ready,
// or fails the test: these tests need `elasti-cluster run --nodes 2`.
func twoNodes(t *testing.T, e *Env) (first, second cluster.Config) {
	t.Helper()
	names := e.Cluster.NodeNames()
	if len(names) < 2 {
		t.Fatalf("the cluster has one node (%s): run the multi-node tests with `make test-multinode` (elasti-cluster run --nodes 2)", names[0])
	}
	for _, name := range names[:2] {
		node, err := e.Clientset.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ready := false
		for _, c := range node.Status.Conditions {
			ready = ready || c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
		}
		if !ready {
			t.Fatalf("node %s is not Ready", name)
		}
	}
	first, err := e.Cluster.Node(names[0])
	if err != nil {
		t.Fatal(err)
	}
	second, err = e.Cluster.Node(names[1])
	if err != nil {
		t.Fatal(err)
	}
	return first, second
}

// onNode pins a Deployment's pods to node.
func onNode(node string) func(*appsv1.Deployment) {
	return func(d *appsv1.Deployment) {
		d.Spec.Template.Spec.NodeSelector = map[string]string{hostnameLabel: node}
	}
}

// from returns a copy of e whose clients start in node's network namespace.
func (e *Env) from(node cluster.Config) *Env {
	c := *e
	c.Dialer = node.NodeDialer()
	return &c
}

// resolverPin is the placement of the resolvers that the tests running at
// the same time share: the node they are pinned to and how many running
// tests rely on it.
var resolverPin struct {
	mu    sync.Mutex
	node  string
	users int
}

// pinResolvers installs Elasti, moves every resolver replica to node, and
// waits until they all run there. Tests running in parallel share the
// placement: the first one moves the resolvers, the others find them there,
// and only the end of the last one lets them go anywhere again, so that no
// test moves the resolvers under another one's requests. Tests that want the
// resolvers elsewhere, or move them, do not run in parallel.
func pinResolvers(t *testing.T, e *Env, node string) {
	t.Helper()
	e.InstallElasti(t)
	resolverPin.mu.Lock()
	defer resolverPin.mu.Unlock()
	switch {
	case resolverPin.users == 0:
		setResolverNodeSelector(t, e, map[string]string{hostnameLabel: node})
		resolverPin.node = node
	case resolverPin.node != node:
		t.Fatalf("a test running beside this one has the resolvers on %s, and this one wants them on %s: one of them must not call t.Parallel", resolverPin.node, node)
	}
	resolverPin.users++
	t.Cleanup(func() {
		resolverPin.mu.Lock()
		defer resolverPin.mu.Unlock()
		if resolverPin.users--; resolverPin.users == 0 {
			setResolverNodeSelector(t, e, nil)
		}
	})
	if err := resolversOn(context.Background(), e, node); err != nil {
		t.Fatal(err)
	}
}

// resolverLabels select the resolver pods.
var resolverLabels = map[string]string{"app.kubernetes.io/component": "resolver"}

// podsOn says which running pod of ns with labels is not on node, or that
// none runs.
func podsOn(ctx context.Context, e *Env, ns string, labels map[string]string, node string) error {
	pods, err := e.Pods(ctx, ns, labels)
	if err != nil {
		return err
	}
	running := 0
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		if running++; p.Spec.NodeName != node {
			return fmt.Errorf("pod %s/%s runs on %s, want %s", ns, p.Name, p.Spec.NodeName, node)
		}
	}
	if running == 0 {
		return fmt.Errorf("no pod of %s with labels %v runs", ns, labels)
	}
	return nil
}

// resolversOn says which resolver pod is not on node.
func resolversOn(ctx context.Context, e *Env, node string) error {
	return podsOn(ctx, e, ElastiNamespace, resolverLabels, node)
}

func setResolverNodeSelector(t *testing.T, e *Env, sel map[string]string) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"nodeSelector": sel}}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ElastiNamespace, Name: ResolverDeployment}}
	if err := e.Client.Patch(ctx, d, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("set the resolvers' nodeSelector to %v: %v", sel, err)
	}
	if err := e.WaitRolledOut(ctx, ElastiNamespace, ResolverDeployment); err != nil {
		t.Fatalf("resolvers not rolled out on %v: %v", sel, err)
	}
	// Rolled out counts the new pods; the old ones may still be draining.
	err = Poll(ctx, 3*time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
		pods, err := e.Pods(ctx, ElastiNamespace, resolverLabels)
		if err != nil {
			return err
		}
		if n := len(pods); n != 2 {
			return fmt.Errorf("%d resolver pods, want 2", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMultiNodeNoLossAcrossNodes is TestNoLossUnderLoad with the resolvers on
// one node, the target on the other, and clients on both: 4 keep-alive
// HTTP/1.1 clients in each node's network POST a 1 KiB body every 200 ms,
// and a gRPC client on the target's node sends an Echo every 100 ms on one
// long-lived connection, through two serve → proxy → zero → wake → serve
// cycles. Every request crosses nodes at some point: the clients on the
// first node reach the target across the link, those on the second reach
// the resolvers across it while the target sleeps. Not one request or RPC
// may fail, and every answered POST must run exactly once. No preStop hook:
// the demo app drains 3 s on SIGTERM, as in TestNoLossUnderLoad (whose
// sibling TestNoDrainTerminationRace covers an app that does not).
func TestMultiNodeNoLossAcrossNodes(t *testing.T) {
	t.Parallel()
	e := Get(t)
	first, second := twoNodes(t, e)
	pinResolvers(t, e, first.NodeName)
	l := newLedger(t)
	ns, ip := demoApp(t, e, withEnv("DRAIN", "3s"), l.mount, onNode(second.NodeName))
	url := httpURL(ip, DemoHTTPPort)
	// Each node's kube-proxy has the new Service.
	answers(t, e.from(first), url, 30*time.Second)
	answers(t, e.from(second), url, 30*time.Second)

	// Bounded: at most 5 minutes of traffic.
	fleets := map[string]*keepAliveFleet{
		first.NodeName:  startKeepAliveFleet(e.from(first), url, 4, 200*time.Millisecond, 4*5*300),
		second.NodeName: startKeepAliveFleet(e.from(second), url, 4, 200*time.Millisecond, 4*5*300),
	}
	rpc := startGRPCClient(t, e.from(second), net.JoinHostPort(ip, fmt.Sprint(DemoGRPCPort)), 100*time.Millisecond, 10*300)
	e.Create(t, e.ElastiServiceFor(ns, "demoapp", IdleQuery))
	start := time.Now()
	const cycles = 2
	e.cycles(t, ns, "demoapp", cycles, 4*time.Minute, func() string {
		return fmt.Sprintf("%d + %d POSTs and %d RPCs so far", fleets[first.NodeName].sent.Load(), fleets[second.NodeName].sent.Load(), rpc.sent.Load())
	})
	e.SetQuery(t, ns, "demoapp", BusyQuery)
	e.WaitAwake(t, ns, "demoapp", 2*time.Minute)
	time.Sleep(2 * time.Second)
	for _, f := range fleets {
		f.finish()
	}
	rpc.finish()

	ctx := context.Background()
	if err := podsOn(ctx, e, ns, map[string]string{"app": "demoapp"}, second.NodeName); err != nil {
		t.Errorf("the woken target: %v", err)
	}
	if err := resolversOn(ctx, e, first.NodeName); err != nil {
		t.Error(err)
	}
	var ok []postResult
	for node, f := range fleets {
		t.Logf("from %s over %s: %d keep-alive POSTs on %d connections (%d ok, %d failed)",
			node, time.Since(start).Round(time.Second), len(f.ok)+len(f.bad), f.dials.Load(), len(f.ok), len(f.bad))
		if n, dials := len(f.ok)+len(f.bad), f.dials.Load(); dials*2 > int64(n) {
			t.Errorf("from %s: %d connections for %d requests: the fleet did not keep its connections alive", node, dials, n)
		}
		for i, r := range f.bad {
			if i == 10 {
				t.Errorf("... and %d more from %s", len(f.bad)-10, node)
				break
			}
			t.Errorf("POST %s from %s at %s (reused connection: %v): %v", r.id, node, r.at.Format("15:04:05.000"), r.reused, r.err)
		}
		ok = append(ok, f.ok...)
	}
	t.Logf("from %s: %d RPCs on %d connections (%d ok, %d failed)", second.NodeName,
		rpc.ok.Load()+int64(len(rpc.failures)), rpc.dials.Load(), rpc.ok.Load(), len(rpc.failures))
	for i, f := range rpc.failures {
		if i == 10 {
			t.Errorf("... and %d more", len(rpc.failures)-10)
			break
		}
		t.Errorf("RPC at %s", f)
	}
	checkLedger(t, t.Errorf, l, ok)
}

// TestMultiNodeNodePortAtZero: external traffic to a NodePort Service whose
// target sleeps wakes it and is answered on every node, also on the node
// that runs no resolver, and a Service with externalTrafficPolicy: Local
// (which that node would drop at zero) is refused and keeps serving on
// both. The requests come from the host, as a client outside the cluster:
// they enter each node through its address.
func TestMultiNodeNodePortAtZero(t *testing.T) {
	t.Parallel()
	e := Get(t)
	first, second := twoNodes(t, e)
	pinResolvers(t, e, first.NodeName)
	host := &http.Client{Timeout: 90 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}

	t.Run("cluster", func(t *testing.T) {
		ns, _ := demoApp(t, e, onNode(second.NodeName))
		port := makeNodePort(t, e, ns, corev1.ServiceExternalTrafficPolicyCluster)
		e.Create(t, e.ElastiServiceFor(ns, "demoapp", IdleQuery))
		for _, node := range []cluster.Config{second, first} {
			e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)
			url := httpURL(node.NodeIP.String(), int(port))
			start := time.Now()
			body, err := GetWith(context.Background(), host, url, "")
			if err != nil || !strings.HasPrefix(body, "hello from ") {
				t.Fatalf("GET %s (NodePort of %s) at zero: %q, %v", url, node.NodeName, body, err)
			}
			t.Logf("GET %s (NodePort of %s, resolvers on %s) at zero answered in %s", url, node.NodeName, first.NodeName, time.Since(start).Round(time.Millisecond))
		}
	})

	t.Run("local", func(t *testing.T) {
		ns, _ := demoApp(t, e, onNode(second.NodeName))
		port := makeNodePort(t, e, ns, corev1.ServiceExternalTrafficPolicyLocal)
		nodePort := httpURL(second.NodeIP.String(), int(port))
		// The target's node's kube-proxy has the node port.
		Eventually(t, 30*time.Second, 250*time.Millisecond, func(ctx context.Context) error {
			_, err := GetWith(ctx, host, nodePort, "")
			return err
		})
		e.Create(t, e.ElastiServiceFor(ns, "demoapp", IdleQuery))
		Eventually(t, time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
			es, err := e.GetElastiService(ctx, ns, "demoapp")
			if err != nil {
				return err
			}
			if c := Condition(es, elastiv1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse || c.Reason != refusals.ReasonLocalTrafficPolicy {
				return fmt.Errorf("Ready condition %+v, want False/%s", c, refusals.ReasonLocalTrafficPolicy)
			}
			return nil
		})
		// Cooldown 5 s: well past it, the target still runs and the
		// node that runs it answers.
		StableFor(t, 15*time.Second, time.Second, func(ctx context.Context) error {
			n, _, err := e.Replicas(ctx, ns, "demoapp")
			if err != nil {
				return err
			}
			if n != 1 {
				return fmt.Errorf("the refused service's target has %d replicas, want 1", n)
			}
			_, err = GetWith(ctx, host, nodePort, "")
			return err
		})
	})
}

// makeNodePort makes the demo app's Service a NodePort with the given
// externalTrafficPolicy and returns the HTTP port's node port.
func makeNodePort(t *testing.T, e *Env, ns string, policy corev1.ServiceExternalTrafficPolicy) int32 {
	t.Helper()
	ctx := context.Background()
	var svc corev1.Service
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demoapp"}, &svc); err != nil {
		t.Fatal(err)
	}
	svc.Spec.Type = corev1.ServiceTypeNodePort
	svc.Spec.ExternalTrafficPolicy = policy
	if err := e.Client.Update(ctx, &svc); err != nil {
		t.Fatal(err)
	}
	for _, p := range svc.Spec.Ports {
		if p.Port == DemoHTTPPort {
			return p.NodePort
		}
	}
	t.Fatalf("Service demoapp has no port %d: %v", DemoHTTPPort, svc.Spec.Ports)
	return 0
}

// TestMultiNodeSleepCancelledFromOtherNode: the confirmation window sees
// traffic that another node's kube-proxy sends. Clients on the target's node
// (the resolvers run on the other) open a new connection for every request,
// 5 a second, while the trigger says idle: each scale-down's grace period
// sends those connections across to the resolvers once that node's
// kube-proxy has the proxy slice, and each one calls the sleep off
// (SleepCancelled). The target must never reach zero while they send, and
// no request may fail. New connections are the point here (a kept-alive one
// stays on the pod through the grace period); TestMultiNodeNoLossAcrossNodes
// covers keep-alive clients.
func TestMultiNodeSleepCancelledFromOtherNode(t *testing.T) {
	t.Parallel()
	e := Get(t)
	first, second := twoNodes(t, e)
	pinResolvers(t, e, first.NodeName)
	ns, ip := demoApp(t, e, onNode(second.NodeName))
	url := httpURL(ip, DemoHTTPPort)
	answers(t, e.from(second), url, 30*time.Second)
	hc := e.from(second).HTTPClient()

	var mu sync.Mutex
	var failures []string
	sent := 0
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		// Bounded: at most 2 minutes at 5 a second.
		for i := 0; i < 600; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, err := GetWith(ctx, hc, url, "")
			cancel()
			mu.Lock()
			sent++
			if err != nil {
				failures = append(failures, fmt.Sprintf("%s: %v", time.Now().Format("15:04:05.000"), err))
			}
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	e.Create(t, e.ElastiServiceFor(ns, "demoapp", IdleQuery))
	timeline := recordReplicas(t, e, ns, "demoapp")
	// Cooldown 5 s and a 2 s grace period: 40 s is several scale-downs.
	Eventually(t, 2*time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
		n, err := e.EventCount(ctx, ns, "demoapp", controller.EventSleepCancelled)
		if err != nil {
			return err
		}
		if n < 3 {
			return fmt.Errorf("%d SleepCancelled Events, want 3", n)
		}
		return nil
	})
	close(stop)
	<-done
	changes := timeline.finish()
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d GETs from %s; replicas: %s", sent, second.NodeName, timeline)
	if sleeps, _ := sleepsAndWakes(changes); sleeps > 0 {
		t.Errorf("the target went to zero %d times while %s sent traffic: %s", sleeps, second.NodeName, timeline)
	}
	for _, f := range failures {
		t.Errorf("GET from %s at %s", second.NodeName, f)
	}
	// Without the traffic the same service sleeps: the window, not a
	// refusal, kept it up.
	e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)
}

// TestMultiNodeResolversMoveWhileHolding: the resolvers move from one node
// to the other while they hold requests. The target sleeps on the first
// node, with the resolvers, and boots in 8 s: less than what a draining
// resolver gives held requests in the tests' install (3 s of drain period
// and 10 s of drain timeout; 15 s and 60 s by default), after which it
// answers 503. Clients on the second node
// start a GET on a new connection every 200 ms (each waits up to 90 s), so
// the first ones wake the target and are held through its boot; 2 s in, the
// resolver Deployment is moved to the second node (a rolling update: new
// pods there, the old ones drained). Until the second node's kube-proxy has
// the new proxy endpoints it still sends new connections to the old
// resolvers, which keep serving through their drain; requests held there
// are answered when the target is up. Every GET must be answered by the
// target.
func TestMultiNodeResolversMoveWhileHolding(t *testing.T) {
	e := Get(t)
	first, second := twoNodes(t, e)
	pinResolvers(t, e, first.NodeName)
	ns, ip := sleepyDemoApp(t, e, idle, onNode(first.NodeName), withEnv("STARTUP_DELAY", "8s"))
	e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)
	e.SetQuery(t, ns, "demoapp", BusyQuery)
	url := httpURL(ip, DemoHTTPPort)
	hc := e.from(second).HTTPClient()
	hc.Timeout = 90 * time.Second

	type result struct {
		at   time.Time
		took time.Duration
		err  error
	}
	results := make(chan result, 200)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	go func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		// Bounded: at most 200 requests.
		for range 200 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				body, err := GetWith(context.Background(), hc, url, "")
				if err == nil && !strings.HasPrefix(body, "hello from ") {
					err = fmt.Errorf("body %q", body)
				}
				results <- result{start, time.Since(start), err}
			}()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	time.Sleep(2 * time.Second)
	moved := time.Now()
	setResolverNodeSelector(t, e, map[string]string{hostnameLabel: second.NodeName})
	t.Logf("resolvers moved to %s in %s", second.NodeName, time.Since(moved).Round(100*time.Millisecond))
	time.Sleep(5 * time.Second)
	close(stop)
	wg.Wait()
	close(results)
	n, slowest := 0, time.Duration(0)
	for r := range results {
		n++
		slowest = max(slowest, r.took)
		if r.err != nil {
			t.Errorf("GET from %s sent at %s (%s after the move began): after %s: %v", second.NodeName,
				r.at.Format("15:04:05.000"), r.at.Sub(moved).Round(time.Millisecond), r.took.Round(time.Millisecond), r.err)
		}
	}
	t.Logf("%d GETs from %s, the slowest answered after %s", n, second.NodeName, slowest.Round(time.Millisecond))
	if err := resolversOn(context.Background(), e, second.NodeName); err != nil {
		t.Error(err)
	}
}

// The tests below stop the second node, so they do not run in parallel
// (go test runs them before the parallel ones), and each starts the node
// again, and waits until it is Ready, before it ends.

// nodeMonitorGracePeriod is kube-controller-manager's default
// --node-monitor-grace-period, which the local cluster keeps: how long a
// node may stay silent before the node controller marks it unhealthy and its
// pods not Ready.
const nodeMonitorGracePeriod = 50 * time.Second

// stopNode stops node (elasti-cluster node-stop) and has the test's end start
// it again and wait until it is Ready. Register it after pinResolvers, so
// the node is back before the resolvers are let go anywhere.
func stopNode(t *testing.T, e *Env, node string) time.Time {
	t.Helper()
	t.Cleanup(func() {
		if err := e.ClusterCLI("node-start " + node); err != nil {
			t.Errorf("start %s again: %v", node, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		if err := e.WaitRolledOut(ctx, ElastiNamespace, OperatorDeployment, ResolverDeployment); err != nil {
			t.Errorf("Elasti not rolled out after %s came back: %v", node, err)
		}
	})
	if err := e.ClusterCLI("node-stop " + node); err != nil {
		t.Fatalf("stop %s: %v", node, err)
	}
	return time.Now()
}

// operatorOn makes sure a replica of the operator runs on node, so that one
// survives when the other node (away) stops. The operator's anti-affinity
// across nodes is only preferred (a required one would stop a rolling
// update on a single node), so both replicas can end up on one node: after
// a rolling restart, say, or on a cluster grown from one node. Then away is
// cordoned, its replica that is not the leader deleted, and the replacement
// waited for on node.
func operatorOn(t *testing.T, e *Env, node, away string) {
	t.Helper()
	ctx := context.Background()
	if operatorRunsOn(ctx, e, node) == nil {
		return
	}
	leader, err := e.OperatorLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := e.Pods(ctx, ElastiNamespace, operatorLabels)
	if err != nil {
		t.Fatal(err)
	}
	var victim string
	for _, p := range pods {
		if p.DeletionTimestamp == nil && p.Name != leader {
			victim = p.Name
		}
	}
	if victim == "" {
		t.Fatalf("no operator replica on %s and none to move there but the leader", node)
	}
	setUnschedulable := func(v bool) error {
		patch := []byte(fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, v))
		_, err := e.Clientset.CoreV1().Nodes().Patch(context.Background(), away, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		return err
	}
	if err := setUnschedulable(true); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := setUnschedulable(false); err != nil {
			t.Errorf("uncordon %s: %v", away, err)
		}
	}()
	if err := e.Clientset.CoreV1().Pods(ElastiNamespace).Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("both operator replicas ran on %s: moved %s's replacement to %s", away, victim, node)
	Eventually(t, 2*time.Minute, time.Second, func(ctx context.Context) error {
		if err := e.WaitRolledOut(ctx, ElastiNamespace, OperatorDeployment); err != nil {
			return err
		}
		return operatorRunsOn(ctx, e, node)
	})
}

// operatorLabels select the operator's pods.
var operatorLabels = map[string]string{"app.kubernetes.io/component": "operator"}

// operatorRunsOn says whether a running operator replica is on node.
func operatorRunsOn(ctx context.Context, e *Env, node string) error {
	pods, err := e.Pods(ctx, ElastiNamespace, operatorLabels)
	if err != nil {
		return err
	}
	for _, p := range pods {
		if p.Spec.NodeName == node && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			return nil
		}
	}
	return fmt.Errorf("no running operator replica on %s", node)
}

// TestMultiNodeResolversNodeStopped: every resolver runs on the second node,
// the target sleeps on the first, and the second node dies (elasti-cluster
// node-stop: cut off, its kubelet, kube-proxy and containers killed).
// Connections to the resolvers now go unanswered. Once the node controller
// marks the node's pods not Ready (after its 50 s grace period), the
// operator has no ready resolver and fails open: it wakes the target and
// takes the Service out of proxy mode. A client that gives up on each
// request after 5 s and tries again must be answered within the grace period
// plus 40 s.
func TestMultiNodeResolversNodeStopped(t *testing.T) {
	e := Get(t)
	first, second := twoNodes(t, e)
	pinResolvers(t, e, second.NodeName)
	operatorOn(t, e, first.NodeName, second.NodeName)
	ns, ip := sleepyDemoApp(t, e, idle, onNode(first.NodeName))
	e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)
	url := httpURL(ip, DemoHTTPPort)

	stopped := stopNode(t, e, second.NodeName)
	bound := nodeMonitorGracePeriod + 40*time.Second
	hc := e.from(first).HTTPClient()
	hc.Timeout = 5 * time.Second
	var attempts int
	var last error
	for {
		attempts++
		body, err := GetWith(context.Background(), hc, url, "")
		if err == nil && strings.HasPrefix(body, "hello from ") {
			break
		}
		last = err
		if time.Since(stopped) > bound {
			t.Fatalf("no answer %s after %s stopped (%d attempts; last: %v)", time.Since(stopped).Round(time.Second), second.NodeName, attempts, last)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("answered %s after %s (every resolver's node) stopped, on attempt %d (the one before: %v)",
		time.Since(stopped).Round(100*time.Millisecond), second.NodeName, attempts, last)
	ctx := context.Background()
	if n, _, err := e.Replicas(ctx, ns, "demoapp"); err != nil || n != 1 {
		t.Errorf("target at %d replicas (%v), want 1: woken by the fail-open", n, err)
	}
	Eventually(t, 30*time.Second, 250*time.Millisecond, func(ctx context.Context) error {
		n, err := e.EventCount(ctx, ns, "demoapp", controller.EventResolversGone)
		if err == nil && n == 0 {
			err = fmt.Errorf("no %s Event", controller.EventResolversGone)
		}
		return err
	})
}

// TestMultiNodeOperatorLeaderNodeStopped: the operator's leader runs on the
// second node, the resolvers and a sleeping target on the first. A request
// is sent to the sleeping target, and the second node dies right after it
// (elasti-cluster node-stop); a second request follows, sent while the node
// is dead and before the node controller has noticed, so the operator
// Service still lists the dead replica. Both are held and answered: the
// replica on the first node takes the lease once it expires and wakes the
// target. The bound is the client's: 3 minutes.
func TestMultiNodeOperatorLeaderNodeStopped(t *testing.T) {
	e := Get(t)
	first, second := twoNodes(t, e)
	pinResolvers(t, e, first.NodeName)
	ns, ip := sleepyDemoApp(t, e, idle, onNode(first.NodeName))
	e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)
	e.SetQuery(t, ns, "demoapp", BusyQuery)

	// The leader must be the replica on the second node: while it runs on
	// the first, delete it (its replacement goes to the first node too,
	// where the preferred anti-affinity sends it).
	ctx := context.Background()
	var leader string
	Eventually(t, 3*time.Minute, time.Second, func(ctx context.Context) error {
		var err error
		if leader, err = e.OperatorLeader(ctx); err != nil {
			return err
		}
		pod, err := e.Clientset.CoreV1().Pods(ElastiNamespace).Get(ctx, leader, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pod.Spec.NodeName == second.NodeName {
			return nil
		}
		if err := e.Clientset.CoreV1().Pods(ElastiNamespace).Delete(ctx, leader, metav1.DeleteOptions{}); err != nil {
			return err
		}
		return fmt.Errorf("leader %s runs on %s; deleted it", leader, pod.Spec.NodeName)
	})
	if err := e.WaitRolledOut(ctx, ElastiNamespace, OperatorDeployment); err != nil {
		t.Fatal(err)
	}
	// And the other replica on the first node, to take over.
	operatorOn(t, e, first.NodeName, second.NodeName)
	if now, err := e.OperatorLeader(ctx); err != nil || now != leader {
		t.Fatalf("the leader changed from %s to %s (%v) while the other replica moved", leader, now, err)
	}
	t.Logf("leader %s runs on %s", leader, second.NodeName)

	type result struct {
		name string
		body string
		err  error
		took time.Duration
	}
	done := make(chan result, 2)
	send := func(name string) {
		start := time.Now()
		c := e.from(first).LongHTTPClient()
		c.Timeout = 3 * time.Minute
		go func() {
			body, err := GetWith(ctx, c, httpURL(ip, DemoHTTPPort), "")
			done <- result{name, body, err, time.Since(start)}
		}()
	}
	send("sent before the stop")
	stopped := stopNode(t, e, second.NodeName)
	send("sent after the stop")
	for range 2 {
		r := <-done
		if r.err != nil || !strings.HasPrefix(r.body, "hello from ") {
			t.Errorf("request %s: after %s: %q, %v", r.name, r.took.Round(time.Millisecond), r.body, r.err)
			continue
		}
		t.Logf("request %s answered after %s", r.name, r.took.Round(time.Millisecond))
	}
	Eventually(t, time.Minute, 500*time.Millisecond, func(ctx context.Context) error {
		now, err := e.OperatorLeader(ctx)
		if err == nil && now == leader {
			err = fmt.Errorf("lease still names %s, on the stopped node", leader)
		}
		if err == nil {
			t.Logf("new leader %s, %s after the stop", now, time.Since(stopped).Round(time.Second))
		}
		return err
	})
}
