//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

func TestCRDInstalled(t *testing.T) {
	ctx := context.Background()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := k8s.Get(ctx, types.NamespacedName{Name: "elastiservices.elasti.dev"}, crd); err != nil {
		t.Fatalf("get CRD: %v", err)
	}
	established := false
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			established = true
		}
	}
	if !established {
		t.Fatalf("CRD is not Established: %+v", crd.Status.Conditions)
	}
	var cols []string
	for _, c := range crd.Spec.Versions[0].AdditionalPrinterColumns {
		if c.Priority == 0 {
			cols = append(cols, strings.ToUpper(c.Name))
		}
	}
	if got, want := strings.Join(cols, ","), "SERVICE,TARGET,MODE,READY,AGE"; got != want {
		t.Errorf("printer columns = %s, want %s", got, want)
	}
	if crd.Spec.Versions[0].Subresources == nil || crd.Spec.Versions[0].Subresources.Status == nil {
		t.Error("status subresource is not enabled")
	}
}

const validManifest = `
apiVersion: elasti.dev/v1alpha1
kind: ElastiService
metadata: {name: httpbin, namespace: default}
spec:
  service: httpbin
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: httpbin}
  triggers:
  - type: prometheus
    metadata:
      serverAddress: http://prometheus.monitoring:9090
      query: sum(rate(http_requests_total{service="httpbin"}[1m])) or vector(0)
      threshold: "0.1"
      uptimeFilter: container="prometheus"
  autoscaler: {type: keda, name: httpbin}
  enabledPeriod: {schedule: "0 9 * * 1-5", duration: 8h, timeZone: Europe/Berlin}
  preWarm: {schedule: "55 8 * * 1-5", timeZone: Europe/Berlin}
  proxy: {holdTimeout: 5m, maxHeldRequests: 1000}
`

