//go:build integration

package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/controller/plan"
	"elasti.dev/elasti/internal/scaling"
	"elasti.dev/elasti/internal/scaling/scalingtest"
)

// TestPrometheusTriggers runs the real Prometheus binary against a loopback
// exporter: an active trigger keeps the target up, an idle one puts it to
// sleep, and triggers that cannot be evaluated never do.
func TestPrometheusTriggers(t *testing.T) {
	exp, prom := scalingtest.StartForTest(t, 5)

	op := startOperator(t, operatorOptions{triggers: &scaling.Evaluator{Secrets: k8s, DefaultServerAddress: prom.URL}})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	trigger := func(query, threshold string) func(*elastiv1alpha1.ElastiService) {
		return func(es *elastiv1alpha1.ElastiService) {
			es.Spec.Triggers = []elastiv1alpha1.ScaleTrigger{{Type: elastiv1alpha1.TriggerTypePrometheus, Metadata: elastiv1alpha1.TriggerMetadata{
				Query: query, Threshold: ptr.To(elastiv1alpha1.Threshold(threshold)),
			}}}
		}
	}
	for _, name := range []string{"busy", "empty", "broken", "down"} {
		createDeployment(t, op.ns, name, 1)
		createService(t, op.ns, name)
	}
	createES(t, op.ns, "busy", "busy", "busy", trigger("elasti_test_value", "1"))
	createES(t, op.ns, "empty", "empty", "empty", trigger("elasti_metric_that_does_not_exist", "1"))
	createES(t, op.ns, "broken", "broken", "broken", trigger("sum(", "1"))
	createES(t, op.ns, "down", "down", "down", func(es *elastiv1alpha1.ElastiService) {
		trigger("elasti_test_value", "1")(es)
		es.Spec.Triggers[0].Metadata.ServerAddress = "http://127.0.0.1:1"
	})

	eventually(t, wait, "busy is active", wantCondition(op.ns, "busy", elastiv1alpha1.ConditionIdle, metav1.ConditionFalse, plan.ReasonTriggerActive))
	for name, reason := range map[string]string{
		"empty":  scaling.ReasonEmptyResult,
		"broken": scaling.ReasonQueryFailed,
		"down":   scaling.ReasonPrometheusUnreachable,
	} {
		eventually(t, wait, name+" is unhealthy", wantCondition(op.ns, name, elastiv1alpha1.ConditionTriggersHealthy, metav1.ConditionFalse, reason))
	}
	eventually(t, wait, "TriggerUnhealthy event", func() error {
		list := &eventsv1.EventList{}
		if err := k8s.List(context.Background(), list, client.InNamespace(op.ns)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Reason == EventTriggerUnhealthy && e.Regarding.Name == "empty" {
				return nil
			}
		}
		return fmt.Errorf("no %s event among %d", EventTriggerUnhealthy, len(list.Items))
	})

	// The value drops below the threshold: busy sleeps, the unhealthy ones
	// stay up.
	exp.Set(0)
	eventually(t, wait, "busy asleep", wantReplicas(op.ns, "busy", 0))
	for _, name := range []string{"empty", "broken", "down"} {
		if err := wantReplicas(op.ns, name, 1)(); err != nil {
			t.Errorf("unhealthy trigger scaled %s: %v", name, err)
		}
	}

	// A threshold written as a YAML/JSON number, with an uptime filter on
	// Prometheus' own up series.
	createDeployment(t, op.ns, "numeric", 1)
	createService(t, op.ns, "numeric")
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": elastiv1alpha1.GroupVersion.String(), "kind": "ElastiService",
		"metadata": map[string]any{"name": "numeric", "namespace": op.ns},
		"spec": map[string]any{
			"service": "numeric", "cooldownPeriod": int64(3),
			"scaleTargetRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "numeric"},
			"triggers": []any{map[string]any{"type": "prometheus", "metadata": map[string]any{
				"query": "sum(elasti_test_value) or vector(0)", "threshold": 0.5, "uptimeFilter": `job="prometheus"`,
			}}},
		},
	}}
	mustCreate(t, u)
	eventually(t, wait, "numeric threshold idle", wantReplicas(op.ns, "numeric", 0))
	never(t, 2*time.Second, "unhealthy targets stay up", func() error {
		for _, name := range []string{"empty", "broken", "down"} {
			if err := wantReplicas(op.ns, name, 1)(); err != nil {
				return err
			}
		}
		return nil
	})
}
