//go:build integration

package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/testenv/estest"
)

// kubeconfigOptions shape the kubeconfig a test writes for the plugin.
type kubeconfigOptions struct {
	namespace   string // the context's namespace
	impersonate string // act as this user instead of the envtest admin
	// brokenCurrent adds a current context pointing at a closed port, so
	// that only --context reaches the API server.
	brokenCurrent bool
}

// writeKubeconfig writes a kubeconfig for envtest's API server, as a user's
// ~/.kube/config would be, and returns its path.
func writeKubeconfig(t *testing.T, o kubeconfigOptions) string {
	t.Helper()
	cfg := env.Config
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken,
		Impersonate: o.impersonate,
	}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin", Namespace: o.namespace}
	kc.CurrentContext = "envtest"
	if o.brokenCurrent {
		kc.Clusters["closed"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
		kc.Contexts["closed"] = &clientcmdapi.Context{Cluster: "closed", AuthInfo: "admin"}
		kc.CurrentContext = "closed"
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatalf("write kubeconfig: %v", err)
	}
	return path
}

// plugin runs the cobra command tree in-process.
type plugin struct {
	clock clock.PassiveClock
}

func (p plugin) run(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	cmd := NewCommand(Options{Out: &out, ErrOut: &errOut, Clock: p.clock, PollInterval: 50 * time.Millisecond})
	cmd.SetArgs(args)
	err = cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// fixture is a namespace with ElastiServices in known states.
type fixture struct {
	ns  string
	now time.Time
}

func newNamespace(t *testing.T, ctx context.Context) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "cli-"}}
	if err := k8s.Create(ctx, ns); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ns) })
	return ns.Name
}

func createDeployment(t *testing.T, ctx context.Context, ns, name string, replicas int32) {
	t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "elasti/demoapp:dev"}}},
			},
		},
	}
	if err := k8s.Create(ctx, d); err != nil {
		t.Fatalf("create Deployment %s: %v", name, err)
	}
	// No controller-manager runs in envtest: report the pods as the
	// Deployment controller would.
	d.Status.Replicas, d.Status.ReadyReplicas = replicas, replicas
	if err := k8s.Status().Update(ctx, d); err != nil {
		t.Fatalf("update Deployment %s status: %v", name, err)
	}
}

func createES(t *testing.T, ctx context.Context, ns, name, target string, status elastiv1alpha1.ElastiServiceStatus) {
	t.Helper()
	es := estest.New(ns, name, estest.Deployment(target),
		estest.Prometheus("http://prometheus.monitoring:9090", "sum(rate(http_requests_total[1m])) or vector(0)", "0.5"))
	if err := k8s.Create(ctx, es); err != nil {
		t.Fatalf("create ElastiService %s: %v", name, err)
	}
	if status.Mode == "" {
		return
	}
	es.Status = status
	if err := k8s.Status().Update(ctx, es); err != nil {
		t.Fatalf("update ElastiService %s status: %v", name, err)
	}
}

func at(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t)
	return &mt
}

func statusCond(now time.Time, typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}
}

