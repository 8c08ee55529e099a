//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestHelmInstall proves the Helm install path: charts/elasti, installed
// with the pinned helm into a fresh namespace, brings up the operator (which
// wins its leader election with the chart's RBAC) and the resolvers, all
// Ready, along with the CRD and the admission policy; `helm uninstall`
// removes the release's cluster-scoped objects again.
//
// The kustomize install (elasti-system) may run in the same cluster, so the
// release has its own name and namespace, its cluster-scoped objects carry
// the release name, and its operator watches only its own (empty)
// namespace: two operators must never reconcile the same ElastiServices.
// The CRD is shared; helm skips it when it already exists.
func TestHelmInstall(t *testing.T) {
	e := Get(t)
	helm := buildHelm(t, e.Cluster.RepoRoot)
	ns := e.NewNamespace(t)
	release := "elasti-helm-" + strings.TrimPrefix(ns, "e2e-")

	h := &helmCLI{bin: helm, kubeconfig: e.Cluster.Kubeconfig(), home: t.TempDir(), dir: e.Cluster.RepoRoot}
	uninstalled := false
	t.Cleanup(func() {
		// Runs before the namespace is deleted (cleanups run last-in first-out).
		if !uninstalled {
			if out, err := h.run(context.Background(), "uninstall", release, "--namespace", ns, "--wait", "--timeout", "2m"); err != nil {
				t.Errorf("helm uninstall: %v\n%s", err, out)
			}
		}
	})

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := h.run(ctx, "install", release, filepath.Join("charts", "elasti"),
		"--namespace", ns,
		"--set", "operator.image.repository=elasti/operator,operator.image.tag=dev,operator.image.pullPolicy=IfNotPresent",
		"--set", "resolver.image.repository=elasti/resolver,resolver.image.tag=dev,resolver.image.pullPolicy=IfNotPresent",
		"--set", "watchNamespaces={"+ns+"}",
		"--timeout", "4m")
	if err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	t.Logf("helm install:\n%s", out)

	// The release name contains "elasti", so it is the object name prefix.
	operator, resolver := release+"-operator", release+"-resolver"
	if err := e.WaitRolledOut(ctx, ns, operator, resolver); err != nil {
		t.Fatalf("the chart's Deployments did not become ready: %v", err)
	}
	t.Logf("operator and resolvers ready %s after helm install started", time.Since(start).Round(10*time.Millisecond))

	// The operator's RBAC works: it holds its leader-election Lease in the
	// release namespace.
	Eventually(t, time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
		var lease coordinationv1.Lease
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "elasti-operator.elasti.dev"}, &lease); err != nil {
			return err
		}
		if ptr.Deref(lease.Spec.HolderIdentity, "") == "" {
			return errors.New("the leader Lease has no holder")
		}
		return nil
	})

	// The CRD (shared with any other install) and the release's own
	// admission policy and binding.
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	if err := e.Client.Get(ctx, client.ObjectKey{Name: "elastiservices.elasti.dev"}, crd); err != nil {
		t.Errorf("CRD elastiservices.elasti.dev: %v", err)
	}
	for _, vapName := range []string{release + "-trigger-threshold", release + "-status-writers"} {
		var vap admissionregistrationv1.ValidatingAdmissionPolicy
		if err := e.Client.Get(ctx, client.ObjectKey{Name: vapName}, &vap); err != nil {
			t.Errorf("ValidatingAdmissionPolicy %s: %v", vapName, err)
		}
		var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
		if err := e.Client.Get(ctx, client.ObjectKey{Name: vapName}, &binding); err != nil {
			t.Errorf("ValidatingAdmissionPolicyBinding %s: %v", vapName, err)
		} else if binding.Spec.PolicyName != vapName {
			t.Errorf("binding %s names policy %q, want %q", vapName, binding.Spec.PolicyName, vapName)
		}
	}

	// Namespace-scoped install: the operator's namespaced rules are a Role in
	// the watched namespace, and its ClusterRole keeps only cluster-scoped
	// resources: tokenreviews (the activation server), subjectaccessreviews
	// (the webhook's access review), and nodes and nodes/stats (network
	// triggers read the kubelets).
	var role rbacv1.Role
	if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: operator}, &role); err != nil {
		t.Errorf("Role %s/%s: %v", ns, operator, err)
	}
	var cr rbacv1.ClusterRole
	if err := e.Client.Get(ctx, client.ObjectKey{Name: operator}, &cr); err != nil {
		t.Errorf("ClusterRole %s: %v", operator, err)
	} else {
		for _, r := range cr.Rules {
			for _, res := range r.Resources {
				if res != "tokenreviews" && res != "subjectaccessreviews" && res != "nodes" && res != "nodes/stats" {
					t.Errorf("ClusterRole %s grants %s cluster-wide in a namespace-scoped install", operator, res)
				}
			}
		}
	}

	out, err = h.run(ctx, "uninstall", release, "--namespace", ns, "--wait", "--timeout", "2m")
	if err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	uninstalled = true
	for _, obj := range []client.Object{
		&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: release + "-trigger-threshold"}},
		&admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: release + "-status-writers"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: operator}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: resolver}},
	} {
		Eventually(t, time.Minute, 250*time.Millisecond, func(ctx context.Context) error {
			err := e.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			return fmt.Errorf("%T %s still exists after helm uninstall", obj, obj.GetName())
		})
	}
	if err := e.Client.Get(ctx, client.ObjectKey{Name: "elastiservices.elasti.dev"}, crd); err != nil {
		t.Errorf("the CRD must outlive helm uninstall (helm never deletes crds/): %v", err)
	}
}

