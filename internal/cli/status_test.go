package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/testenv/estest"
)

func TestTriggerResult(t *testing.T) {
	healthy := cond(elastiv1alpha1.ConditionTriggersHealthy, metav1.ConditionTrue, "Evaluated", "every trigger was evaluated")
	cases := []struct {
		name  string
		conds []metav1.Condition
		index int
		want  string
	}{
		{
			name:  "all idle",
			conds: []metav1.Condition{healthy, cond(elastiv1alpha1.ConditionIdle, metav1.ConditionTrue, "AllTriggersIdle", "all 2 triggers report idle")},
			index: 1,
			want:  "idle: all 2 triggers report idle",
		},
		{
			name:  "this trigger is active",
			conds: []metav1.Condition{healthy, cond(elastiv1alpha1.ConditionIdle, metav1.ConditionFalse, "TriggerActive", "trigger 1: 4 is not below 0.1")},
			index: 1,
			want:  "active: 4 is not below 0.1",
		},
		{
			name:  "another trigger is active",
			conds: []metav1.Condition{healthy, cond(elastiv1alpha1.ConditionIdle, metav1.ConditionFalse, "TriggerActive", "trigger 1: 4 is not below 0.1")},
			index: 0,
			want:  "no result recorded: Idle=False (TriggerActive): trigger 1: 4 is not below 0.1",
		},
		{
			name: "this trigger is unhealthy",
			conds: []metav1.Condition{
				cond(elastiv1alpha1.ConditionTriggersHealthy, metav1.ConditionFalse, "EmptyResult", "trigger 0: the query returned no sample"),
				cond(elastiv1alpha1.ConditionIdle, metav1.ConditionUnknown, "TriggersUnhealthy", "a trigger cannot be evaluated"),
			},
			want: "unhealthy (EmptyResult): the query returned no sample",
		},
		{
			name: "another trigger is unhealthy",
			conds: []metav1.Condition{
				cond(elastiv1alpha1.ConditionTriggersHealthy, metav1.ConditionFalse, "EmptyResult", "trigger 0: the query returned no sample"),
				cond(elastiv1alpha1.ConditionIdle, metav1.ConditionUnknown, "TriggersUnhealthy", "a trigger cannot be evaluated"),
			},
			index: 1,
			want:  "no result recorded: the evaluation stopped at an unhealthy trigger (EmptyResult)",
		},
		{
			name:  "not evaluated",
			conds: []metav1.Condition{cond(elastiv1alpha1.ConditionIdle, metav1.ConditionUnknown, "NotEvaluated", "evaluated once the cooldown is over")},
			want:  "unknown: evaluated once the cooldown is over",
		},
		{name: "no conditions", want: "unknown: not evaluated yet"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := triggerResult(tc.conds, tc.index); got != tc.want {
				t.Errorf("triggerResult:\n got  %s\n want %s", got, tc.want)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	es := testES(estest.Annotation(contract.AnnotationKeepAwake, "true"), estest.Annotation("unrelated.example.com/x", "y"),
		func(es *elastiv1alpha1.ElastiService) {
			es.Spec.Triggers[0].Metadata.UptimeFilter = `container="prometheus"`
			es.Spec.Triggers = append(es.Spec.Triggers, elastiv1alpha1.ScaleTrigger{
				Type:     elastiv1alpha1.TriggerTypePrometheus,
				Metadata: elastiv1alpha1.TriggerMetadata{Query: "vector(0)"},
			})
			es.Spec.EnabledPeriod = &elastiv1alpha1.EnabledPeriod{Schedule: "0 9 * * 1-5", Duration: "8h"}
			es.Spec.Autoscaler = &elastiv1alpha1.AutoscalerRef{Type: elastiv1alpha1.AutoscalerKEDA, Name: "httpbin"}
		})
	var b bytes.Buffer
	if err := describe(&b, es, scaleReading{current: 1, desired: 1}, testNow); err != nil {
		t.Fatal(err)
	}
	want := `Name:            httpbin
Namespace:       demo
Service:         httpbin
Target:          Deployment/httpbin (apps/v1)
Replicas:        1 current, 1 desired, min 1
Mode:            serve
Cooldown:        900s
Enabled period:  "0 9 * * 1-5" for 8h (UTC)
Autoscaler:      keda httpbin
Annotations:     elasti.dev/keep-awake=true
Last wake:       3h ago (2026-03-02T09:00:00Z)
Last sleep:      never
Last reconcile:  never
Scaling down:    no: elasti.dev/keep-awake=true pins it awake; ` + "`kubectl elasti allow-sleep httpbin`" + ` lifts it

Conditions:
  TYPE             STATUS  REASON              AGE  MESSAGE
  Ready            True    Serving             60m  the Service routes straight to the target
  Active           True    Serving             60m  the target has replicas
  Idle             True    AllTriggersIdle     60m  all 1 triggers report idle
  TriggersHealthy  True    Evaluated           60m  every trigger was evaluated
  ProxyReady       True    ResolversAvailable  60m  ready resolvers can take the Service's traffic when the target sleeps

Proxy ports:
  NAME  PORT  PROTOCOL  APP-PROTOCOL  RESOLVER-PORT
  http  80    TCP       -             20013

Ledger:
  none yet: the target has not been at zero

Triggers:
  [0] prometheus
      Query:          sum(rate(http_requests_total{service="httpbin"}[1m])) or vector(0)
      Threshold:      0.1; a value below it is idle
      Server:         http://prometheus.monitoring:9090
      Uptime filter:  container="prometheus"
      Last result:    idle: all 1 triggers report idle
  [1] prometheus
      Query:        vector(0)
      Threshold:    0 (default); a value below it is idle
      Server:       the operator's --prometheus-address
      Last result:  idle: all 1 triggers report idle
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("describe (-want +got):\n%s", diff)
	}
}

// TestDescribeCancelledSleep: a per-ElastiService grace period and the last
// sleep that traffic cancelled each get a line, only when set.
func TestDescribeCancelledSleep(t *testing.T) {
	es := testES(func(es *elastiv1alpha1.ElastiService) {
		es.Spec.ScaleDownGracePeriod = "30s"
		es.Status.LastSleepCancelledTime = timeAgo(2 * time.Minute)
	})
	var b bytes.Buffer
	if err := describe(&b, es, scaleReading{current: 1, desired: 1}, testNow); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Grace period:          30s before a scale-down, instead of the operator's --grace-period\n",
		"Last sleep cancelled:  2m ago (2026-03-02T11:58:00Z): traffic seen during the confirmation window\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}

	b.Reset()
	if err := describe(&b, testES(), scaleReading{current: 1, desired: 1}, testNow); err != nil {
		t.Fatal(err)
	}
	for _, absent := range []string{"Grace period:", "Last sleep cancelled:"} {
		if strings.Contains(b.String(), absent) {
			t.Errorf("output has %q although it is unset:\n%s", absent, b.String())
		}
	}
}

// TestDescribeSchedules: the zone of the enabledPeriod, the next pre-warm
// firing in its zone and the last one acted on.
func TestDescribeSchedules(t *testing.T) {
	es := testES(func(es *elastiv1alpha1.ElastiService) {
		es.Spec.EnabledPeriod = &elastiv1alpha1.EnabledPeriod{Schedule: "0 8 * * 1-5", Duration: "11h", TimeZone: "Europe/Berlin"}
		es.Spec.PreWarm = &elastiv1alpha1.PreWarm{Schedule: "55 8 * * 1-5", TimeZone: "Europe/Berlin"}
		es.Status.LastPreWarmTime = timeAgo(4*time.Hour + 5*time.Minute) // Monday 08:55 CET
	})
	var b bytes.Buffer
	if err := describe(&b, es, scaleReading{current: 1, desired: 1}, testNow); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`Enabled period:  "0 8 * * 1-5" for 11h (Europe/Berlin)`,
		`Pre-warm:        "55 8 * * 1-5" (Europe/Berlin); next in 19h (2026-03-03 08:55 CET)`,
		`Last pre-warm:   4h5m ago (2026-03-02T07:55:00Z)`,
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
	if got := preWarmLine(elastiv1alpha1.PreWarm{Schedule: "55 8 * * 1-5", TimeZone: "Nowhere/Town"}, testNow); !strings.Contains(got, "invalid, never fires") {
		t.Errorf("an unknown zone reads %q", got)
	}
}

// TestDescribeNetworkTrigger: a network trigger shows its threshold in
// bytes per second, or the operator's default, and none of the
// prometheus lines.
func TestDescribeNetworkTrigger(t *testing.T) {
	for _, tc := range []struct {
		name      string
		threshold *elastiv1alpha1.Threshold
		want      string
	}{
		{"threshold 64", ptr.To(elastiv1alpha1.Threshold("64")), "64 B/s; a rate below it over the cooldown is idle"},
		{"no threshold", nil, "the operator's --network-threshold (20 B/s unless set); a rate below it over the cooldown is idle"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es := testES(func(es *elastiv1alpha1.ElastiService) {
				es.Spec.Triggers = []elastiv1alpha1.ScaleTrigger{{Type: elastiv1alpha1.TriggerTypeNetwork, Metadata: elastiv1alpha1.TriggerMetadata{Threshold: tc.threshold}}}
			})
			var b bytes.Buffer
			if err := describe(&b, es, scaleReading{current: 1, desired: 1}, testNow); err != nil {
				t.Fatal(err)
			}
			_, triggers, _ := strings.Cut(b.String(), "\nTriggers:\n")
			want := `  [0] network
      Reads:        bytes the ready pods received, from their nodes' kubelets, beyond their probes
      Threshold:    ` + tc.want + `
      Last result:  idle: all 1 triggers report idle
`
			if diff := cmp.Diff(want, triggers); diff != "" {
				t.Errorf("triggers (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDescribePodMetricsTrigger: a podMetrics trigger shows what it
// scrapes and its threshold, and none of the prometheus lines.
func TestDescribePodMetricsTrigger(t *testing.T) {
	es := testES(func(es *elastiv1alpha1.ElastiService) {
		es.Spec.Triggers = []elastiv1alpha1.ScaleTrigger{{Type: elastiv1alpha1.TriggerTypePodMetrics, Metadata: elastiv1alpha1.TriggerMetadata{
			MetricName: "http_requests_total", Port: 8080, Labels: map[string]string{"method": "get", "code": "200"},
			Threshold: ptr.To(elastiv1alpha1.Threshold("0.01")),
		}}}
	})
	var b bytes.Buffer
	if err := describe(&b, es, scaleReading{current: 1, desired: 1}, testNow); err != nil {
		t.Fatal(err)
	}
	_, triggers, _ := strings.Cut(b.String(), "\nTriggers:\n")
	want := `  [0] podMetrics
      Scrapes:      http_requests_total{code="200",method="get"} from port 8080 of each ready pod, at /metrics
      Threshold:    0.01 per second; a rate below it over the cooldown is idle
      Last result:  idle: all 1 triggers report idle
`
	if diff := cmp.Diff(want, triggers); diff != "" {
		t.Errorf("triggers (-want +got):\n%s", diff)
	}
}

func TestDescribeWithoutStatusOrScale(t *testing.T) {
	es := testES(func(es *elastiv1alpha1.ElastiService) {
		es.Status = elastiv1alpha1.ElastiServiceStatus{}
		es.Spec.Triggers = nil
	})
	var b bytes.Buffer
	if err := describe(&b, es, scaleReading{err: errors.New("cannot get deployments/scale")}, testNow); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Replicas:        unknown (min 1): cannot get deployments/scale",
		"Mode:            -",
		"Scaling down:    unknown: the operator has not reconciled this ElastiService yet",
		"Conditions:\n  none yet",
		"Proxy ports:\n  none allocated",
		"Triggers:\n  none: the target never sleeps on its own",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
}

// TestDescribeWaking: a wake in progress shows its phase, the time since
// the scale write, what it waits for and the pod.
func TestDescribeWaking(t *testing.T) {
	es := testES(func(es *elastiv1alpha1.ElastiService) {
		es.Status.Mode = elastiv1alpha1.ModeProxy
		es.Status.WakeProgress = &elastiv1alpha1.WakeProgress{
			Phase: elastiv1alpha1.WakePhaseStarting, Message: "container demoapp not ready", Pod: "demoapp-7d9f8-abcde",
			StartTime: *timeAgo(12 * time.Second), PhaseTime: *timeAgo(3 * time.Second),
		}
	})
	var b bytes.Buffer
	if err := describe(&b, es, scaleReading{current: 0, desired: 1}, testNow); err != nil {
		t.Fatal(err)
	}
	want := "Mode:            proxy\nWaking:          Starting (12s) — container demoapp not ready; pod demoapp-7d9f8-abcde\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, b.String())
	}
	if got := wakingLine(elastiv1alpha1.WakeProgress{Phase: elastiv1alpha1.WakePhaseScaling, StartTime: *timeAgo(-time.Second)}, testNow); got != "Scaling (0s)" {
		t.Errorf("a start ahead of the local clock reads %q", got)
	}
	es.Status.WakeProgress = nil
	b.Reset()
	if err := describe(&b, es, scaleReading{current: 0, desired: 0}, testNow); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "Waking:") {
		t.Errorf("a Waking line without a wake:\n%s", b.String())
	}
}
