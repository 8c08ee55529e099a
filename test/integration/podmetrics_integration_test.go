//go:build integration

package integration

import (
	"context"
	"fmt"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

const podMetricsManifest = `
apiVersion: elasti.dev/v1alpha1
kind: ElastiService
metadata: {name: pm, namespace: default}
spec:
  service: web
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  triggers:
  - type: podMetrics
    metadata:
      metricName: http_requests_total
      labels: {code: "200", handler: /api}
      port: 8080
      path: /metrics
      threshold: 0.01
`

func TestPodMetricsTriggerIsAccepted(t *testing.T) {
	ctx := context.Background()
	obj := decode(t, podMetricsManifest)
	if err := k8s.Create(ctx, obj); err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, obj) })
	got := &elastiv1alpha1.ElastiService{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
		t.Fatal(err)
	}
	md := got.Spec.Triggers[0].Metadata
	if got.Spec.Triggers[0].Type != elastiv1alpha1.TriggerTypePodMetrics || md.MetricName != "http_requests_total" || md.Port != 8080 ||
		md.Path != "/metrics" || md.Labels["handler"] != "/api" || md.Threshold == nil || *md.Threshold != "0.01" {
		t.Errorf("stored trigger: %+v", got.Spec.Triggers[0])
	}

	// The bare minimum: path and labels are optional.
	min := decode(t, podMetricsManifest)
	min.SetName("pm-min")
	delete(trigger(min.Object)["metadata"].(map[string]any), "path")
	delete(trigger(min.Object)["metadata"].(map[string]any), "labels")
	if err := k8s.Create(ctx, min); err != nil {
		t.Fatalf("create without path and labels: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, min) })
}

const networkManifest = `
apiVersion: elasti.dev/v1alpha1
kind: ElastiService
metadata: {name: net, namespace: default}
spec:
  service: web
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  triggers:
  - type: network
    metadata:
      threshold: 64
`

// A network trigger takes a threshold or nothing: the operator's
// --network-threshold applies then.
func TestNetworkTriggerIsAccepted(t *testing.T) {
	ctx := context.Background()
	obj := decode(t, networkManifest)
	if err := k8s.Create(ctx, obj); err != nil {
		t.Fatalf("create: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, obj) })
	got := &elastiv1alpha1.ElastiService{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
		t.Fatal(err)
	}
	if tr := got.Spec.Triggers[0]; tr.Type != elastiv1alpha1.TriggerTypeNetwork || tr.Metadata.Threshold == nil || *tr.Metadata.Threshold != "64" {
		t.Errorf("stored trigger: %+v", tr)
	}

	bare := decode(t, networkManifest)
	bare.SetName("net-bare")
	delete(trigger(bare.Object), "metadata")
	if err := k8s.Create(ctx, bare); err != nil {
		t.Fatalf("create without metadata: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, bare) })
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(bare), got); err != nil {
		t.Fatal(err)
	}
	if tr := got.Spec.Triggers[0]; tr.Type != elastiv1alpha1.TriggerTypeNetwork || tr.Metadata.Threshold != nil {
		t.Errorf("stored trigger without metadata: %+v", tr)
	}
}

func TestInvalidTriggerMetadataIsRejected(t *testing.T) {
	ctx := context.Background()
	md := func(o map[string]any) map[string]any { return trigger(o)["metadata"].(map[string]any) }
	manyLabels := map[string]any{}
	for i := 0; i < 17; i++ {
		manyLabels[fmt.Sprintf("l%d", i)] = "v"
	}
	type rejection struct {
		name     string
		manifest string
		edit     func(o map[string]any)
		// wantField and wantText must both appear in the apiserver's message.
		wantField, wantText string
	}
	networkWith := func(key string, value any) rejection {
		return rejection{
			name: "network with " + key, manifest: networkManifest,
			edit: func(o map[string]any) { md(o)[key] = value },
			// The colon: the error is at metadata, not at metadata.<key>.
			wantField: "spec.triggers[0].metadata: ", wantText: "a network trigger takes only metadata.threshold",
		}
	}
	cases := []rejection{
		{
			name: "podMetrics without metricName", manifest: podMetricsManifest,
			edit:      func(o map[string]any) { delete(md(o), "metricName") },
			wantField: "spec.triggers[0].metadata.metricName", wantText: "metadata.metricName is required for a podMetrics trigger: the name of a counter the target's pods export, such as http_requests_total",
		},
		{
			name: "podMetrics without port", manifest: podMetricsManifest,
			edit:      func(o map[string]any) { delete(md(o), "port") },
			wantField: "spec.triggers[0].metadata.port", wantText: "metadata.port is required for a podMetrics trigger: the container port number the pods serve their metrics on, such as 8080",
		},
		{
			name: "podMetrics with query", manifest: podMetricsManifest,
			edit:      func(o map[string]any) { md(o)["query"] = "sum(rate(http_requests_total[1m]))" },
			wantField: "spec.triggers[0].metadata.query", wantText: "metadata.query is for prometheus triggers only; a podMetrics trigger reads metadata.metricName from the pods' own metrics page: remove query",
		},
		{
			name: "podMetrics with serverAddress", manifest: podMetricsManifest,
			edit:      func(o map[string]any) { md(o)["serverAddress"] = "http://prometheus.monitoring:9090" },
			wantField: "spec.triggers[0].metadata.serverAddress", wantText: "metadata.serverAddress is for prometheus triggers only; a podMetrics trigger scrapes the target's ready pods itself: remove serverAddress",
		},
		{
			name: "podMetrics with uptimeFilter", manifest: podMetricsManifest,
			edit:      func(o map[string]any) { md(o)["uptimeFilter"] = `container="prometheus"` },
			wantField: "spec.triggers[0].metadata.uptimeFilter", wantText: "metadata.uptimeFilter is for prometheus triggers only",
		},
		{
			name: "prometheus with metricName", manifest: validManifest,
			edit:      func(o map[string]any) { md(o)["metricName"] = "http_requests_total" },
			wantField: "spec.triggers[0].metadata.metricName", wantText: "metadata.metricName is for podMetrics triggers only; a prometheus trigger reads its value from metadata.query",
		},
		{
			name: "prometheus with labels", manifest: validManifest,
			edit:      func(o map[string]any) { md(o)["labels"] = map[string]any{"code": "200"} },
			wantField: "spec.triggers[0].metadata.labels", wantText: "metadata.labels is for podMetrics triggers only",
		},
		{
			name: "prometheus with port", manifest: validManifest,
			edit:      func(o map[string]any) { md(o)["port"] = int64(8080) },
			wantField: "spec.triggers[0].metadata.port", wantText: "metadata.port is for podMetrics triggers only",
		},
		{
			name: "prometheus with path", manifest: validManifest,
			edit:      func(o map[string]any) { md(o)["path"] = "/metrics" },
			wantField: "spec.triggers[0].metadata.path", wantText: "metadata.path is for podMetrics triggers only",
		},
		// A network trigger refuses every key but threshold, with one rule
		// at metadata; each value below is valid for the trigger type that
		// takes it, so that only that rule refuses it.
		networkWith("query", "sum(rate(http_requests_total[1m]))"),
		networkWith("serverAddress", "http://prometheus.monitoring:9090"),
		networkWith("uptimeFilter", `container="prometheus"`),
		networkWith("headers", map[string]any{"X-Scope-OrgID": "a"}),
		networkWith("authSecretRef", map[string]any{"name": "prometheus-token", "key": "token"}),
		networkWith("basicAuthSecretRef", map[string]any{"name": "prometheus-basic"}),
		networkWith("metricName", "http_requests_total"),
		networkWith("labels", map[string]any{"code": "200"}),
		networkWith("port", int64(8080)),
		networkWith("path", "/metrics"),
		{
			name: "metricName not a metric name", manifest: podMetricsManifest,
			edit:      func(o map[string]any) { md(o)["metricName"] = "http-requests" },
			wantField: "spec.triggers[0].metadata.metricName", wantText: `metadata.metricName must be a Prometheus metric name: letters, digits, _ and :, not starting with a digit, such as http_requests_total; got "http-requests"`,
		},
		{
			name: "path without a leading slash", manifest: podMetricsManifest,
			edit:      func(o map[string]any) { md(o)["path"] = "metrics" },
			wantField: "spec.triggers[0].metadata.path", wantText: `metadata.path must be an HTTP path starting with / and without spaces or #, such as /metrics; got "metrics"`,
		},
		{
			name: "label key not a label name", manifest: podMetricsManifest,
			edit:      func(o map[string]any) { md(o)["labels"] = map[string]any{"status-code": "200"} },
			wantField: "spec.triggers[0].metadata.labels", wantText: "metadata.labels keys must be Prometheus label names",
		},
		{
			name: "too many labels", manifest: podMetricsManifest,
			edit:      func(o map[string]any) { md(o)["labels"] = manyLabels },
			wantField: "spec.triggers[0].metadata.labels", wantText: "must have at most 16 items",
		},
		{
			name: "port 0", manifest: podMetricsManifest,
			edit:      func(o map[string]any) { md(o)["port"] = int64(0) },
			wantField: "spec.triggers[0].metadata.port", wantText: "should be greater than or equal to 1",
		},
		{
			name: "port above 65535", manifest: podMetricsManifest,
			edit:      func(o map[string]any) { md(o)["port"] = int64(65536) },
			wantField: "spec.triggers[0].metadata.port", wantText: "should be less than or equal to 65535",
		},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := decode(t, tc.manifest)
			obj.SetName(fmt.Sprintf("invalid-pm-%d", i))
			tc.edit(obj.Object)
			msg := expectRejected(t, ctx, obj, tc.wantField, tc.wantText)
			t.Logf("rejected: %s", msg)
		})
	}
}
