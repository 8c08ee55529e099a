//go:build integration

package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/scaling"
)

// TestLedgerSleepAndWake: one sleep of two hours on the fake clock and one
// wake whose pod the test moves through the kubelet's states; status.ledger
// then holds the exact interval, one wake, the pod's own timestamps as the
// phases, and requests x replicas x time as the savings. The metrics agree.
func TestLedgerSleepAndWake(t *testing.T) {
	fake := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	op := startOperator(t, operatorOptions{
		triggers: newFakeTriggers(scaling.StateIdle),
		cfg:      func(c *Config) { c.Clock = fake },
	})
	createResolver(t, op.resolverNS, "r1", true, "10.0.0.1")
	podLabels := map[string]string{"app": "led", testPodLabel: "yes"}
	app := corev1.Container{Name: "app", Image: "example.invalid/app:1", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi"),
	}}}
	mustCreate(t, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: op.ns, Name: "led"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "led"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{app}},
			},
		},
	})
	createService(t, op.ns, "led")
	createES(t, op.ns, "led", "led", "led")
	eventually(t, wait, "reconciled", wantMode(op.ns, "led", elastiv1alpha1.ModeServe))
	if l := getES(t, op.ns, "led").Status.Ledger; l != nil {
		t.Fatalf("a target never at zero has a ledger: %+v", l)
	}

	// Past the 1 s cooldown (counted from the real creation time), then
	// past the grace period: the target sleeps at the fake clock's time.
	fake.Step(3 * time.Second)
	passGrace(t, fake, op.ns, "led")
	eventually(t, wait, "asleep", wantReplicas(op.ns, "led", 0))
	eventually(t, wait, "sleep recorded", wantCondition(op.ns, "led", elastiv1alpha1.ConditionActive, metav1.ConditionFalse, contract.ReasonScaledToZero))
	slept := fake.Now()
	l := getES(t, op.ns, "led").Status.Ledger
	wantAsleep := &elastiv1alpha1.LedgerAsleep{Replicas: 2, CPU: ptr.To(resource.MustParse("250m")), Memory: ptr.To(resource.MustParse("64Mi"))}
	if l == nil || l.Sleeps != 1 || l.AtZeroSince == nil || !l.AtZeroSince.Time.Equal(slept) {
		t.Fatalf("ledger after the sleep at %s: %+v", slept, l)
	}
	if diff := cmp.Diff(wantAsleep, l.Asleep); diff != "" {
		t.Errorf("asleep (-want +got):\n%s", diff)
	}

	// Two hours at zero, then a wake.
	fake.SetTime(slept.Add(2 * time.Hour))
	woke := fake.Now()
	patchAnnotation(t, op.ns, "led", contract.AnnotationWakeNow, "x")
	eventually(t, wait, "woken", wantReplicas(op.ns, "led", 1))
	eventually(t, wait, "wake recorded", func() error {
		l := getES(t, op.ns, "led").Status.Ledger
		if l == nil || l.LastColdStart == nil {
			return fmt.Errorf("no cold start in %+v", l)
		}
		return nil
	})

	// The woken pod, moved through scheduling, start and readiness as a
	// kubelet would, then the Service's endpoint turns ready.
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(woke.Add(d)) }
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: op.ns, Name: "led-7d9f8-abcde", Labels: podLabels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{app}},
	}
	mustCreate(t, pod)
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at(3 * time.Second)},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: at(41 * time.Second)},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at(41 * time.Second)},
		},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "app", Image: app.Image, Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(20 * time.Second)}},
		}},
	}
	if err := k8s.Status().Update(context.Background(), pod); err != nil {
		t.Fatalf("update pod status: %v", err)
	}
	setOwnSlice(t, op.ns, "led", true)
	eventually(t, wait, "serve", wantMode(op.ns, "led", elastiv1alpha1.ModeServe))
	eventually(t, wait, "cold start complete", func() error {
		if cs := getES(t, op.ns, "led").Status.Ledger.LastColdStart; cs.ReadyTime == nil {
			return fmt.Errorf("cold start %+v", cs)
		}
		return nil
	})

	l = getES(t, op.ns, "led").Status.Ledger
	if l.SecondsAtZero != 7200 || l.Wakes != 1 || l.Sleeps != 1 || l.AtZeroSince != nil || l.Asleep != nil {
		t.Errorf("ledger after the wake: secondsAtZero %d (want 7200), wakes %d (want 1), sleeps %d (want 1), atZeroSince %v, asleep %+v",
			l.SecondsAtZero, l.Wakes, l.Sleeps, l.AtZeroSince, l.Asleep)
	}
	wantCS := &elastiv1alpha1.ColdStart{
		ScaleWriteTime: metav1.NewTime(woke), Pod: pod.Name,
		ScheduledTime: ptr.To(at(3 * time.Second)), StartedTime: ptr.To(at(20 * time.Second)), ReadyTime: ptr.To(at(41 * time.Second)),
	}
	if diff := cmp.Diff(wantCS, l.LastColdStart, cmp.Comparer(func(a, b metav1.Time) bool { return a.Equal(&b) })); diff != "" {
		t.Errorf("last cold start (-want +got):\n%s", diff)
	}
	// 250m x 2 replicas x 7200 s = 3600 core-seconds (one core-hour);
	// 64Mi x 2 x 7200 s = 900Gi byte-seconds (a quarter of a GiB-hour).
	if got := l.Saved.CPUCoreSeconds; got == nil || got.Cmp(resource.MustParse("3600")) != 0 {
		t.Errorf("saved CPU = %v core-seconds, want 3600", got)
	}
	if got := l.Saved.MemoryByteSeconds; got == nil || got.Cmp(resource.MustParse("900Gi")) != 0 {
		t.Errorf("saved memory = %v byte-seconds, want 900Gi", got)
	}

	for name, c := range map[string]struct {
		got, want float64
	}{
		"wakes":         {ledgerMetric(t, "elasti_operator_ledger_wakes_total", op.ns, "led"), 1},
		"sleeps":        {ledgerMetric(t, "elasti_operator_ledger_sleeps_total", op.ns, "led"), 1},
		"at zero":       {ledgerMetric(t, "elasti_operator_ledger_at_zero_seconds_total", op.ns, "led"), 7200},
		"at zero since": {ledgerMetric(t, "elasti_operator_ledger_at_zero_since_timestamp_seconds", op.ns, "led"), 0},
		"saved cpu":     {ledgerMetric(t, "elasti_operator_ledger_saved_cpu_core_seconds_total", op.ns, "led"), 3600},
		"saved memory":  {ledgerMetric(t, "elasti_operator_ledger_saved_memory_byte_seconds_total", op.ns, "led"), 900 << 30},
	} {
		if c.got != c.want {
			t.Errorf("metric %s = %v, want %v", name, c.got, c.want)
		}
	}
	if n := len(metricSeries(t, "elasti_operator_cold_start_phase_seconds", op.ns, "led")); n != 4 {
		t.Errorf("%d cold-start phase series, want 4", n)
	}
}

// metricSeries returns one ElastiService's series of the metric name, as
// the operator's registry gathers them (the ledger's metrics live in
// package ledger, the activation calls' in package wakecalls).
func metricSeries(t *testing.T, name, ns, es string) []*dto.Metric {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []*dto.Metric
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] == ns && labels["elastiservice"] == es {
				out = append(out, m)
			}
		}
	}
	return out
}

// ledgerMetric is the value of one ElastiService's counter or gauge name; 0
// when it has no series.
func ledgerMetric(t *testing.T, name, ns, es string) float64 {
	t.Helper()
	series := metricSeries(t, name, ns, es)
	if len(series) == 0 {
		return 0
	}
	if c := series[0].GetCounter(); c != nil {
		return c.GetValue()
	}
	return series[0].GetGauge().GetValue()
}
