package cli

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/testenv/estest"
)

// testNow is Monday 2 March 2026, 12:00 UTC.
var testNow = time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)

func timeAgo(d time.Duration) *metav1.Time {
	t := metav1.NewTime(testNow.Add(-d))
	return &t
}

func cond(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: *timeAgo(time.Hour)}
}

// testES is an ElastiService created a day ago, serving, past its cooldown,
// with one idle prometheus trigger. Edits adjust it.
func testES(edits ...estest.Option) *elastiv1alpha1.ElastiService {
	es := estest.New("demo", "httpbin",
		estest.Created(timeAgo(24*time.Hour).Time, 1),
		estest.Prometheus("http://prometheus.monitoring:9090", `sum(rate(http_requests_total{service="httpbin"}[1m])) or vector(0)`, "0.1"))
	es.Status = elastiv1alpha1.ElastiServiceStatus{
		Mode:               elastiv1alpha1.ModeServe,
		ObservedGeneration: 1,
		LastScaledUpTime:   timeAgo(3 * time.Hour),
		Conditions: []metav1.Condition{
			cond(elastiv1alpha1.ConditionReady, metav1.ConditionTrue, contract.ReasonServing, "the Service routes straight to the target"),
			cond(elastiv1alpha1.ConditionActive, metav1.ConditionTrue, contract.ReasonServing, "the target has replicas"),
			cond(elastiv1alpha1.ConditionIdle, metav1.ConditionTrue, "AllTriggersIdle", "all 1 triggers report idle"),
			cond(elastiv1alpha1.ConditionTriggersHealthy, metav1.ConditionTrue, "Evaluated", "every trigger was evaluated"),
			cond(elastiv1alpha1.ConditionProxyReady, metav1.ConditionTrue, "ResolversAvailable", "ready resolvers can take the Service's traffic when the target sleeps"),
		},
		ProxyPorts: []elastiv1alpha1.ProxyPort{{Name: "http", Port: 80, Protocol: "TCP", ResolverPort: 20013}},
	}
	for _, e := range edits {
		e(es)
	}
	return es
}

func setCond(c metav1.Condition) func(*elastiv1alpha1.ElastiService) {
	return func(es *elastiv1alpha1.ElastiService) {
		for i := range es.Status.Conditions {
			if es.Status.Conditions[i].Type == c.Type {
				es.Status.Conditions[i] = c
				return
			}
		}
		es.Status.Conditions = append(es.Status.Conditions, c)
	}
}

func asleep(d time.Duration) func(*elastiv1alpha1.ElastiService) {
	return func(es *elastiv1alpha1.ElastiService) {
		es.Status.Mode = elastiv1alpha1.ModeProxy
		es.Status.LastScaledDownTime = timeAgo(d)
		setCond(cond(elastiv1alpha1.ConditionActive, metav1.ConditionFalse, contract.ReasonScaledToZero, "the target is at zero replicas"))(es)
	}
}
