package cli

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestExplain(t *testing.T) {
	esGR := schema.GroupResource{Group: elastiGroup, Resource: elastiResource}
	forbidden := apierrors.NewForbidden(esGR, "httpbin", errors.New(`User "alice" cannot patch resource`))
	cases := []struct {
		name string
		err  error
		call apiCall
		want string
	}{
		{
			name: "forbidden patch in a namespace",
			err:  forbidden,
			call: esCall("patch", "demo", "httpbin"),
			want: `cannot patch elastiservices.elasti.dev "httpbin" in namespace "demo": forbidden; ` +
				`you need a Role in namespace "demo" granting verb "patch" on resource "elastiservices" in API group elasti.dev: ` +
				forbidden.Error(),
		},
		{
			name: "forbidden list across namespaces",
			err:  apierrors.NewForbidden(esGR, "", errors.New("no")),
			call: esCall("list", "", ""),
			want: `cannot list elastiservices.elasti.dev across all namespaces: forbidden; ` +
				`you need a ClusterRole across all namespaces granting verb "list" on resource "elastiservices" in API group elasti.dev: `,
		},
		{
			name: "forbidden scale of a core resource",
			err:  apierrors.NewForbidden(schema.GroupResource{Resource: "replicationcontrollers"}, "rc", errors.New("no")),
			call: apiCall{verb: "get", resource: "replicationcontrollers/scale", namespace: "demo", name: "rc"},
			want: `cannot get replicationcontrollers/scale "rc" in namespace "demo": forbidden; ` +
				`you need a Role in namespace "demo" granting verb "get" on resource "replicationcontrollers/scale" in API group "" (core): `,
		},
		{
			name: "subresource in a named group",
			err:  errors.New("boom"),
			call: apiCall{verb: "get", group: "apps", resource: "deployments/scale", namespace: "demo", name: "web"},
			want: `cannot get deployments.apps/scale "web" in namespace "demo": boom`,
		},
		{
			name: "not found",
			err:  apierrors.NewNotFound(esGR, "nope"),
			call: esCall("get", "demo", "nope"),
			want: `cannot get elastiservices.elasti.dev "nope" in namespace "demo": not found: `,
		},
		{
			name: "CRD missing",
			err:  &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: elastiGroup, Kind: "ElastiService"}},
			call: esCall("list", "demo", ""),
			want: `cannot list elastiservices.elasti.dev in namespace "demo": the cluster does not serve elastiservices.elasti.dev; is its CRD installed? `,
		},
		{
			name: "unauthorized",
			err:  apierrors.NewUnauthorized("bad token"),
			call: esCall("list", "demo", ""),
			want: `cannot list elastiservices.elasti.dev in namespace "demo": the API server did not accept your credentials; check --kubeconfig and --context: `,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := explain(tc.err, tc.call)
			if !strings.HasPrefix(got.Error(), tc.want) {
				t.Errorf("explain:\n got  %s\n want %s...", got, tc.want)
			}
			if !errors.Is(got, tc.err) {
				t.Error("explain must wrap the API error")
			}
		})
	}
	if explain(nil, esCall("get", "demo", "x")) != nil {
		t.Error("explain(nil) must be nil")
	}
}
