package estest

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

func TestElastiService(t *testing.T) {
	created := time.Date(2030, 1, 6, 8, 0, 0, 0, time.UTC)
	th := elastiv1alpha1.Threshold("0.5")
	got := New("demo", "web",
		Service("websvc"), Deployment("webapp"), Cooldown(5),
		Prometheus("http://prom:9090", "vector(0)", "0.5"),
		MaxHeld(7), Annotation("a", "b"), Created(created, 2),
		ProxyPorts(elastiv1alpha1.ProxyPort{Name: "http", Port: 80, ResolverPort: 20001}))
	want := &elastiv1alpha1.ElastiService{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", Annotations: map[string]string{"a": "b"},
			CreationTimestamp: metav1.NewTime(created), Generation: 2},
		Spec: elastiv1alpha1.ElastiServiceSpec{
			Service:           "websvc",
			ScaleTargetRef:    elastiv1alpha1.ScaleTargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "webapp"},
			MinTargetReplicas: 1,
			CooldownPeriod:    5,
			Triggers: []elastiv1alpha1.ScaleTrigger{{Type: elastiv1alpha1.TriggerTypePrometheus, Metadata: elastiv1alpha1.TriggerMetadata{
				ServerAddress: "http://prom:9090", Query: "vector(0)", Threshold: &th,
			}}},
			Proxy: &elastiv1alpha1.ProxySpec{MaxHeldRequests: 7},
		},
		Status: elastiv1alpha1.ElastiServiceStatus{ProxyPorts: []elastiv1alpha1.ProxyPort{{Name: "http", Port: 80, ResolverPort: 20001}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

// TestDefaultsAreTheAPIs: without options the builder holds what the API
// server would default, so a fixture reads the same before and after a
// round trip through envtest or a cluster.
func TestDefaultsAreTheAPIs(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "crd", "bases", "elasti.dev_elastiservices.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties
	es := New("ns", "n")
	for field, got := range map[string]int32{"minTargetReplicas": es.Spec.MinTargetReplicas, "cooldownPeriod": es.Spec.CooldownPeriod} {
		d := spec[field].Default
		if d == nil || string(d.Raw) != strconv.Itoa(int(got)) {
			t.Errorf("%s: builder has %d, the CRD defaults to %v", field, got, d)
		}
	}
}
