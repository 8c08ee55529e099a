package cli

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/testenv/estest"
)

func TestScaleDownVerdict(t *testing.T) {
	cases := []struct {
		name string
		es   *elastiv1alpha1.ElastiService
		want string
	}{
		{
			name: "idle and nothing holds it",
			es:   testES(),
			want: "yes: every trigger is idle; the operator scales the target to zero at its next evaluation",
		},
		{
			name: "asleep",
			es:   testES(asleep(2 * time.Hour)),
			want: "asleep: scaled to zero 120m ago; the first request, or `kubectl elasti wake httpbin`, wakes it",
		},
		{
			name: "dozing",
			es: testES(asleep(2*time.Hour),
				setCond(cond(elastiv1alpha1.ConditionActive, metav1.ConditionFalse, contract.ReasonDozing, ""))),
			want: "asleep: dozing for 120m, its pods kept with their requests lowered to spec.doze; the first request through a resolver, a trigger that sees traffic reach the pods, or `kubectl elasti wake httpbin`, wakes it",
		},
		{
			name: "grace period running",
			es: testES(func(es *elastiv1alpha1.ElastiService) { es.Status.Mode = elastiv1alpha1.ModeProxy },
				setCond(cond(elastiv1alpha1.ConditionActive, metav1.ConditionTrue, contract.ReasonScalingDown, ""))),
			want: "scaling down now: every trigger is idle; the target goes to zero when the grace period ends",
		},
		{
			name: "waking",
			es: testES(asleep(time.Hour),
				setCond(cond(elastiv1alpha1.ConditionActive, metav1.ConditionTrue, contract.ReasonWaking, ""))),
			want: "waking: the target has replicas but no ready endpoint yet; the resolvers hold its traffic",
		},
		{
			name: "asleep with a wake pending",
			es:   testES(asleep(time.Hour), estest.Annotation(contract.AnnotationWakeNow, "x")),
			want: "waking: a wake was requested (elasti.dev/wake-now) and the operator is acting on it",
		},
		{
			name: "asleep with keep-awake",
			es:   testES(asleep(time.Hour), estest.Annotation(contract.AnnotationKeepAwake, "true")),
			want: "waking: elasti.dev/keep-awake=true makes the operator wake the target",
		},
		{
			name: "never reconciled",
			es: testES(func(es *elastiv1alpha1.ElastiService) {
				es.Status = elastiv1alpha1.ElastiServiceStatus{}
			}),
			want: "unknown: the operator has not reconciled this ElastiService yet",
		},
		{
			name: "serving with a wake pending",
			es:   testES(estest.Annotation(contract.AnnotationWakeNow, "x")),
			want: "no: a wake request (elasti.dev/wake-now) is waiting for the operator",
		},
		{
			name: "no triggers",
			es:   testES(func(es *elastiv1alpha1.ElastiService) { es.Spec.Triggers = nil }),
			want: "no: it has no triggers, so it never sleeps on its own",
		},
		{
			name: "keep-awake",
			es:   testES(estest.Annotation(contract.AnnotationKeepAwake, "true")),
			want: "no: elasti.dev/keep-awake=true pins it awake; `kubectl elasti allow-sleep httpbin` lifts it",
		},
		{
			name: "keep-awake with another value is ignored",
			es:   testES(estest.Annotation(contract.AnnotationKeepAwake, "yes")),
			want: "yes: every trigger is idle; the operator scales the target to zero at its next evaluation",
		},
		{
			name: "not ready",
			es:   testES(setCond(cond(elastiv1alpha1.ConditionReady, metav1.ConditionFalse, "ServiceNotFound", "Service demo/httpbin does not exist"))),
			want: "no: Ready=False (ServiceNotFound): Service demo/httpbin does not exist",
		},
		{
			name: "Ready=False before the cooldown",
			es: testES(func(es *elastiv1alpha1.ElastiService) { es.Status.LastScaledUpTime = timeAgo(3 * time.Minute) },
				setCond(cond(elastiv1alpha1.ConditionReady, metav1.ConditionFalse, "ServiceNotFound", "Service demo/httpbin does not exist"))),
			want: "no: Ready=False (ServiceNotFound): Service demo/httpbin does not exist",
		},
		{
			name: "keep-awake before Ready=False",
			es: testES(estest.Annotation(contract.AnnotationKeepAwake, "true"),
				setCond(cond(elastiv1alpha1.ConditionReady, metav1.ConditionFalse, "ServiceNotFound", "Service demo/httpbin does not exist"))),
			want: "no: elasti.dev/keep-awake=true pins it awake; `kubectl elasti allow-sleep httpbin` lifts it",
		},
		{
			name: "cooldown from the last wake",
			es:   testES(func(es *elastiv1alpha1.ElastiService) { es.Status.LastScaledUpTime = timeAgo(3 * time.Minute) }),
			want: "no: in cooldown for another 12m (cooldownPeriod 900s, counted from the last wake 3m ago)",
		},
		{
			name: "cooldown from creation",
			es: testES(func(es *elastiv1alpha1.ElastiService) {
				es.CreationTimestamp = *timeAgo(5 * time.Minute)
				es.Status.LastScaledUpTime = nil
			}),
			want: "no: in cooldown for another 10m (cooldownPeriod 900s, counted from creation 5m ago)",
		},
		{
			name: "inside the enabled period",
			es: testES(func(es *elastiv1alpha1.ElastiService) {
				es.Spec.EnabledPeriod = &elastiv1alpha1.EnabledPeriod{Schedule: "0 9 * * 1-5", Duration: "8h"}
			}),
			want: "yes: every trigger is idle; the operator scales the target to zero at its next evaluation",
		},
		{
			name: "outside the enabled period",
			es: testES(func(es *elastiv1alpha1.ElastiService) {
				es.Spec.EnabledPeriod = &elastiv1alpha1.EnabledPeriod{Schedule: "0 14 * * *", Duration: "1h"}
			}),
			want: `no: outside the enabledPeriod ("0 14 * * *" for 1h, UTC); the next window opens in 120m`,
		},
		{
			name: "invalid enabled period",
			es: testES(func(es *elastiv1alpha1.ElastiService) {
				es.Spec.EnabledPeriod = &elastiv1alpha1.EnabledPeriod{Schedule: "0 14 * * *", Duration: "soon"}
			}),
			want: `no: the enabledPeriod is invalid: parse enabledPeriod.duration "soon": time: invalid duration "soon"`,
		},
		{
			name: "unhealthy trigger",
			es: testES(
				setCond(cond(elastiv1alpha1.ConditionTriggersHealthy, metav1.ConditionFalse, "PrometheusUnreachable", "trigger 0: dial tcp: connection refused")),
				setCond(cond(elastiv1alpha1.ConditionIdle, metav1.ConditionUnknown, "TriggersUnhealthy", "a trigger cannot be evaluated"))),
			want: "no: a trigger cannot be evaluated (PrometheusUnreachable: trigger 0: dial tcp: connection refused); an unhealthy trigger never causes a scale-down",
		},
		{
			name: "active trigger",
			es:   testES(setCond(cond(elastiv1alpha1.ConditionIdle, metav1.ConditionFalse, "TriggerActive", "trigger 0: 3.2 is not below the threshold 0.1"))),
			want: "no: not idle (TriggerActive): trigger 0: 3.2 is not below the threshold 0.1",
		},
		{
			name: "not evaluated yet",
			es:   testES(setCond(cond(elastiv1alpha1.ConditionIdle, metav1.ConditionUnknown, "NotEvaluated", "the triggers are evaluated once the cooldown is over"))),
			want: "not yet: the triggers are evaluated once the cooldown is over",
		},
		{
			name: "idle but no resolvers",
			es:   testES(setCond(cond(elastiv1alpha1.ConditionProxyReady, metav1.ConditionFalse, "NoReadyResolvers", "no ready resolver pod"))),
			want: "no: the triggers are idle but no resolver could take the traffic (NoReadyResolvers): no ready resolver pod",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := scaleDownVerdict(tc.es, testNow); got != tc.want {
				t.Errorf("scaleDownVerdict:\n got  %s\n want %s", got, tc.want)
			}
			if strings.Contains(tc.want, "\n") {
				t.Error("the verdict must be one line")
			}
		})
	}
}
