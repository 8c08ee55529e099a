package ports

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/resolver/route"
	"elasti.dev/elasti/internal/testenv/estest"
)

// The trimmed ElastiService routes exactly as the whole one, and keeps
// none of what the resolver does not read.
func TestTrimElastiService(t *testing.T) {
	full := estest.New("ns", "web", estest.Prometheus("http://prometheus:9090", strings.Repeat("q", 2048), "1"),
		estest.Annotation("kubectl.kubernetes.io/last-applied-configuration", strings.Repeat("x", 4096)))
	full.UID, full.ResourceVersion, full.Generation = "u-1", "42", 3
	full.Labels = map[string]string{"team": "a"}
	full.Finalizers = []string{"elasti.dev/finalizer"}
	full.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	full.Spec.Proxy = &elastiv1alpha1.ProxySpec{
		HoldTimeout: "30s", MaxHeldRequests: 7,
		Fallback:   &elastiv1alpha1.Fallback{Service: "web-static", After: "5s"},
		WakingPage: &elastiv1alpha1.WakingPage{RefreshSeconds: 3},
	}
	full.Status = elastiv1alpha1.ElastiServiceStatus{
		Mode:         elastiv1alpha1.ModeProxy,
		ProxyPorts:   []elastiv1alpha1.ProxyPort{{Name: "http", Port: 80, Protocol: "TCP", ResolverPort: 20007}},
		WakeProgress: &elastiv1alpha1.WakeProgress{Phase: "Pulling", Message: "pulling the image", Pod: "web-1"},
		Conditions: []metav1.Condition{
			{Type: elastiv1alpha1.ConditionFallbackActive, Status: metav1.ConditionTrue, Reason: "WakeTooSlow", Message: strings.Repeat("m", 512)},
			{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Proxy", Message: strings.Repeat("m", 512)},
		},
	}
	got, err := trimElastiService(full.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	trimmed := got.(*elastiv1alpha1.ElastiService)

	if d := cmp.Diff(route.TargetsOf(full), route.TargetsOf(trimmed)); d != "" || len(route.TargetsOf(full)) != 1 {
		t.Errorf("targets of the whole and the trimmed ElastiService differ (-whole +trimmed):\n%s", d)
	}
	if !route.OperatorSaysFallback(trimmed) {
		t.Error("the trimmed ElastiService lost its FallbackActive condition")
	}
	if d := cmp.Diff(full.Status.WakeProgress, trimmed.Status.WakeProgress); d != "" {
		t.Errorf("wake progress (-whole +trimmed):\n%s", d)
	}
	if key, err := cache.MetaNamespaceKeyFunc(trimmed); err != nil || key != "ns/web" || trimmed.ResourceVersion != "42" {
		t.Errorf("the informer's key %q (%v) and resourceVersion %q", key, err, trimmed.ResourceVersion)
	}
	if trimmed.Annotations != nil || trimmed.Labels != nil || trimmed.Finalizers != nil || trimmed.ManagedFields != nil ||
		trimmed.Spec.Triggers != nil || trimmed.Spec.ScaleTargetRef.Name != "" || len(trimmed.Status.Conditions) != 1 || trimmed.Status.Conditions[0].Message != "" {
		t.Errorf("kept what the resolver does not read: %+v", trimmed)
	}

	// A tombstone passes through.
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/web", Obj: full}
	if got, err := trimElastiService(tomb); err != nil || got != any(tomb) {
		t.Errorf("tombstone: %v, %v", got, err)
	}
}