func TestValidElastiServiceIsAcceptedAndDefaulted(t *testing.T) {
	ctx := context.Background()
	obj := decode(t, validManifest)
	obj.SetName("defaults")
	if err := k8s.Create(ctx, obj); err != nil {
		t.Fatalf("create valid ElastiService: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, obj) })

	got := &elastiv1alpha1.ElastiService{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.Spec.MinTargetReplicas != 1 {
		t.Errorf("minTargetReplicas defaulted to %d, want 1", got.Spec.MinTargetReplicas)
	}
	if got.Spec.CooldownPeriod != 900 {
		t.Errorf("cooldownPeriod defaulted to %d, want 900", got.Spec.CooldownPeriod)
	}
	if th := got.Spec.Triggers[0].Metadata.Threshold; th == nil || *th != "0.1" {
		t.Errorf("threshold = %v, want 0.1", th)
	}
}

// A threshold written as a YAML number must be accepted just like a string.
func TestNumericThresholdIsAccepted(t *testing.T) {
	ctx := context.Background()
	for name, value := range map[string]any{"float": 0.1, "int": int64(2), "string": "1e-3",
		// Just inside the range admission allows, and numbers that round to 0.
		"large": "9.9e307", "large-negative": "-9.9e307", "fraction-exponent": "0.001e310", "float-large": 9.9e307,
		"underflow": "1e-400", "zero-huge-exponent": "0e99999999999999999999"} {
		obj := decode(t, validManifest)
		obj.SetName("threshold-" + strings.ReplaceAll(name, "-", ""))
		triggers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "triggers")
		trig := triggers[0].(map[string]any)
		trig["metadata"].(map[string]any)["threshold"] = value
		if err := unstructured.SetNestedSlice(obj.Object, triggers, "spec", "triggers"); err != nil {
			t.Fatal(err)
		}
		if err := k8s.Create(ctx, obj); err != nil {
			t.Errorf("threshold %v (%s) rejected: %v", value, name, err)
			continue
		}
		got := &elastiv1alpha1.ElastiService{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
			t.Fatalf("get: %v", err)
		}
		f, err := got.Spec.Triggers[0].Metadata.Threshold.Float64()
		if err != nil {
			t.Errorf("threshold %v read back as %q: %v", value, *got.Spec.Triggers[0].Metadata.Threshold, err)
		}
		t.Logf("threshold %v read back as %v", value, f)
		_ = k8s.Delete(ctx, obj)
	}
}

func TestInvalidElastiServicesAreRejected(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		edit func(o map[string]any)
		// wantField and wantText must both appear in the apiserver's message.
		wantField, wantText string
	}{
		{
			name:      "unknown kind for apps/v1",
			edit:      func(o map[string]any) { set(o, "DaemonSet", "spec", "scaleTargetRef", "kind") },
			wantField: "spec.scaleTargetRef", wantText: "not scalable",
		},
		{
			name: "built-in group without scalable kinds",
			edit: func(o map[string]any) {
				set(o, "batch/v1", "spec", "scaleTargetRef", "apiVersion")
				set(o, "Job", "spec", "scaleTargetRef", "kind")
			},
			wantField: "spec.scaleTargetRef", wantText: "built-in group",
		},
		{
			name:      "malformed apiVersion",
			edit:      func(o map[string]any) { set(o, "Apps/V1", "spec", "scaleTargetRef", "apiVersion") },
			wantField: "spec.scaleTargetRef.apiVersion", wantText: `spec.scaleTargetRef.apiVersion must be a version or a group/version: an optional lower-case DNS group and a slash, then v1, v1alpha1 or v1beta1 style, such as apps/v1 or argoproj.io/v1alpha1; got "Apps/V1"`,
		},
		{
			name: "core v1 Pod",
			edit: func(o map[string]any) {
				set(o, "v1", "spec", "scaleTargetRef", "apiVersion")
				set(o, "Pod", "spec", "scaleTargetRef", "kind")
			},
			wantField: "spec.scaleTargetRef", wantText: "no /scale subresource",
		},
		{
			name: "Rollout under the wrong version",
			edit: func(o map[string]any) {
				set(o, "argoproj.io/v1", "spec", "scaleTargetRef", "apiVersion")
				set(o, "Rollout", "spec", "scaleTargetRef", "kind")
			},
			wantField: "spec.scaleTargetRef", wantText: "argoproj.io/v1alpha1",
		},
		{
			name:      "minTargetReplicas 0",
			edit:      func(o map[string]any) { set(o, int64(0), "spec", "minTargetReplicas") },
			wantField: "spec.minTargetReplicas", wantText: "greater than or equal to 1",
		},
		{
			name:      "cooldownPeriod negative",
			edit:      func(o map[string]any) { set(o, int64(-5), "spec", "cooldownPeriod") },
			wantField: "spec.cooldownPeriod", wantText: "greater than or equal to 0",
		},
		{
			name:      "bad enabledPeriod duration",
			edit:      func(o map[string]any) { set(o, "8 hours", "spec", "enabledPeriod", "duration") },
			wantField: "spec.enabledPeriod.duration", wantText: "Go duration",
		},
		{
			name:      "bad enabledPeriod schedule",
			edit:      func(o map[string]any) { set(o, "every monday", "spec", "enabledPeriod", "schedule") },
			wantField: "spec.enabledPeriod.schedule", wantText: "cron expression",
		},
		{
			name:      "bad holdTimeout",
			edit:      func(o map[string]any) { set(o, "forever", "spec", "proxy", "holdTimeout") },
			wantField: "spec.proxy.holdTimeout", wantText: "Go duration",
		},
		{
			name:      "non-numeric threshold",
			edit:      func(o map[string]any) { setThreshold(o, "low") },
			wantField: "spec.triggers[0].metadata.threshold", wantText: `got "low", which is not a number; a threshold is a number (threshold: 0.1) or a numeric string (threshold: "0.1")`,
		},
		{
			name: "non-numeric threshold on a network trigger",
			edit: func(o map[string]any) {
				trigger(o)["type"] = "network"
				trigger(o)["metadata"] = map[string]any{"threshold": "lots"}
			},
			wantField: "spec.triggers[0].metadata.threshold", wantText: `got "lots", which is not a number; a threshold is a number`,
		},
		{
			name: "out-of-range threshold on a podMetrics trigger",
			edit: func(o map[string]any) {
				trigger(o)["type"] = "podMetrics"
				trigger(o)["metadata"] = map[string]any{"metricName": "http_requests_total", "port": int64(8080), "threshold": "1e400"}
			},
			wantField: "spec.triggers[0].metadata.threshold", wantText: `got "1e400", which is out of range`,
		},
		{
			name:      "missing threshold",
			edit:      func(o map[string]any) { setThreshold(o, nil) },
			wantField: "spec.triggers[0].metadata.threshold", wantText: "spec.triggers[0].metadata.threshold: missing, and a prometheus trigger needs one; a threshold is a number",
		},
		{
			name:      "unknown trigger type",
			edit:      func(o map[string]any) { trigger(o)["type"] = "cpu" },
			wantField: "spec.triggers[0].type", wantText: `supported values: "prometheus", "podMetrics", "network"`,
		},
		{
			name:      "prometheus trigger without query",
			edit:      func(o map[string]any) { delete(trigger(o)["metadata"].(map[string]any), "query") },
			wantField: "spec.triggers[0].metadata.query", wantText: "metadata.query is required for a prometheus trigger: a PromQL expression that returns one sample, such as sum(rate(http_requests_total[1m])) or vector(0)",
		},
		{
			name:      "serverAddress not a URL",
			edit:      func(o map[string]any) { trigger(o)["metadata"].(map[string]any)["serverAddress"] = "prometheus:9090" },
			wantField: "spec.triggers[0].metadata.serverAddress", wantText: "http:// or https:// URL",
		},
		{
			name:      "missing service",
			edit:      func(o map[string]any) { unstructured.RemoveNestedField(o, "spec", "service") },
			wantField: "spec.service", wantText: "Required value",
		},
		{
			name:      "service not a DNS label",
			edit:      func(o map[string]any) { set(o, "My_Service", "spec", "service") },
			wantField: "spec.service", wantText: "name of a Service",
		},
		{
			name:      "missing scaleTargetRef",
			edit:      func(o map[string]any) { unstructured.RemoveNestedField(o, "spec", "scaleTargetRef") },
			wantField: "spec.scaleTargetRef", wantText: "Required value",
		},
		{
			name:      "unknown autoscaler type",
			edit:      func(o map[string]any) { set(o, "vpa", "spec", "autoscaler", "type") },
			wantField: "spec.autoscaler.type", wantText: `supported values: "hpa", "keda"`,
		},
		{
			name:      "holdTimeout zero",
			edit:      func(o map[string]any) { set(o, "0s", "spec", "proxy", "holdTimeout") },
			wantField: "spec.proxy.holdTimeout", wantText: `spec.proxy.holdTimeout must be positive, such as 30s or 5m; got "0s", which is not above zero`,
		},
		{
			name:      "holdTimeout negative",
			edit:      func(o map[string]any) { set(o, "-5m", "spec", "proxy", "holdTimeout") },
			wantField: "spec.proxy.holdTimeout", wantText: `spec.proxy.holdTimeout must be positive, such as 30s or 5m; got "-5m", which is not above zero`,
		},
		{
			name:      "holdTimeout without a unit",
			edit:      func(o map[string]any) { set(o, "300", "spec", "proxy", "holdTimeout") },
			wantField: "spec.proxy.holdTimeout", wantText: `spec.proxy.holdTimeout must be a Go duration, numbers each followed by a unit (ns, us, ms, s, m, h), such as 30s, 5m or 1h30m; got "300"`,
		},
		{
			name:      "enabledPeriod duration zero",
			edit:      func(o map[string]any) { set(o, "0s", "spec", "enabledPeriod", "duration") },
			wantField: "spec.enabledPeriod.duration", wantText: `spec.enabledPeriod.duration must be positive, such as 8h, 90m or 1h30m; got "0s", which is not above zero`,
		},
		{
			name:      "enabledPeriod duration bare zero",
			edit:      func(o map[string]any) { set(o, "0", "spec", "enabledPeriod", "duration") },
			wantField: "spec.enabledPeriod.duration", wantText: `must be positive`,
		},
		{
			name:      "threshold out of range",
			edit:      func(o map[string]any) { setThreshold(o, "1e309") },
			wantField: "spec.triggers[0].metadata.threshold", wantText: `spec.triggers[0].metadata.threshold: got "1e309", which is out of range; write a number between -1e308 and 1e308, such as 0.1`,
		},
		{
			name:      "kind not a kind",
			edit:      func(o map[string]any) { set(o, "deployment", "spec", "scaleTargetRef", "kind") },
			wantField: "spec.scaleTargetRef.kind", wantText: `spec.scaleTargetRef.kind must be a Kubernetes kind: a capital letter followed by letters and digits, such as Deployment; got "deployment"`,
		},
		{
			name:      "enabledPeriod timeZone not a zone name",
			edit:      func(o map[string]any) { set(o, "Berlin time", "spec", "enabledPeriod", "timeZone") },
			wantField: "spec.enabledPeriod.timeZone", wantText: `spec.enabledPeriod.timeZone must be an IANA time zone name, area/location such as Europe/Berlin or America/New_York, or UTC; got "Berlin time"`,
		},
		{
			name:      "enabledPeriod timeZone Local",
			edit:      func(o map[string]any) { set(o, "Local", "spec", "enabledPeriod", "timeZone") },
			wantField: "spec.enabledPeriod.timeZone", wantText: `got "Local"`,
		},
		{
			name: "preWarm schedule not a cron expression",
			edit: func(o map[string]any) {
				set(o, "weekdays at 8:55", "spec", "preWarm", "schedule")
			},
			wantField: "spec.preWarm.schedule", wantText: `spec.preWarm.schedule must be a five-field cron expression (minute hour day-of-month month day-of-week) such as "55 8 * * 1-5", or a descriptor such as @daily; got "weekdays at 8:55"`,
		},
		{
			name: "preWarm timeZone a path",
			edit: func(o map[string]any) {
				set(o, "55 8 * * 1-5", "spec", "preWarm", "schedule")
				set(o, "../../etc/passwd", "spec", "preWarm", "timeZone")
			},
			wantField: "spec.preWarm.timeZone", wantText: `spec.preWarm.timeZone must be an IANA time zone name`,
		},
		{
			name:      "preWarm without a schedule",
			edit:      func(o map[string]any) { unstructured.RemoveNestedField(o, "spec", "preWarm", "schedule") },
			wantField: "spec.preWarm.schedule", wantText: "Required value",
		},
		{
			name:      "maxHeldRequests 0",
			edit:      func(o map[string]any) { set(o, int64(0), "spec", "proxy", "maxHeldRequests") },
			wantField: "spec.proxy.maxHeldRequests", wantText: "greater than or equal to 1",
		},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := decode(t, validManifest)
			obj.SetName(fmt.Sprintf("invalid-%d", i))
			tc.edit(obj.Object)
			msg := expectRejected(t, ctx, obj, tc.wantField, tc.wantText)
			t.Logf("rejected: %s", msg)
		})
	}
}