// buildHelm builds (or reuses) the pinned helm with hack/helm.sh and returns
// its path.
func buildHelm(t *testing.T, root string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "helm.sh"))
	cmd.Dir = root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("hack/helm.sh: %v\n%s", err, stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

// helmCLI runs helm against the local cluster with its own state
// directories, so that it never reads or writes the user's.
type helmCLI struct {
	bin, kubeconfig, home, dir string
}

func (h *helmCLI) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, h.bin, append(args, "--kubeconfig", h.kubeconfig)...)
	cmd.Dir = h.dir
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(h.home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(h.home, "config"),
		"HELM_DATA_HOME="+filepath.Join(h.home, "data"),
	)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// setSharedOperatorAside takes the kustomize install's operator, which
// watches every namespace, out of the way of a Helm release's: two
// operators must never reconcile the same ElastiServices. It scales that
// operator to zero and deletes its webhook configuration (whose calls would
// now fail) and its status-writers policy binding (which applies in every
// namespace and lets only that operator write status; a release's own
// applies in its watched namespaces). All are re-applied at cleanup.
func setSharedOperatorAside(ctx context.Context, t *testing.T, e *Env) {
	t.Helper()
	t.Cleanup(func() { e.ReapplyElasti(t) })
	e.Scale(t, ElastiNamespace, OperatorDeployment, 0)
	Eventually(t, 2*time.Minute, 500*time.Millisecond, func(ctx context.Context) error {
		pods, err := e.Pods(ctx, ElastiNamespace, map[string]string{"app.kubernetes.io/component": "operator"})
		if err != nil {
			return err
		}
		if len(pods) > 0 {
			return fmt.Errorf("%d operator pods of the kustomize install remain", len(pods))
		}
		return nil
	})
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "elasti-webhook"}}
	if err := e.Client.Delete(ctx, vwc); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete the kustomize install's webhook configuration: %v", err)
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "elasti-status-writers"}}
	if err := e.Client.Delete(ctx, binding); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete the kustomize install's status-writers binding: %v", err)
	}
}

// previousChart extracts charts/elasti as it was before the last commit
// that changed it into a temporary directory, and returns the chart's
// directory and that commit's parent. It needs the repository's history
// (a full clone, as `git clone` makes).
func previousChart(t *testing.T, root string) (dir, rev string) {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "log", "-1", "--format=%H", "--", "charts/elasti").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("the last commit that changed charts/elasti: %v %q (the test needs the repository's history)", err, out)
	}
	rev = strings.TrimSpace(string(out)) + "~1"
	tmp := t.TempDir()
	cmd := exec.Command("bash", "-o", "pipefail", "-c", `git -C "$1" archive "$2" charts/elasti | tar -x -C "$3"`, "bash", root, rev, tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("extract charts/elasti at %s: %v\n%s", rev, err, out)
	}
	if out, err := exec.Command("git", "-C", root, "rev-parse", "--short", rev).Output(); err == nil {
		rev = strings.TrimSpace(string(out))
	}
	return filepath.Join(tmp, "charts", "elasti"), rev
}