// setup creates, in a fresh namespace:
//   - web: serving, Deployment at 2 replicas, woken 3h ago, a trigger active;
//   - sleepy: proxy mode, Deployment at 0, asleep for 2d;
//   - ghost: its Deployment does not exist, never reconciled.
func setup(t *testing.T, ctx context.Context) fixture {
	t.Helper()
	f := fixture{ns: newNamespace(t, ctx), now: time.Now().UTC().Truncate(time.Second)}
	createDeployment(t, ctx, f.ns, "web", 2)
	createDeployment(t, ctx, f.ns, "sleepy", 0)
	createES(t, ctx, f.ns, "web", "web", elastiv1alpha1.ElastiServiceStatus{
		Mode:             elastiv1alpha1.ModeServe,
		LastScaledUpTime: at(f.now.Add(-3 * time.Hour)),
		Conditions: []metav1.Condition{
			statusCond(f.now, elastiv1alpha1.ConditionReady, metav1.ConditionTrue, contract.ReasonServing, "the Service routes straight to the target"),
			statusCond(f.now, elastiv1alpha1.ConditionActive, metav1.ConditionTrue, contract.ReasonServing, "the target has replicas"),
			statusCond(f.now, elastiv1alpha1.ConditionIdle, metav1.ConditionFalse, "TriggerActive", "trigger 0: 2.5 is not below the threshold 0.5"),
			statusCond(f.now, elastiv1alpha1.ConditionTriggersHealthy, metav1.ConditionTrue, "Evaluated", "every trigger was evaluated"),
			statusCond(f.now, elastiv1alpha1.ConditionProxyReady, metav1.ConditionTrue, "ResolversAvailable", "ready resolvers can take the Service's traffic"),
		},
		ProxyPorts: []elastiv1alpha1.ProxyPort{{Name: "http", Port: 80, Protocol: "TCP", ResolverPort: 20001}},
	})
	createES(t, ctx, f.ns, "sleepy", "sleepy", elastiv1alpha1.ElastiServiceStatus{
		Mode:               elastiv1alpha1.ModeProxy,
		LastScaledUpTime:   at(f.now.Add(-50 * time.Hour)),
		LastScaledDownTime: at(f.now.Add(-48 * time.Hour)),
		Conditions: []metav1.Condition{
			statusCond(f.now, elastiv1alpha1.ConditionReady, metav1.ConditionTrue, "Proxying", "the resolvers receive the Service's traffic"),
			statusCond(f.now, elastiv1alpha1.ConditionActive, metav1.ConditionFalse, contract.ReasonScaledToZero, "the target is at zero replicas"),
		},
		ProxyPorts: []elastiv1alpha1.ProxyPort{{Name: "http", Port: 80, Protocol: "TCP", ResolverPort: 20002}},
	})
	createES(t, ctx, f.ns, "ghost", "ghost", elastiv1alpha1.ElastiServiceStatus{})
	return f
}

func (f fixture) plugin() plugin { return plugin{clock: clocktesting.NewFakePassiveClock(f.now)} }

// fakeOperatorWake does what the operator does with a wake request: it waits
// for the annotation, removes it and reports the target awake.
func fakeOperatorWake(ctx context.Context, key client.ObjectKey) error {
	for {
		es := &elastiv1alpha1.ElastiService{}
		if err := k8s.Get(ctx, key, es); err != nil {
			return err
		}
		if _, ok := es.Annotations[contract.AnnotationWakeNow]; ok {
			// Hold it for a few polls, so that --wait really waits.
			time.Sleep(200 * time.Millisecond)
			patch := client.MergeFrom(es.DeepCopy())
			delete(es.Annotations, contract.AnnotationWakeNow)
			if err := k8s.Patch(ctx, es, patch); err != nil {
				return err
			}
			es.Status.Mode = elastiv1alpha1.ModeServe
			es.Status.LastScaledUpTime = at(time.Now())
			for i := range es.Status.Conditions {
				if es.Status.Conditions[i].Type == elastiv1alpha1.ConditionActive {
					es.Status.Conditions[i].Status, es.Status.Conditions[i].Reason = metav1.ConditionTrue, contract.ReasonServing
				}
			}
			return k8s.Status().Update(ctx, es)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func grant(t *testing.T, ctx context.Context, ns, user string, rule rbacv1.PolicyRule) {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "elasti-cli"}, Rules: []rbacv1.PolicyRule{rule}}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "elasti-cli"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := k8s.Create(ctx, obj); err != nil {
			t.Fatalf("create %T: %v", obj, err)
		}
	}
	// The authorizer's informers see a new binding soon, not at once: wait
	// until it allows the rule.
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: ns, Verb: rule.Verbs[0], Group: rule.APIGroups[0], Resource: rule.Resources[0],
			},
		}}
		if err := k8s.Create(ctx, sar); err != nil {
			return false, err
		}
		return sar.Status.Allowed, nil
	})
	if err != nil {
		t.Fatalf("wait for the RoleBinding to take effect: %v", err)
	}
}

func annotations(t *testing.T, ctx context.Context, key client.ObjectKey) map[string]string {
	t.Helper()
	es := &elastiv1alpha1.ElastiService{}
	if err := k8s.Get(ctx, key, es); err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return es.Annotations
}

// fields splits a table into rows of cells.
func fields(table string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(table, "\n"), "\n") {
		rows = append(rows, strings.Fields(line))
	}
	return rows
}