// The status subresource keeps spec writers from touching status and the
// reverse, and status.mode only takes its two values.
func TestStatusSubresource(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	obj := decode(t, validManifest)
	obj.SetName("status")
	if err := k8s.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, obj) })
	es := &elastiv1alpha1.ElastiService{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), es); err != nil {
		t.Fatal(err)
	}
	es.Status.Mode = elastiv1alpha1.ModeProxy
	es.Status.ProxyPorts = []elastiv1alpha1.ProxyPort{{Name: "http", Port: 8080, ResolverPort: 20013}}
	if err := k8s.Status().Update(ctx, es); err != nil {
		t.Fatalf("status update: %v", err)
	}
	es.Status.Mode = "sideways"
	if err := k8s.Status().Update(ctx, es); err == nil || !strings.Contains(err.Error(), "status.mode") {
		t.Fatalf("status.mode=sideways: want a rejection naming status.mode, got %v", err)
	}
}

func decode(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &obj.Object); err != nil {
		t.Fatalf("decode manifest: %v", err)
	}
	return obj
}

func set(o map[string]any, v any, path ...string) {
	if err := unstructured.SetNestedField(o, v, path...); err != nil {
		panic(err)
	}
}

func trigger(o map[string]any) map[string]any {
	return o["spec"].(map[string]any)["triggers"].([]any)[0].(map[string]any)
}

