package chart

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// apiService is the part of an apiregistration.k8s.io/v1 APIService the
// tests compare (kube-aggregator's types are not a dependency).
type apiService struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Group                 string `json:"group"`
		Version               string `json:"version"`
		InsecureSkipTLSVerify bool   `json:"insecureSkipTLSVerify"`
		GroupPriorityMinimum  int    `json:"groupPriorityMinimum"`
		VersionPriority       int    `json:"versionPriority"`
		Service               struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
			Port      int    `json:"port"`
		} `json:"service"`
	} `json:"spec"`
}

// TestMetricsAPIMatchesKustomize: with metricsAPI.enabled the chart renders
// config/metrics-api's objects with the release's names: the APIService
// reaches the release's Service, which selects the leader's label; the
// permissions are the same; the operator gets the flags, its pod's name
// and the port.
func TestMetricsAPIMatchesKustomize(t *testing.T) {
	r := render(t, "metricsAPI.enabled=true")
	k := map[string]string{}
	for _, f := range []string{"apiservice.yaml", "service.yaml", "rbac.yaml"} {
		for key, doc := range byKindName(string(read(t, filepath.Join(repoRoot, "config", "metrics-api", f)))) {
			k[key] = doc
		}
	}

	var want, got apiService
	if err := yaml.Unmarshal([]byte(k["APIService/v1beta1.external.metrics.k8s.io"]), &want); err != nil {
		t.Fatal(err)
	}
	doc, ok := r["APIService/v1beta1.external.metrics.k8s.io"]
	if !ok {
		t.Fatal("no APIService rendered")
	}
	if err := yaml.Unmarshal([]byte(doc), &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Service.Name != "elasti-x-metrics-api" || got.Spec.Service.Namespace != "platform" {
		t.Errorf("the APIService reaches %+v, want the release's Service", got.Spec.Service)
	}
	got.Spec.Service.Name, got.Spec.Service.Namespace = want.Spec.Service.Name, want.Spec.Service.Namespace
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("APIService differs from config/metrics-api (-kustomize +chart)\n%s", diff)
	}
	if want.Spec.InsecureSkipTLSVerify {
		t.Error("the APIService skips TLS verification")
	}

	var wantSvc, gotSvc corev1.Service
	if err := yaml.UnmarshalStrict([]byte(k["Service/elasti-metrics-api"]), &wantSvc); err != nil {
		t.Fatal(err)
	}
	r.decode(t, "Service/elasti-x-metrics-api", &gotSvc)
	for _, s := range []corev1.Service{wantSvc, gotSvc} {
		if s.Spec.Selector["elasti.dev/metrics-api"] != "serving" || s.Spec.Selector["app.kubernetes.io/component"] != "operator" {
			t.Errorf("Service %s selects %v, want the leading operator pod only", s.Name, s.Spec.Selector)
		}
	}
	if diff := cmp.Diff(wantSvc.Spec.Ports, gotSvc.Spec.Ports); diff != "" {
		t.Errorf("Service ports (-kustomize +chart)\n%s", diff)
	}

	for _, pair := range [][2]string{
		{"ClusterRole/elasti-operator-metrics-api", "ClusterRole/elasti-x-operator-metrics-api"},
		{"Role/elasti-operator-metrics-api", "Role/elasti-x-operator-metrics-api"},
		{"ClusterRole/elasti-external-metrics-view", "ClusterRole/elasti-x-external-metrics-view"},
	} {
		var w, g rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(k[pair[0]]), &w); err != nil {
			t.Fatal(err)
		}
		r.decode(t, pair[1], &g)
		if diff := cmp.Diff(w.Rules, g.Rules); diff != "" {
			t.Errorf("%s rules (-kustomize +chart)\n%s", pair[1], diff)
		}
	}
	var rb rbacv1.RoleBinding
	r.decode(t, "RoleBinding/elasti-x-metrics-api-auth-reader", &rb)
	if rb.Namespace != "kube-system" || rb.RoleRef.Name != "extension-apiserver-authentication-reader" ||
		len(rb.Subjects) != 1 || rb.Subjects[0].Name != "elasti-x-operator" || rb.Subjects[0].Namespace != "platform" {
		t.Errorf("auth reader binding: %+v", rb)
	}

	var d appsv1.Deployment
	r.decode(t, "Deployment/elasti-x-operator", &d)
	c := d.Spec.Template.Spec.Containers[0]
	for _, a := range []string{"--metrics-api-port=6443", "--metrics-api-service=elasti-x-metrics-api", "--resolver-admin-port=8012"} {
		if !slices.Contains(c.Args, a) {
			t.Errorf("operator args lack %s: %s", a, strings.Join(c.Args, " "))
		}
	}
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "POD_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name"
	}) {
		t.Errorf("operator env lacks POD_NAME from metadata.name: %+v", c.Env)
	}
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "metrics-api" && p.ContainerPort == 6443 }) {
		t.Errorf("operator ports lack metrics-api 6443: %+v", c.Ports)
	}
}

// TestMetricsAPIOffByDefault: the default install leaves
// external.metrics.k8s.io alone (KEDA or prometheus-adapter may serve it),
// and the metrics API cannot be turned on without the webhook's
// certificate.
func TestMetricsAPIOffByDefault(t *testing.T) {
	r := render(t, "")
	for key := range r {
		if strings.Contains(key, "metrics-api") || strings.HasPrefix(key, "APIService/") {
			t.Errorf("%s rendered by default", key)
		}
	}
	var d appsv1.Deployment
	r.decode(t, "Deployment/elasti-x-operator", &d)
	if args := strings.Join(d.Spec.Template.Spec.Containers[0].Args, " "); strings.Contains(args, "--metrics-api") {
		t.Errorf("operator args: %s", args)
	}
	cmd := exec.Command(helmBinary(t), "template", "x", chartDir, "--set", "metricsAPI.enabled=true,webhook.enabled=false")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "metricsAPI.enabled needs webhook.enabled") {
		t.Errorf("metricsAPI without the webhook: err %v\n%s", err, out)
	}
}
