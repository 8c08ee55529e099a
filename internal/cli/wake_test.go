package cli

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/testenv/estest"
)

func TestIsAwake(t *testing.T) {
	cases := []struct {
		name string
		es   *elastiv1alpha1.ElastiService
		want bool
	}{
		{name: "serving", es: testES(), want: true},
		{name: "asleep", es: testES(asleep(time.Minute))},
		{
			name: "waking in proxy mode",
			es:   testES(asleep(time.Minute), setCond(cond(elastiv1alpha1.ConditionActive, metav1.ConditionTrue, contract.ReasonWaking, ""))),
		},
		{
			name: "serve mode but target unreadable",
			es:   testES(setCond(cond(elastiv1alpha1.ConditionActive, metav1.ConditionUnknown, "TargetNotFound", ""))),
		},
		{name: "no status", es: testES(func(es *elastiv1alpha1.ElastiService) { es.Status = elastiv1alpha1.ElastiServiceStatus{} })},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := isAwake(tc.es); got != tc.want {
				t.Errorf("isAwake = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestWakeCommandShowsProgress(t *testing.T) {
	cases := []struct {
		name string
		es   *elastiv1alpha1.ElastiService
		want string
	}{
		{
			name: "operator never acted",
			es:   testES(asleep(time.Minute), estest.Annotation(contract.AnnotationWakeNow, "x")),
			want: "the operator has not acted on elasti.dev/wake-now yet; is it running?",
		},
		{
			name: "waking",
			es:   testES(asleep(time.Minute), setCond(cond(elastiv1alpha1.ConditionActive, metav1.ConditionTrue, contract.ReasonWaking, "no ready endpoint yet"))),
			want: "mode proxy, Active=True (Waking): no ready endpoint yet",
		},
		{
			name: "target missing",
			es: testES(
				setCond(cond(elastiv1alpha1.ConditionActive, metav1.ConditionUnknown, "TargetNotFound", "the scale target cannot be read")),
				setCond(cond(elastiv1alpha1.ConditionReady, metav1.ConditionFalse, "TargetNotFound", "deployments.apps \"httpbin\" not found"))),
			want: `mode serve, Active=Unknown (TargetNotFound): the scale target cannot be read; Ready=False (TargetNotFound): deployments.apps "httpbin" not found`,
		},
		{
			name: "no status",
			es:   testES(func(es *elastiv1alpha1.ElastiService) { es.Status = elastiv1alpha1.ElastiServiceStatus{} }),
			want: "mode -: the operator has written no status yet",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := wakeProgress(tc.es); got != tc.want {
				t.Errorf("wakeProgress:\n got  %s\n want %s", got, tc.want)
			}
		})
	}
}