func setThreshold(o map[string]any, v any) {
	md := trigger(o)["metadata"].(map[string]any)
	if v == nil {
		delete(md, "threshold")
		return
	}
	md["threshold"] = v
}

// A malformed apiVersion gets the apiVersion format message alone: the rules
// about scalable kinds, which read apiVersion, stand aside. The same for a
// malformed kind.
func TestMalformedReferenceGetsOneError(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, field, apiVersion, kind, want string
	}{
		{"apiversion", "spec.scaleTargetRef.apiVersion", "apps/v1/x", "Deployment",
			`spec.scaleTargetRef.apiVersion must be a version or a group/version: an optional lower-case DNS group and a slash, then v1, v1alpha1 or v1beta1 style, such as apps/v1 or argoproj.io/v1alpha1; got "apps/v1/x"`},
		{"kind", "spec.scaleTargetRef.kind", "apps/v1", "deploy-ment",
			`spec.scaleTargetRef.kind must be a Kubernetes kind: a capital letter followed by letters and digits, such as Deployment; got "deploy-ment"`},
		{"core-kind", "spec.scaleTargetRef.kind", "v1", "pod",
			`spec.scaleTargetRef.kind must be a Kubernetes kind: a capital letter followed by letters and digits, such as Deployment; got "pod"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := decode(t, validManifest)
			obj.SetName("malformed-" + tc.name)
			set(obj.Object, tc.apiVersion, "spec", "scaleTargetRef", "apiVersion")
			set(obj.Object, tc.kind, "spec", "scaleTargetRef", "kind")
			err := k8s.Create(ctx, obj)
			if err == nil {
				_ = k8s.Delete(ctx, obj)
				t.Fatal("accepted")
			}
			var status apierrors.APIStatus
			if !errors.As(err, &status) || status.Status().Details == nil {
				t.Fatalf("want a status with causes, got %v", err)
			}
			causes := status.Status().Details.Causes
			if len(causes) != 1 {
				t.Fatalf("want exactly one error, got %d: %v", len(causes), err)
			}
			if causes[0].Field != tc.field || !strings.Contains(causes[0].Message, tc.want) {
				t.Errorf("got %s: %s\nwant %s: %s", causes[0].Field, causes[0].Message, tc.field, tc.want)
			}
		})
	}
}

// Thresholds beyond float64's range are refused at admission, however they
// are written. kubectl turns a YAML number too large for a float64 into a
// string (sigs.k8s.io/yaml does so), so that the admission policy sees
// "1e309". A JSON number that large never reaches admission: the API
// server cannot decode it.
func TestThresholdBeyondFloat64IsRefused(t *testing.T) {
	ctx := context.Background()
	yamlManifest := func(threshold string) string {
		return strings.Replace(validManifest, `threshold: "0.1"`, "threshold: "+threshold, 1)
	}
	for _, tc := range []struct{ name, manifest, got string }{
		{"string", yamlManifest(`"1e309"`), `"1e309"`},
		{"negative-string", yamlManifest(`"-1e309"`), `"-1e309"`},
		{"yaml-number", yamlManifest(`1e309`), `"1e309"`},
		{"negative-yaml-number", yamlManifest(`-1e309`), `"-1e309"`},
		{"order-308", yamlManifest(`"100e306"`), `"100e306"`},
		{"long-exponent", yamlManifest(`"1e00000000000000000000000000309"`), `"1e00000000000000000000000000309"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := decode(t, tc.manifest)
			obj.SetName("range-" + tc.name)
			expectRejected(t, ctx, obj, "spec.triggers[0].metadata.threshold: got "+tc.got+", which is out of range; write a number between -1e308 and 1e308, such as 0.1")
		})
	}

	t.Run("json-number", func(t *testing.T) {
		obj := decode(t, validManifest)
		obj.SetName("range-json-number")
		body, err := json.Marshal(obj.Object)
		if err != nil {
			t.Fatal(err)
		}
		body = []byte(strings.Replace(string(body), `"threshold":"0.1"`, `"threshold":1e309`, 1))
		if !strings.Contains(string(body), `1e309`) {
			t.Fatalf("threshold not replaced in %s", body)
		}
		cs, err := kubernetes.NewForConfig(restConfig)
		if err != nil {
			t.Fatal(err)
		}
		res := cs.Discovery().RESTClient().Post().AbsPath("/apis/elasti.dev/v1alpha1/namespaces/default/elastiservices").
			SetHeader("Content-Type", "application/json").Body(body).Do(ctx)
		var code int
		res.StatusCode(&code)
		if res.Error() == nil || code < http.StatusBadRequest || code >= http.StatusInternalServerError {
			t.Fatalf("a JSON number 1e309: got HTTP %d, %v; want a 4xx refusal", code, res.Error())
		}
		t.Logf("refused before admission: HTTP %d: %v", code, res.Error())
	})
}

// Durations in Go's spellings are accepted when they are positive (and, for
// holdTimeout, at most 1h).
func TestValidDurationsAreAccepted(t *testing.T) {
	ctx := context.Background()
	for i, tc := range []struct{ hold, window string }{
		{"45m30s", "8h"}, {"0.75h", "90m"}, {"500ms", "1h0m0s"}, {"+5m", ".5h"}, {"100000s", "1h"},
		{"2µs", "1h"}, {"2μs", "1h"}, {"1000000000ns", "24h"},
	} {
		obj := decode(t, validManifest)
		obj.SetName(fmt.Sprintf("duration-%d", i))
		set(obj.Object, tc.hold, "spec", "proxy", "holdTimeout")
		set(obj.Object, tc.window, "spec", "enabledPeriod", "duration")
		if err := k8s.Create(ctx, obj); err != nil {
			t.Errorf("holdTimeout %q, duration %q refused: %v", tc.hold, tc.window, err)
			continue
		}
		_ = k8s.Delete(ctx, obj)
	}
}
