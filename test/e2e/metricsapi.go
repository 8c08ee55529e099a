package e2e

import (
	"context"
	"encoding/json"
	"fmt"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	externalmetricsv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	"k8s.io/utils/ptr"

	"elasti.dev/elasti/internal/metricsapi"
	"elasti.dev/elasti/test/cluster"
)

// ElastiMetric reads one of Elasti's metrics of ElastiService name in ns as
// the HPA controller does, through the aggregation layer (the APIService
// must be Elasti's: cluster.Config.TakeAPIService).
func ElastiMetric(ctx context.Context, c cluster.Config, ns, name, metric string) (float64, error) {
	path := fmt.Sprintf("/apis/external.metrics.k8s.io/v1beta1/namespaces/%s/%s?labelSelector=%s%%3D%s", ns, metric, metricsapi.SelectorLabel, name)
	out, err := c.Kubectl(ctx, "", "get", "--raw", path)
	if err != nil {
		return 0, err
	}
	var list externalmetricsv1beta1.ExternalMetricValueList
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return 0, err
	}
	if len(list.Items) != 1 {
		return 0, fmt.Errorf("%s: %d values, want 1", metric, len(list.Items))
	}
	return list.Items[0].Value.AsApproximateFloat64(), nil
}

// ZeroHPA is an HPA for Deployment app in ns at minReplicas min (0: the
// HPA may take the last step, or Elasti holds it) on one External metric,
// perReplica of it per replica (an AverageValue target), up to max
// replicas, scaling down after downStable seconds of stable
// recommendations.
func ZeroHPA(ns, app string, min, max int32, metric autoscalingv2.MetricIdentifier, perReplica string, downStable int32) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: ns},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: app},
			MinReplicas:    ptr.To(min),
			MaxReplicas:    max,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.ExternalMetricSourceType,
				External: &autoscalingv2.ExternalMetricSource{
					Metric: metric,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse(perReplica))},
				},
			}},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To(downStable)},
			},
		},
	}
}

// ElastiRate is Elasti's elasti_requests_per_second of ElastiService name,
// as an HPA names it.
func ElastiRate(name string) autoscalingv2.MetricIdentifier {
	return autoscalingv2.MetricIdentifier{
		Name:     metricsapi.MetricRate,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{metricsapi.SelectorLabel: name}},
	}
}
