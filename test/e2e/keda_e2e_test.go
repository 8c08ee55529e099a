//go:build e2e && multinode

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/scaling"
	"elasti.dev/elasti/test/cluster"
)

// requestRateScaledObject is a KEDA ScaledObject on the Deployment app's
// request rate, read by KEDA's prometheus scaler from the cluster's
// Prometheus: 3 requests a second per replica, from 1 to 3 replicas, with
// no stabilization window either way. KEDA makes it an HPA named
// keda-hpa-<app> on an External metric that KEDA's own metrics apiserver
// serves.
func requestRateScaledObject(ns, app, prometheusURL string) *unstructured.Unstructured {
	noWindow := map[string]any{"stabilizationWindowSeconds": int64(0)}
	so := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": app, "namespace": ns},
		"spec": map[string]any{
			"scaleTargetRef":  map[string]any{"name": app},
			"minReplicaCount": int64(1),
			"maxReplicaCount": int64(3),
			"pollingInterval": int64(5),
			"advanced": map[string]any{"horizontalPodAutoscalerConfig": map[string]any{
				"behavior": map[string]any{"scaleUp": noWindow, "scaleDown": noWindow},
			}},
			"triggers": []any{map[string]any{
				"type": "prometheus",
				"metadata": map[string]any{
					"serverAddress": prometheusURL, "query": RequestRateQuery(ns, app), "threshold": "3",
				},
			}},
		},
	}}
	so.SetGroupVersionKind(scaling.ScaledObjectGVK)
	return so
}

// scaledObjectState says what KEDA and Elasti have done to a ScaledObject:
// the pause annotation, Elasti's mark, KEDA's Paused condition, and whether
// KEDA's HPA exists.
type scaledObjectState struct {
	pausedReplicas string // "" when not paused
	markedByElasti bool
	kedaPaused     string // KEDA's Paused condition status
	kedaReady      string // KEDA's Ready condition status
	hpa            bool
}

func (s scaledObjectState) String() string {
	return fmt.Sprintf("paused-replicas %q, Elasti's mark %v, KEDA Paused=%s Ready=%s, HPA present %v",
		s.pausedReplicas, s.markedByElasti, s.kedaPaused, s.kedaReady, s.hpa)
}

func (e *Env) scaledObject(ctx context.Context, ns, name string) (scaledObjectState, error) {
	so := &unstructured.Unstructured{}
	so.SetGroupVersionKind(scaling.ScaledObjectGVK)
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, so); err != nil {
		return scaledObjectState{}, err
	}
	var s scaledObjectState
	s.pausedReplicas = so.GetAnnotations()[scaling.KEDAPausedReplicasAnnotation]
	_, s.markedByElasti = so.GetAnnotations()[contract.AnnotationKEDAPaused]
	conds, _, _ := unstructured.NestedSlice(so.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		switch m["type"] {
		case "Paused":
			s.kedaPaused, _ = m["status"].(string)
		case "Ready":
			s.kedaReady, _ = m["status"].(string)
		}
	}
	_, err := e.Clientset.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "keda-hpa-"+name, metav1.GetOptions{})
	switch {
	case err == nil:
		s.hpa = true
	case !apierrors.IsNotFound(err):
		return s, err
	}
	return s, nil
}

// waitScaledObject waits until the ScaledObject ns/name is in the state ok
// accepts.
func (e *Env) waitScaledObject(t *testing.T, ns, name, want string, timeout time.Duration, ok func(scaledObjectState) bool) {
	t.Helper()
	Eventually(t, timeout, 500*time.Millisecond, func(ctx context.Context) error {
		s, err := e.scaledObject(ctx, ns, name)
		if err != nil {
			return err
		}
		if !ok(s) {
			return fmt.Errorf("ScaledObject %s: %s; want %s", name, s, want)
		}
		return nil
	})
}

