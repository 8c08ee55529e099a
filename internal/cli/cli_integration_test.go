//go:build integration

package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
)

func TestListTable(t *testing.T) {
	ctx := context.Background()
	f := setup(t, ctx)
	kc := writeKubeconfig(t, kubeconfigOptions{})

	out, stderr, err := f.plugin().run(ctx, "list", "--kubeconfig", kc, "-n", f.ns)
	if err != nil {
		t.Fatalf("list: %v\n%s", err, stderr)
	}
	t.Logf("kubectl elasti list -n %s\n%s%s", f.ns, out, stderr)
	want := [][]string{
		{"NAMESPACE", "NAME", "SERVICE", "TARGET", "MODE", "REPLICAS", "IDLE-FOR", "LAST-WAKE", "AT-ZERO"},
		{f.ns, "ghost", "ghost", "Deployment/ghost", "-", "?/1", "-", "-", "-"},
		{f.ns, "sleepy", "sleepy", "Deployment/sleepy", "proxy", "0/1", "2d", "2d2h", "0%"},
		{f.ns, "web", "web", "Deployment/web", "serve", "2/1", "-", "3h", "0%"},
	}
	if diff := cmp.Diff(want, fields(out)); diff != "" {
		t.Errorf("list (-want +got):\n%s\n%s", diff, out)
	}
	// The missing target is reported, not fatal.
	if !strings.Contains(stderr, "warning: "+f.ns+"/ghost: replicas unknown") || !strings.Contains(stderr, "not found") {
		t.Errorf("stderr lacks the ghost warning:\n%s", stderr)
	}
}

func TestListWideAndAllNamespaces(t *testing.T) {
	ctx := context.Background()
	f := setup(t, ctx)
	other := newNamespace(t, ctx)
	createDeployment(t, ctx, other, "api", 1)
	createES(t, ctx, other, "api", "api", elastiv1alpha1.ElastiServiceStatus{Mode: elastiv1alpha1.ModeServe,
		Conditions: []metav1.Condition{statusCond(f.now, elastiv1alpha1.ConditionActive, metav1.ConditionTrue, contract.ReasonServing, "")}})
	kc := writeKubeconfig(t, kubeconfigOptions{})

	out, stderr, err := f.plugin().run(ctx, "list", "--kubeconfig", kc, "-A", "-o", "wide")
	if err != nil {
		t.Fatalf("list -A: %v\n%s", err, stderr)
	}
	rows := fields(out)
	if diff := cmp.Diff([]string{"NAMESPACE", "NAME", "SERVICE", "TARGET", "MODE", "REPLICAS", "IDLE-FOR", "LAST-WAKE", "AT-ZERO", "DESIRED", "READY", "IDLE", "PORTS", "AGE"}, rows[0]); diff != "" {
		t.Errorf("wide header (-want +got):\n%s", diff)
	}
	var mine []string
	for _, r := range rows[1:] {
		if r[0] == f.ns || r[0] == other {
			mine = append(mine, r[0]+"/"+r[1])
		}
		if r[0] == f.ns && r[1] == "web" {
			if diff := cmp.Diff([]string{"0%", "2", "True", "False", "http:80->20001"}, r[8:13]); diff != "" {
				t.Errorf("wide columns of web (-want +got):\n%s", diff)
			}
		}
	}
	wantOrder := []string{f.ns + "/ghost", f.ns + "/sleepy", f.ns + "/web", other + "/api"}
	if other < f.ns {
		wantOrder = append([]string{other + "/api"}, wantOrder[:3]...)
	}
	if diff := cmp.Diff(wantOrder, mine); diff != "" {
		t.Errorf("rows across namespaces, sorted by namespace/name (-want +got):\n%s", diff)
	}
}

func TestListJSONAndYAML(t *testing.T) {
	ctx := context.Background()
	f := setup(t, ctx)
	kc := writeKubeconfig(t, kubeconfigOptions{})

	out, _, err := f.plugin().run(ctx, "list", "--kubeconfig", kc, "-n", f.ns, "-o", "json")
	if err != nil {
		t.Fatalf("list -o json: %v", err)
	}
	var list elastiv1alpha1.ElastiServiceList
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("decode list JSON: %v\n%s", err, out)
	}
	var names []string
	for _, es := range list.Items {
		names = append(names, es.Kind+"/"+es.Name)
	}
	if diff := cmp.Diff([]string{"ElastiService/ghost", "ElastiService/sleepy", "ElastiService/web"}, names); diff != "" {
		t.Errorf("items (-want +got):\n%s", diff)
	}
	if list.Kind != "ElastiServiceList" || list.APIVersion != "elasti.dev/v1alpha1" {
		t.Errorf("list type = %s %s", list.APIVersion, list.Kind)
	}

	out, _, err = f.plugin().run(ctx, "status", "web", "--kubeconfig", kc, "-n", f.ns, "-o", "yaml")
	if err != nil {
		t.Fatalf("status -o yaml: %v", err)
	}
	for _, want := range []string{"apiVersion: elasti.dev/v1alpha1", "kind: ElastiService", "name: web", "mode: serve"} {
		if !strings.Contains(out, want) {
			t.Errorf("status -o yaml lacks %q:\n%s", want, out)
		}
	}
}

