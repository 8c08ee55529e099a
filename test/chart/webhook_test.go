package chart

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// helmTemplate renders the chart as release in namespace with set (helm
// --set syntax, may be empty), with helm state kept out of $HOME.
func helmTemplate(t *testing.T, release, namespace, set string) string {
	t.Helper()
	args := []string{"template", release, chartDir, "--namespace", namespace, "--kube-version", "v1.37.2"}
	if set != "" {
		args = append(args, "--set", set)
	}
	cmd := exec.Command(helmBinary(t), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	return string(out)
}

// rendered is `helm template` output split by kind/name.
type rendered map[string]string

func render(t *testing.T, set string) rendered {
	t.Helper()
	return byKindName(helmTemplate(t, "elasti-x", "platform", set))
}

// byKindName splits YAML documents by kind/name.
func byKindName(text string) rendered {
	r := rendered{}
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(text, -1) {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil || meta.Kind == "" {
			continue
		}
		r[meta.Kind+"/"+meta.Metadata.Name] = doc
	}
	return r
}

func (r rendered) decode(t *testing.T, key string, into any) {
	t.Helper()
	doc, ok := r[key]
	if !ok {
		t.Fatalf("%s not rendered", key)
	}
	if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
}

// TestWebhookMatchesKustomize: the chart's ValidatingWebhookConfiguration
// is config/webhook's, with the release's names; the operator is told
// those names; the Service carries the port; the RBAC names the objects.
func TestWebhookMatchesKustomize(t *testing.T) {
	var want admissionregistrationv1.ValidatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(read(t, filepath.Join(repoRoot, "config", "webhook", "validating-webhook.yaml")), &want); err != nil {
		t.Fatal(err)
	}
	r := render(t, "watchNamespaces={team-a}")
	var got admissionregistrationv1.ValidatingWebhookConfiguration
	r.decode(t, "ValidatingWebhookConfiguration/elasti-x-webhook", &got)
	if len(got.Webhooks) != 1 || len(want.Webhooks) != 1 {
		t.Fatalf("webhooks: chart %d, kustomize %d; want one each", len(got.Webhooks), len(want.Webhooks))
	}
	g, w := got.Webhooks[0], want.Webhooks[0]
	if g.ClientConfig.Service == nil || g.ClientConfig.Service.Name != "elasti-x-operator" || g.ClientConfig.Service.Namespace != "platform" {
		t.Errorf("chart webhook calls %+v, want the release's operator Service", g.ClientConfig.Service)
	}
	if g.NamespaceSelector == nil || len(g.NamespaceSelector.MatchExpressions) != 1 ||
		cmp.Diff([]string{"team-a"}, g.NamespaceSelector.MatchExpressions[0].Values) != "" {
		t.Errorf("with watchNamespaces the webhook must see only them: %+v", g.NamespaceSelector)
	}
	// The rest is the kustomize install's.
	g.ClientConfig.Service.Name, g.ClientConfig.Service.Namespace = w.ClientConfig.Service.Name, w.ClientConfig.Service.Namespace
	g.NamespaceSelector = nil
	if diff := cmp.Diff(w, g); diff != "" {
		t.Errorf("chart webhook differs from config/webhook (-kustomize +chart)\n%s", diff)
	}

	var d appsv1.Deployment
	r.decode(t, "Deployment/elasti-x-operator", &d)
	args := strings.Join(d.Spec.Template.Spec.Containers[0].Args, " ")
	for _, a := range []string{"--webhook-secret=elasti-x-webhook-cert", "--webhook-configuration=elasti-x-webhook", "--webhook-service=elasti-x-operator"} {
		if !strings.Contains(args, a) {
			t.Errorf("operator args lack %s: %s", a, args)
		}
	}
	var mounted bool
	for _, m := range d.Spec.Template.Spec.Containers[0].VolumeMounts {
		mounted = mounted || m.MountPath == "/var/run/elasti/webhook"
	}
	if !mounted {
		t.Error("no writable volume at the operator's default --webhook-cert-dir")
	}
	var svc corev1.Service
	r.decode(t, "Service/elasti-x-operator", &svc)
	if !hasPort(svc, "webhook", 443) {
		t.Errorf("the operator Service has no webhook port 443: %+v", svc.Spec.Ports)
	}
	var secret corev1.Secret
	r.decode(t, "Secret/elasti-x-webhook-cert", &secret)
	var cr rbacv1.ClusterRole
	r.decode(t, "ClusterRole/elasti-x-operator-webhook", &cr)
	var role rbacv1.Role
	r.decode(t, "Role/elasti-x-operator-webhook", &role)
	if role.Namespace != "platform" {
		t.Errorf("the Secret's Role is in %q, want the release namespace", role.Namespace)
	}
	named := func(rules []rbacv1.PolicyRule) []string {
		var out []string
		for _, rule := range rules {
			out = append(out, rule.ResourceNames...)
		}
		return out
	}
	if diff := cmp.Diff([]string{"elasti-x-webhook"}, named(cr.Rules)); diff != "" {
		t.Errorf("ClusterRole writes (-want +got)\n%s", diff)
	}
	if diff := cmp.Diff([]string{"elasti-x-webhook-cert", "elasti-x-activation-ca"}, named(role.Rules)); diff != "" {
		t.Errorf("Role writes (-want +got)\n%s", diff)
	}
}

// TestWebhookDisabled: webhook.enabled=false renders none of it and turns
// the operator's webhook off.
func TestWebhookDisabled(t *testing.T) {
	r := render(t, "webhook.enabled=false")
	for key := range r {
		if strings.Contains(key, "webhook") {
			t.Errorf("%s rendered with webhook.enabled=false", key)
		}
	}
	var d appsv1.Deployment
	r.decode(t, "Deployment/elasti-x-operator", &d)
	if args := strings.Join(d.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--webhook-port=0") {
		t.Errorf("operator args lack --webhook-port=0: %s", args)
	}
	var svc corev1.Service
	r.decode(t, "Service/elasti-x-operator", &svc)
	if hasPort(svc, "webhook", 443) {
		t.Error("the operator Service has a webhook port with the webhook off")
	}
}

func hasPort(svc corev1.Service, name string, port int32) bool {
	for _, p := range svc.Spec.Ports {
		if p.Name == name && p.Port == port {
			return true
		}
	}
	return false
}

// TestAccessReviewValue: the operator reviews ElastiService authors' access
// by default, and webhook.accessReview=false turns it off explicitly.
func TestAccessReviewValue(t *testing.T) {
	for set, want := range map[string]string{"": "true", "webhook.accessReview=false": "false"} {
		var op appsv1.Deployment
		render(t, set).decode(t, "Deployment/elasti-x-operator", &op)
		if got, _ := argValue(op.Spec.Template.Spec.Containers[0].Args, "admission-access-review"); got != want {
			t.Errorf("with %q: --admission-access-review=%q, want %q", set, got, want)
		}
	}
}

// TestTenantRoles: the chart aggregates ElastiServices into Kubernetes'
// admin, edit and view roles under the release's names, and never grants
// elastiservices/status; tenantRoles.enabled=false leaves them out.
func TestTenantRoles(t *testing.T) {
	r := render(t, "")
	for name, aggregate := range map[string][]string{
		"ClusterRole/elasti-x-elastiservices-edit": {"aggregate-to-admin", "aggregate-to-edit"},
		"ClusterRole/elasti-x-elastiservices-view": {"aggregate-to-view"},
	} {
		var cr rbacv1.ClusterRole
		r.decode(t, name, &cr)
		for _, a := range aggregate {
			if cr.Labels["rbac.authorization.k8s.io/"+a] != "true" {
				t.Errorf("%s lacks the label rbac.authorization.k8s.io/%s", name, a)
			}
		}
		for _, rule := range cr.Rules {
			for _, res := range rule.Resources {
				if res != "elastiservices" {
					t.Errorf("%s grants %s", name, res)
				}
			}
		}
	}
	if _, ok := render(t, "tenantRoles.enabled=false")["ClusterRole/elasti-x-elastiservices-edit"]; ok {
		t.Error("tenantRoles.enabled=false still renders the tenant roles")
	}
}

// TestStatusWritersPolicy: the chart's status-writers policy lets through
// the release's own operator ServiceAccount, not kustomize's, and binds
// under the release's name.
func TestStatusWritersPolicy(t *testing.T) {
	r := render(t, "")
	var vap admissionregistrationv1.ValidatingAdmissionPolicy
	r.decode(t, "ValidatingAdmissionPolicy/elasti-x-status-writers", &vap)
	if len(vap.Spec.Validations) != 1 {
		t.Fatalf("validations = %d, want 1", len(vap.Spec.Validations))
	}
	expr := vap.Spec.Validations[0].Expression
	if !strings.Contains(expr, "'system:serviceaccount:platform:elasti-x-operator'") || strings.Contains(expr, "elasti-system") {
		t.Errorf("expression does not name the release's operator ServiceAccount: %s", expr)
	}
	var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
	r.decode(t, "ValidatingAdmissionPolicyBinding/elasti-x-status-writers", &binding)
	if binding.Spec.PolicyName != "elasti-x-status-writers" {
		t.Errorf("binding's policyName = %q", binding.Spec.PolicyName)
	}
	if _, ok := render(t, "admissionPolicy.enabled=false")["ValidatingAdmissionPolicy/elasti-x-status-writers"]; ok {
		t.Error("admissionPolicy.enabled=false still renders the status-writers policy")
	}
}

// TestStatusWritersPolicyScoped: a namespace-scoped install's status-writers
// policy applies in its own namespaces only, so that two such installs side
// by side do not refuse each other's operators.
func TestStatusWritersPolicyScoped(t *testing.T) {
	var vap admissionregistrationv1.ValidatingAdmissionPolicy
	render(t, "watchNamespaces={team-a,team-b}").decode(t, "ValidatingAdmissionPolicy/elasti-x-status-writers", &vap)
	sel := vap.Spec.MatchConstraints.NamespaceSelector
	if sel == nil || len(sel.MatchExpressions) != 1 {
		t.Fatalf("namespaceSelector = %+v, want one expression on the namespace's name", sel)
	}
	got := sel.MatchExpressions[0]
	if got.Key != "kubernetes.io/metadata.name" || got.Operator != "In" || strings.Join(got.Values, ",") != "team-a,team-b" {
		t.Errorf("namespaceSelector expression = %+v", got)
	}
	var wide admissionregistrationv1.ValidatingAdmissionPolicy
	render(t, "").decode(t, "ValidatingAdmissionPolicy/elasti-x-status-writers", &wide)
	if wide.Spec.MatchConstraints.NamespaceSelector != nil {
		t.Errorf("a cluster-wide install's policy is limited to %+v", wide.Spec.MatchConstraints.NamespaceSelector)
	}
}
