package route

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/resolver/resolvertest"
)

func TestTargetsOf(t *testing.T) {
	es := types.NamespacedName{Namespace: "demo", Name: "web"}
	svc := types.NamespacedName{Namespace: "demo", Name: "websvc"}
	healthz := &StaticRules{Rules: []elastiv1alpha1.StaticResponse{{
		Name: "healthz", Match: elastiv1alpha1.StaticResponseMatch{Path: &elastiv1alpha1.PathMatch{Exact: ptr.To("/healthz")}},
	}}}
	tests := []struct {
		name string
		in   *elastiv1alpha1.ElastiService
		want map[int32]Target
	}{
		{
			name: "ports with defaults",
			in: resolvertest.ElastiService("demo", "web", "websvc", nil,
				elastiv1alpha1.ProxyPort{Name: "http", Port: 80, ResolverPort: 20001},
				elastiv1alpha1.ProxyPort{Name: "db", Port: 5432, Protocol: "TCP", ResolverPort: 20002}),
			want: map[int32]Target{
				20001: {ElastiService: es, Service: svc, PortName: "http", Port: 80},
				20002: {ElastiService: es, Service: svc, PortName: "db", Port: 5432},
			},
		},
		{
			name: "spec.proxy bounds are carried",
			in: resolvertest.ElastiService("demo", "web", "websvc", &elastiv1alpha1.ProxySpec{HoldTimeout: "90s", MaxHeldRequests: 7},
				elastiv1alpha1.ProxyPort{Port: 8080, AppProtocol: "grpc", ResolverPort: 20003}),
			want: map[int32]Target{
				20003: {ElastiService: es, Service: svc, Port: 8080, AppProtocol: "grpc", HoldTimeout: 90 * time.Second, MaxHeld: 7},
			},
		},
		{
			name: "static responses are carried, shared by the ports",
			in: resolvertest.ElastiService("demo", "web", "websvc", &elastiv1alpha1.ProxySpec{StaticResponses: []elastiv1alpha1.StaticResponse{{
				Name: "healthz", Match: elastiv1alpha1.StaticResponseMatch{Path: &elastiv1alpha1.PathMatch{Exact: ptr.To("/healthz")}},
			}}},
				elastiv1alpha1.ProxyPort{Name: "http", Port: 80, ResolverPort: 20008},
				elastiv1alpha1.ProxyPort{Name: "grpc", Port: 81, ResolverPort: 20009}),
			want: map[int32]Target{
				20008: {ElastiService: es, Service: svc, PortName: "http", Port: 80, Static: healthz},
				20009: {ElastiService: es, Service: svc, PortName: "grpc", Port: 81, Static: healthz},
			},
		},
		{
			name: "the waking page is carried, shared by the ports, its default applied",
			in: resolvertest.ElastiService("demo", "web", "websvc", &elastiv1alpha1.ProxySpec{WakingPage: &elastiv1alpha1.WakingPage{HTML: "<p>{{phase}}</p>"}},
				elastiv1alpha1.ProxyPort{Name: "http", Port: 80, ResolverPort: 20010},
				elastiv1alpha1.ProxyPort{Name: "admin", Port: 81, ResolverPort: 20011}),
			want: map[int32]Target{
				20010: {ElastiService: es, Service: svc, PortName: "http", Port: 80, WakingPage: &WakingPage{Refresh: 2, HTML: "<p>{{phase}}</p>"}},
				20011: {ElastiService: es, Service: svc, PortName: "admin", Port: 81, WakingPage: &WakingPage{Refresh: 2, HTML: "<p>{{phase}}</p>"}},
			},
		},
		{
			name: "a bad hold timeout falls back to the default",
			in: resolvertest.ElastiService("demo", "web", "websvc", &elastiv1alpha1.ProxySpec{HoldTimeout: "soon"},
				elastiv1alpha1.ProxyPort{Port: 80, ResolverPort: 20004}),
			want: map[int32]Target{20004: {ElastiService: es, Service: svc, Port: 80}},
		},
		{
			name: "UDP and unallocated ports are skipped",
			in: resolvertest.ElastiService("demo", "web", "websvc", nil,
				elastiv1alpha1.ProxyPort{Name: "dns", Port: 53, Protocol: "UDP", ResolverPort: 20005},
				elastiv1alpha1.ProxyPort{Name: "later", Port: 81}),
			want: map[int32]Target{},
		},
		{
			name: "serve mode claims nothing",
			in: resolvertest.InMode(resolvertest.ElastiService("demo", "web", "websvc", nil,
				elastiv1alpha1.ProxyPort{Name: "http", Port: 80, ResolverPort: 20006}), elastiv1alpha1.ModeServe),
			want: map[int32]Target{},
		},
		{
			name: "no mode yet claims nothing",
			in: resolvertest.InMode(resolvertest.ElastiService("demo", "web", "websvc", nil,
				elastiv1alpha1.ProxyPort{Name: "http", Port: 80, ResolverPort: 20007}), ""),
			want: map[int32]Target{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, TargetsOf(tt.in)); diff != "" {
				t.Errorf("TargetsOf (-want +got):\n%s", diff)
			}
		})
	}
}
