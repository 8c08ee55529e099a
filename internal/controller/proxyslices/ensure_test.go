package proxyslices

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// TestEnsure: Ensure leaves exactly the wanted slices among those the
// ElastiService owns (an updated one, a stale family deleted), and touches
// no slice with the same labels that another owner controls; Remove leaves
// none of its own.
func TestEnsure(t *testing.T) {
	ctx := context.Background()
	es := &elastiv1alpha1.ElastiService{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", UID: "es-uid"},
		Spec:       elastiv1alpha1.ElastiServiceSpec{Service: "web"},
	}
	ports := []elastiv1alpha1.ProxyPort{{Name: "http", Port: 80, Protocol: "TCP", ResolverPort: 20001}}
	dual := []Resolver{{Name: "a", UID: "ua", IPv4: "10.0.0.1", IPv6: "fd00::1"}}
	v4 := []Resolver{{Name: "b", UID: "ub", IPv4: "10.0.0.2"}}

	// What an earlier reconcile wrote: both families, resolver a.
	var objs []client.Object
	for _, s := range Build(es, ports, dual) {
		objs = append(objs, s)
	}
	// A slice of the same name pattern and labels that another
	// ElastiService of the same name (an earlier incarnation) controls.
	stranger := Build(&elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", UID: "old-uid"}, Spec: es.Spec}, ports, dual)[0]
	stranger.Name = "web-elasti-other"
	objs = append(objs, stranger)
	c := fake.NewClientBuilder().WithObjects(objs...).Build()

	if err := Ensure(ctx, c, es, Build(es, ports, v4)); err != nil {
		t.Fatal(err)
	}
	owned, err := Owned(ctx, c, es)
	if err != nil {
		t.Fatal(err)
	}
	if len(owned) != 1 || owned["web-elasti-ipv4"] == nil {
		t.Fatalf("owned after Ensure: %v", keys(owned))
	}
	if diff := cmp.Diff([]string{"10.0.0.2"}, owned["web-elasti-ipv4"].Endpoints[0].Addresses); diff != "" {
		t.Errorf("IPv4 slice not updated (-want +got)\n%s", diff)
	}

	if err := Remove(ctx, c, es); err != nil {
		t.Fatal(err)
	}
	if owned, err = Owned(ctx, c, es); err != nil || len(owned) != 0 {
		t.Errorf("owned after Remove: %v, %v", keys(owned), err)
	}
	s := &discoveryv1.EndpointSlice{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(stranger), s); err != nil {
		t.Errorf("a slice another owner controls was touched: %v", err)
	}
}

func keys(m map[string]*discoveryv1.EndpointSlice) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