// TestMultiNodeKEDAScaledObject: KEDA's real operator and metrics
// apiserver (v2.21.0, built from the Go module proxy by hack/keda.sh,
// started with elasti-cluster keda-start) scale a target on its request
// rate in Prometheus (1 to 3 replicas, spread over both nodes), and Elasti
// puts the same target to sleep:
//   - at zero: Elasti paused the ScaledObject (paused-replicas 0, its
//     mark), KEDA took the pause (Paused=True, its HPA deleted) and holds
//     the target at 0 although its minReplicaCount is 1;
//   - a request at zero wakes the target and is answered; Elasti unpaused
//     the ScaledObject, KEDA re-created its HPA, and the target never went
//     back to zero;
//   - under load (10 requests a second) KEDA's HPA, fed through KEDA's
//     metrics apiserver, scales the target to 3 replicas on both nodes and
//     back to 1 once the load stops, and Elasti leaves it alone (no Woke or
//     ScaledToZero, never at zero, each replica change an HPA rescale);
//   - idle again, Elasti pauses KEDA once more and the target stays at
//     zero: nobody fights over it.
//
// KEDA, a cluster component with its CRDs and an aggregated API, is started
// before t.Parallel, while no other test runs (see the package doc). Where
// the resolvers run does not matter here; the test shares the placement of
// the tests running beside it (pinResolvers), so that they are not moved
// while it holds a request.
func TestMultiNodeKEDAScaledObject(t *testing.T) {
	e := Get(t)
	first, _ := twoNodes(t, e)
	if os.Getenv(cluster.KEDADirEnv) == "" {
		t.Fatalf("%s is not set: `make test-multinode` sets it (hack/keda.sh builds the operator); by hand: export %s=$(hack/keda.sh)", cluster.KEDADirEnv, cluster.KEDADirEnv)
	}
	if err := e.ClusterCLI("keda-start"); err != nil {
		t.Fatalf("start KEDA: %v", err)
	}
	t.Parallel()
	pinResolvers(t, e, first.NodeName)
	ns := e.NewNamespace(t)
	d := DemoAppDeployment(ns, "demoapp", 1)
	// At most one pod more on one node than on the other: three replicas
	// use both nodes.
	d.Spec.Template.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: hostnameLabel, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "demoapp"}},
	}}
	svc := DemoAppService(ns, "demoapp")
	e.Create(t, d, svc, requestRateScaledObject(ns, "demoapp", e.Cluster.PrometheusURL()))
	e.WaitReadyEndpoints(t, ns, "demoapp", 1, 2*time.Minute)
	e.waitScaledObject(t, ns, "demoapp", "KEDA Ready with its HPA", time.Minute, func(s scaledObjectState) bool {
		return s.kedaReady == "True" && s.hpa
	})

	es := e.ElastiServiceFor(ns, "demoapp", IdleQuery)
	es.Spec.Autoscaler = &elastiv1alpha1.AutoscalerRef{Type: elastiv1alpha1.AutoscalerKEDA, Name: "demoapp"}
	e.Create(t, es)
	e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)
	pausedAtZero := func(s scaledObjectState) bool {
		return s.pausedReplicas == "0" && s.markedByElasti && s.kedaPaused == "True" && !s.hpa
	}
	e.waitScaledObject(t, ns, "demoapp", "paused at 0 by Elasti, taken by KEDA", time.Minute, pausedAtZero)
	atZero := func(ctx context.Context) error {
		n, _, err := e.Replicas(ctx, ns, "demoapp")
		if err == nil && n != 0 {
			err = fmt.Errorf("%d replicas while paused at 0", n)
		}
		return err
	}
	StableFor(t, 10*time.Second, time.Second, atZero)

	e.SetQuery(t, ns, "demoapp", BusyQuery)
	ctx, cancel := context.WithTimeout(context.Background(), wakeTimeout)
	defer cancel()
	url := httpURL(svc.Spec.ClusterIP, DemoHTTPPort)
	wake := recordReplicas(t, e, ns, "demoapp")
	if _, err := GetWith(ctx, e.LongHTTPClient(), url, ""); err != nil {
		t.Fatalf("request at zero: %v", err)
	}
	e.WaitAwake(t, ns, "demoapp", time.Minute)
	e.waitScaledObject(t, ns, "demoapp", "unpaused, KEDA's HPA back", time.Minute, func(s scaledObjectState) bool {
		return s.pausedReplicas == "" && !s.markedByElasti && s.kedaPaused == "False" && s.hpa
	})
	// KEDA, unpaused while Elasti scales the target up, must not take it
	// back to its paused count.
	StableFor(t, 10*time.Second, time.Second, func(ctx context.Context) error {
		n, _, err := e.Replicas(ctx, ns, "demoapp")
		if err == nil && n == 0 {
			err = errors.New("back at zero after the wake")
		}
		return err
	})
	if sleeps, wakes := sleepsAndWakes(wake.finish()); sleeps != 0 || wakes != 1 {
		t.Errorf("the wake with KEDA unpausing: replicas %s, want one step up from zero", wake)
	}

	before := wakesAndSleeps(t, e, ns, "demoapp")
	timeline := recordReplicas(t, e, ns, "demoapp")
	start := time.Now()
	stop := steadyGETs(e, url)
	waitHPAReplicas(t, e, ns, "keda-hpa-demoapp", "demoapp", 3, 3*time.Minute)
	up := time.Since(start)
	nodes := e.podsPerNode(t, ns, "demoapp", 3)
	errs := stop()
	loadEnd := time.Now()
	waitHPAReplicas(t, e, ns, "keda-hpa-demoapp", "demoapp", 1, 3*time.Minute)
	t.Logf("KEDA on the request rate: 3 replicas %s into the load (pods per node: %v), back to 1 %s after it stopped; replicas: %s",
		up.Round(time.Second), nodes, time.Since(loadEnd).Round(time.Second), timeline)
	if len(nodes) < 2 {
		t.Errorf("the 3 replicas ran on %v, not on both nodes", nodes)
	}
	onlyTheHPAScaled(t, e, ns, "demoapp", timeline, errs, before)

	e.SetQuery(t, ns, "demoapp", IdleQuery)
	e.WaitAsleep(t, ns, "demoapp", 2*time.Minute)
	e.waitScaledObject(t, ns, "demoapp", "paused at 0 again", time.Minute, pausedAtZero)
	StableFor(t, 15*time.Second, time.Second, atZero)
}

// podsPerNode waits until want pods of the app are scheduled in ns, and
// counts them per node.
func (e *Env) podsPerNode(t *testing.T, ns, app string, want int) map[string]int {
	t.Helper()
	var nodes map[string]int
	Eventually(t, time.Minute, time.Second, func(ctx context.Context) error {
		pods, err := e.Pods(ctx, ns, map[string]string{"app": app})
		if err != nil {
			return err
		}
		nodes = map[string]int{}
		n := 0
		for _, p := range pods {
			if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
				nodes[p.Spec.NodeName]++
				n++
			}
		}
		if n != want {
			return fmt.Errorf("%d pods scheduled (%v), want %d", n, nodes, want)
		}
		return nil
	})
	return nodes
}
