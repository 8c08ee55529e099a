package cli

import (
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
)

// apiCall describes one request to the API server, so that a failure can say
// what was attempted and which RBAC rule it needs.
type apiCall struct {
	// verb is the RBAC verb: get, list, patch.
	verb string
	// group is the API group; "" for the core group.
	group string
	// resource is the plural resource name, with "/subresource" if any.
	resource string
	// namespace is empty for a request across all namespaces.
	namespace string
	// name is empty for a list.
	name string
}

// elastiServices is the resource of every ElastiService call.
const (
	elastiGroup    = "elasti.dev"
	elastiResource = "elastiservices"
)

func esCall(verb, namespace, name string) apiCall {
	return apiCall{verb: verb, group: elastiGroup, resource: elastiResource, namespace: namespace, name: name}
}

// qualifiedResource is resource.group, as kubectl and RBAC errors write it.
func (a apiCall) qualifiedResource() string {
	if a.group == "" {
		return a.resource
	}
	res, sub, found := strings.Cut(a.resource, "/")
	if found {
		return res + "." + a.group + "/" + sub
	}
	return res + "." + a.group
}

func (a apiCall) scope() string {
	if a.namespace == "" {
		return "across all namespaces"
	}
	return fmt.Sprintf("in namespace %q", a.namespace)
}

func (a apiCall) String() string {
	target := a.qualifiedResource()
	if a.name != "" {
		target += fmt.Sprintf(" %q", a.name)
	}
	return fmt.Sprintf("%s %s %s", a.verb, target, a.scope())
}

// rbacHint says which rule a Role (or ClusterRole, across namespaces) needs
// for the call to be allowed.
func (a apiCall) rbacHint() string {
	kind := "a Role"
	if a.namespace == "" {
		kind = "a ClusterRole"
	}
	group := a.group
	if group == "" {
		group = `"" (core)`
	}
	return fmt.Sprintf("you need %s %s granting verb %q on resource %q in API group %s", kind, a.scope(), a.verb, a.resource, group)
}

// explain wraps err from call with a sentence a user can act on: the missing
// RBAC rule for Forbidden, the missing object for NotFound, the missing CRD
// when the API server does not know the type.
func explain(err error, call apiCall) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsForbidden(err):
		return fmt.Errorf("cannot %s: forbidden; %s: %w", call, call.rbacHint(), err)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("cannot %s: the API server did not accept your credentials; check --kubeconfig and --context: %w", call, err)
	case meta.IsNoMatchError(err):
		return fmt.Errorf("cannot %s: the cluster does not serve %s; is its CRD installed? %w", call, call.qualifiedResource(), err)
	case apierrors.IsNotFound(err) && call.name != "":
		return fmt.Errorf("cannot %s: not found: %w", call, err)
	default:
		return fmt.Errorf("cannot %s: %w", call, err)
	}
}
