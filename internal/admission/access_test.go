package admission

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/testenv/estest"
)

// TestEffectsOf lists, per field, the permission an ElastiService's author
// must hold; TestAccessReview (envtest) asks the API server for them.
func TestEffectsOf(t *testing.T) {
	served := func(gk schema.GroupKind, _ string) (schema.GroupResource, error) {
		switch gk {
		case schema.GroupKind{Group: "apps", Kind: "StatefulSet"}:
			return schema.GroupResource{Group: "apps", Resource: "statefulsets"}, nil
		case schema.GroupKind{Group: "argoproj.io", Kind: "Rollout"}:
			return schema.GroupResource{Group: "argoproj.io", Resource: "rollouts"}, nil
		}
		return schema.GroupResource{}, errors.New("no matches")
	}
	es := estest.New("ns", "db", estest.Prometheus("http://p:9090", "up", "1"), estest.Prometheus("http://p:9090", "up", "1"), func(es *elastiv1alpha1.ElastiService) {
		es.Spec.ScaleTargetRef = elastiv1alpha1.ScaleTargetRef{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"}
		es.Spec.Autoscaler = &elastiv1alpha1.AutoscalerRef{Type: elastiv1alpha1.AutoscalerKEDA, Name: "db-so"}
		es.Spec.SleepMode = elastiv1alpha1.SleepModeDoze
		es.Spec.Triggers[1].Metadata.BasicAuthSecretRef = &elastiv1alpha1.LocalSecretReference{Name: "basic"}
		es.Spec.Proxy = &elastiv1alpha1.ProxySpec{
			StaticResponses: []elastiv1alpha1.StaticResponse{{}},
			Fallback:        &elastiv1alpha1.Fallback{Service: "other"},
		}
	})
	effects, errs := effectsOf(es, served)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var got []string
	for _, e := range effects {
		got = append(got, e.field.String()+" → "+permission(e.attrs))
	}
	want := []string{
		`spec.scaleTargetRef → update statefulsets.apps/scale "db" in namespace ns`,
		`spec.sleepMode → patch pods/resize in namespace ns`,
		`spec.autoscaler → patch scaledobjects.keda.sh "db-so" in namespace ns`,
		`spec.triggers[1].metadata.basicAuthSecretRef → get secrets "basic" in namespace ns`,
		`spec.proxy.staticResponses → update services "db" in namespace ns`,
		`spec.proxy.fallback → update services "db" in namespace ns`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("effects (-want +got):\n%s", diff)
	}

	es.Spec.ScaleTargetRef = elastiv1alpha1.ScaleTargetRef{APIVersion: "example.com/v1", Kind: "Widget", Name: "db"}
	if _, errs := effectsOf(es, served); len(errs) != 1 || errs[0].Field != "spec.scaleTargetRef" {
		t.Errorf("an unserved kind: %v; want one error on spec.scaleTargetRef", errs)
	}
}