func TestStatus(t *testing.T) {
	ctx := context.Background()
	f := setup(t, ctx)
	kc := writeKubeconfig(t, kubeconfigOptions{})
	p := f.plugin()

	out, stderr, err := p.run(ctx, "status", "web", "--kubeconfig", kc, "-n", f.ns)
	if err != nil {
		t.Fatalf("status web: %v\n%s", err, stderr)
	}
	t.Logf("kubectl elasti status web -n %s\n%s", f.ns, out)
	for _, want := range []string{
		"Replicas:        2 current, 2 desired, min 1",
		"Mode:            serve",
		"Last wake:       3h ago",
		"Scaling down:    no: not idle (TriggerActive): trigger 0: 2.5 is not below the threshold 0.5",
		"Idle             False   TriggerActive       60m  trigger 0: 2.5 is not below the threshold 0.5",
		"http  80    TCP       -             20001",
		"Query:        sum(rate(http_requests_total[1m])) or vector(0)",
		"Threshold:    0.5; a value below it is idle",
		"Last result:  active: 2.5 is not below the threshold 0.5",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status web lacks %q:\n%s", want, out)
		}
	}

	out, _, err = p.run(ctx, "status", "sleepy", "--kubeconfig", kc, "-n", f.ns)
	if err != nil {
		t.Fatalf("status sleepy: %v", err)
	}
	if want := "Scaling down:    asleep: scaled to zero 2d ago"; !strings.Contains(out, want) {
		t.Errorf("status sleepy lacks %q:\n%s", want, out)
	}

	_, _, err = p.run(ctx, "status", "nope", "--kubeconfig", kc, "-n", f.ns)
	if err == nil || !strings.Contains(err.Error(), `cannot get elastiservices.elasti.dev "nope" in namespace "`+f.ns+`": not found`) {
		t.Errorf("status of a missing ElastiService: err = %v", err)
	}
}

func TestKeepAwakeAndAllowSleep(t *testing.T) {
	ctx := context.Background()
	f := setup(t, ctx)
	kc := writeKubeconfig(t, kubeconfigOptions{})
	p := f.plugin()
	key := client.ObjectKey{Namespace: f.ns, Name: "web"}

	out, _, err := p.run(ctx, "keep-awake", "web", "--kubeconfig", kc, "-n", f.ns)
	if err != nil {
		t.Fatalf("keep-awake: %v", err)
	}
	if !strings.Contains(out, "kept awake") {
		t.Errorf("keep-awake output: %s", out)
	}
	if got := annotations(t, ctx, key)[contract.AnnotationKeepAwake]; got != "true" {
		t.Errorf("after keep-awake %s = %q, want true", contract.AnnotationKeepAwake, got)
	}
	out, _, err = p.run(ctx, "status", "web", "--kubeconfig", kc, "-n", f.ns)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Scaling down:    no: elasti.dev/keep-awake=true pins it awake") {
		t.Errorf("status after keep-awake:\n%s", out)
	}

	if _, _, err := p.run(ctx, "allow-sleep", "web", "--kubeconfig", kc, "-n", f.ns); err != nil {
		t.Fatalf("allow-sleep: %v", err)
	}
	if v, ok := annotations(t, ctx, key)[contract.AnnotationKeepAwake]; ok {
		t.Errorf("after allow-sleep %s is still set to %q", contract.AnnotationKeepAwake, v)
	}
	// allow-sleep is idempotent.
	if _, _, err := p.run(ctx, "allow-sleep", "web", "--kubeconfig", kc, "-n", f.ns); err != nil {
		t.Fatalf("second allow-sleep: %v", err)
	}
}

