package chart

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// renderedObject is one object of `helm template` output.
type renderedObject struct {
	kind, namespace, name, doc string
}

// renderObjects renders the chart as release "elasti" in elasti-system with
// set (helm --set syntax, may be empty).
func renderObjects(t *testing.T, set string) []renderedObject {
	t.Helper()
	var objs []renderedObject
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(helmTemplate(t, "elasti", "elasti-system", set), -1) {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil || meta.Kind == "" {
			continue
		}
		objs = append(objs, renderedObject{kind: meta.Kind, namespace: meta.Metadata.Namespace, name: meta.Metadata.Name, doc: doc})
	}
	return objs
}

// resolverArgs returns the resolver container's arguments.
func resolverArgs(t *testing.T, objs []renderedObject) []string {
	t.Helper()
	for _, o := range objs {
		if o.kind != "Deployment" || o.name != "elasti-resolver" {
			continue
		}
		var d appsv1.Deployment
		if err := yaml.UnmarshalStrict([]byte(o.doc), &d); err != nil {
			t.Fatal(err)
		}
		return d.Spec.Template.Spec.Containers[0].Args
	}
	t.Fatal("no resolver Deployment rendered")
	return nil
}

// TestResolverNamespaceScope: with watchNamespaces the resolver is told the
// operator's namespaces and its read-only rules become a Role and
// RoleBinding in each of them, with nothing cluster-scoped left; without,
// it watches every namespace under a ClusterRole.
func TestResolverNamespaceScope(t *testing.T) {
	// resolverRBAC maps "Kind/namespace" to each RBAC object of the
	// resolver.
	resolverRBAC := func(objs []renderedObject) map[string]string {
		out := map[string]string{}
		for _, o := range objs {
			if o.name == "elasti-resolver" && strings.Contains(o.kind, "Role") {
				out[o.kind+"/"+o.namespace] = o.doc
			}
		}
		return out
	}
	watchArg := func(args []string) []string {
		var out []string
		for _, a := range args {
			if strings.HasPrefix(a, "--watch-namespaces") {
				out = append(out, a)
			}
		}
		return out
	}

	all := renderObjects(t, "")
	if got := watchArg(resolverArgs(t, all)); len(got) != 0 {
		t.Errorf("cluster-wide install passes %v, want no --watch-namespaces", got)
	}
	got := slices.Sorted(maps.Keys(resolverRBAC(all)))
	if diff := cmp.Diff([]string{"ClusterRole/", "ClusterRoleBinding/"}, got); diff != "" {
		t.Errorf("cluster-wide resolver RBAC (-want +got):\n%s", diff)
	}

	scoped := renderObjects(t, "watchNamespaces={team-a,team-b}")
	if diff := cmp.Diff([]string{"--watch-namespaces=team-a,team-b"}, watchArg(resolverArgs(t, scoped))); diff != "" {
		t.Errorf("resolver --watch-namespaces (-want +got):\n%s", diff)
	}
	rbac := resolverRBAC(scoped)
	if len(rbac) != 4 {
		t.Errorf("namespaced resolver RBAC: %d objects, want a Role and a RoleBinding in each of 2 namespaces", len(rbac))
	}
	var clusterRole rbacv1.ClusterRole
	for _, o := range all {
		if o.kind == "ClusterRole" && o.name == "elasti-resolver" {
			if err := yaml.UnmarshalStrict([]byte(o.doc), &clusterRole); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, ns := range []string{"team-a", "team-b"} {
		var role rbacv1.Role
		if err := yaml.UnmarshalStrict([]byte(rbac["Role/"+ns]), &role); err != nil {
			t.Fatalf("Role in %s: %v", ns, err)
		}
		if diff := cmp.Diff(clusterRole.Rules, role.Rules); diff != "" {
			t.Errorf("Role in %s: rules differ from the cluster-wide ones (-want +got):\n%s", ns, diff)
		}
		var binding rbacv1.RoleBinding
		if err := yaml.UnmarshalStrict([]byte(rbac["RoleBinding/"+ns]), &binding); err != nil {
			t.Fatalf("RoleBinding in %s: %v", ns, err)
		}
		wantSubjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "elasti-resolver", Namespace: "elasti-system"}}
		if binding.RoleRef.Kind != "Role" || binding.RoleRef.Name != "elasti-resolver" || cmp.Diff(wantSubjects, binding.Subjects) != "" {
			t.Errorf("RoleBinding in %s: roleRef %+v subjects %+v", ns, binding.RoleRef, binding.Subjects)
		}
	}
}