func TestWake(t *testing.T) {
	ctx := context.Background()
	f := setup(t, ctx)
	kc := writeKubeconfig(t, kubeconfigOptions{})
	p := f.plugin()
	key := client.ObjectKey{Namespace: f.ns, Name: "sleepy"}

	t.Run("sets the annotation", func(t *testing.T) {
		out, _, err := p.run(ctx, "wake", "sleepy", "--kubeconfig", kc, "-n", f.ns)
		if err != nil {
			t.Fatalf("wake: %v", err)
		}
		if want := "elastiservice " + f.ns + "/sleepy: wake requested\n"; out != want {
			t.Errorf("wake output = %q, want %q", out, want)
		}
		v := annotations(t, ctx, key)[contract.AnnotationWakeNow]
		if ts, err := time.Parse(time.RFC3339Nano, v); err != nil || !ts.Equal(f.now) {
			t.Errorf("%s = %q, want the clock's time %s", contract.AnnotationWakeNow, v, f.now.Format(time.RFC3339Nano))
		}
	})

	t.Run("wait times out when nobody acts", func(t *testing.T) {
		_, _, err := p.run(ctx, "wake", "sleepy", "--kubeconfig", kc, "-n", f.ns, "--wait", "--timeout", "300ms")
		if err == nil || !strings.Contains(err.Error(), "did not wake within 300ms: the operator has not acted on elasti.dev/wake-now yet") {
			t.Errorf("wake --wait without an operator: err = %v", err)
		}
	})

	t.Run("wait returns once the operator woke it", func(t *testing.T) {
		// The first subtest's request is still there. A fake operator that
		// acted on it could be gone before this wake's request arrives (it
		// acts once), and this wait would find nobody to act on it.
		es := &elastiv1alpha1.ElastiService{}
		if err := k8s.Get(ctx, key, es); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(es.DeepCopy())
		delete(es.Annotations, contract.AnnotationWakeNow)
		if err := k8s.Patch(ctx, es, patch); err != nil {
			t.Fatalf("remove the earlier wake request: %v", err)
		}
		opCtx, stop := context.WithCancel(ctx)
		defer stop()
		done := make(chan error, 1)
		go func() { done <- fakeOperatorWake(opCtx, key) }()

		out, _, err := p.run(ctx, "wake", "sleepy", "--kubeconfig", kc, "-n", f.ns, "--wait", "--timeout", "20s")
		if err != nil {
			t.Fatalf("wake --wait: %v", err)
		}
		if !strings.Contains(out, "elastiservice "+f.ns+"/sleepy: awake (mode serve)") {
			t.Errorf("wake --wait output: %s", out)
		}
		// The fake operator has acted (the wait saw it), so it returns once
		// its status write is done; cancelling first could cut that write.
		if err := <-done; err != nil {
			t.Errorf("fake operator: %v", err)
		}
	})
}

func TestRBACIsEnforced(t *testing.T) {
	ctx := context.Background()
	f := setup(t, ctx)
	const user = "alice"
	kc := writeKubeconfig(t, kubeconfigOptions{impersonate: user})
	p := f.plugin()

	_, _, err := p.run(ctx, "keep-awake", "web", "--kubeconfig", kc, "-n", f.ns)
	wantMsg := `cannot patch elastiservices.elasti.dev "web" in namespace "` + f.ns + `": forbidden; ` +
		`you need a Role in namespace "` + f.ns + `" granting verb "patch" on resource "elastiservices" in API group elasti.dev`
	if err == nil || !strings.Contains(err.Error(), wantMsg) {
		t.Fatalf("keep-awake without RBAC: err = %v\nwant it to contain %s", err, wantMsg)
	}
	if _, ok := annotations(t, ctx, client.ObjectKey{Namespace: f.ns, Name: "web"})[contract.AnnotationKeepAwake]; ok {
		t.Fatal("a forbidden keep-awake changed the object")
	}
	_, _, err = p.run(ctx, "list", "--kubeconfig", kc, "-A")
	if err == nil || !strings.Contains(err.Error(), `you need a ClusterRole across all namespaces granting verb "list"`) {
		t.Errorf("list -A without RBAC: err = %v", err)
	}

	// Grant ElastiServices but not deployments/scale: the list works and the
	// replicas show as unknown, with the missing rule on stderr.
	grant(t, ctx, f.ns, user, rbacv1.PolicyRule{
		APIGroups: []string{elastiGroup}, Resources: []string{elastiResource}, Verbs: []string{"get", "list", "patch"},
	})
	out, stderr, err := p.run(ctx, "list", "--kubeconfig", kc, "-n", f.ns)
	if err != nil {
		t.Fatalf("list with RBAC on elastiservices: %v", err)
	}
	if rows := fields(out); len(rows) != 4 || rows[3][5] != "?/1" {
		t.Errorf("list rows: %q", rows)
	}
	if want := `granting verb "get" on resource "deployments/scale" in API group apps`; !strings.Contains(stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
	if _, _, err := p.run(ctx, "keep-awake", "web", "--kubeconfig", kc, "-n", f.ns); err != nil {
		t.Errorf("keep-awake with RBAC: %v", err)
	}
}

// TestKubeconfigSelection: $KUBECONFIG, the context's namespace and
// --context pick the cluster and namespace, as with kubectl.
func TestKubeconfigSelection(t *testing.T) {
	ctx := context.Background()
	f := setup(t, ctx)
	p := f.plugin()

	t.Setenv("KUBECONFIG", writeKubeconfig(t, kubeconfigOptions{namespace: f.ns}))
	out, _, err := p.run(ctx, "list")
	if err != nil {
		t.Fatalf("list with $KUBECONFIG: %v", err)
	}
	if rows := fields(out); len(rows) != 4 || rows[1][0] != f.ns {
		t.Errorf("list in the context's namespace: %q", rows)
	}

	broken := writeKubeconfig(t, kubeconfigOptions{namespace: f.ns, brokenCurrent: true})
	if _, _, err := p.run(ctx, "status", "web", "--kubeconfig", broken, "-n", f.ns); err == nil {
		t.Error("the current context points at a closed port, yet status succeeded")
	}
	if _, _, err := p.run(ctx, "status", "web", "--kubeconfig", broken, "--context", "envtest"); err != nil {
		t.Errorf("status --context envtest: %v", err)
	}
}
