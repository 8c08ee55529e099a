package ledger

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
)

func requests(cpu, mem string) corev1.ResourceRequirements {
	r := corev1.ResourceRequirements{Requests: corev1.ResourceList{}}
	if cpu != "" {
		r.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		r.Requests[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	return r
}

func TestPodRequest(t *testing.T) {
	always := ptr.To(corev1.ContainerRestartPolicyAlways)
	cases := []struct {
		name     string
		spec     corev1.PodSpec
		cpu, mem string
	}{
		{"nothing requested", corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}}, "0", "0"},
		{"containers add up", corev1.PodSpec{Containers: []corev1.Container{
			{Name: "a", Resources: requests("250m", "64Mi")}, {Name: "b", Resources: requests("100m", "")},
		}}, "350m", "64Mi"},
		{"a limit without a request is the request", corev1.PodSpec{Containers: []corev1.Container{
			{Name: "a", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}},
		}}, "1", "0"},
		{"a larger init container sets the reservation", corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init", Resources: requests("2", "1Gi")}},
			Containers:     []corev1.Container{{Name: "a", Resources: requests("500m", "128Mi")}},
		}, "2", "1Gi"},
		{"sidecars run beside the containers and the later init containers", corev1.PodSpec{
			InitContainers: []corev1.Container{
				{Name: "proxy", RestartPolicy: always, Resources: requests("100m", "32Mi")},
				{Name: "migrate", Resources: requests("1", "64Mi")},
			},
			Containers: []corev1.Container{{Name: "a", Resources: requests("500m", "128Mi")}},
		}, "1100m", "160Mi"},
		{"overhead is added", corev1.PodSpec{
			Overhead:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")},
			Containers: []corev1.Container{{Name: "a", Resources: requests("250m", "64Mi")}},
		}, "300m", "64Mi"},
		{"pod-level requests win", corev1.PodSpec{
			Resources:  ptr.To(requests("1", "")),
			Containers: []corev1.Container{{Name: "a", Resources: requests("250m", "64Mi")}},
		}, "1", "64Mi"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cpu, mem := podRequest(tc.spec, corev1.ResourceCPU), podRequest(tc.spec, corev1.ResourceMemory)
			if cpu.Cmp(resource.MustParse(tc.cpu)) != 0 || mem.Cmp(resource.MustParse(tc.mem)) != 0 {
				t.Errorf("podRequest: cpu %s memory %s, want %s and %s", cpu.String(), mem.String(), tc.cpu, tc.mem)
			}
		})
	}
}

func TestTemplateRequests(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"template": map[string]any{
		"spec": map[string]any{"containers": []any{map[string]any{
			"name": "a", "resources": map[string]any{"requests": map[string]any{"cpu": "250m", "memory": "64Mi"}},
		}}},
	}}}}
	got := TemplateRequests(u)
	if got.unknown != "" || got.cpu.String() != "250m" || got.memory.String() != "64Mi" {
		t.Errorf("TemplateRequests = %s %s %q, want 250m 64Mi", got.cpu.String(), got.memory.String(), got.unknown)
	}
	none := TemplateRequests(&unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicas": int64(1)}}})
	if none.unknown != unknownTemplate {
		t.Errorf("a kind without spec.template: unknown = %q", none.unknown)
	}
}

// TestSavedIsExact: requests x replicas x seconds, with no rounding, in
// units that read as core-seconds and byte-seconds.
func TestSavedIsExact(t *testing.T) {
	cases := []struct {
		perReplica string
		replicas   int32
		secs       int64
		want       string
	}{
		{"250m", 2, 7200, "3600"},               // one core-hour
		{"64Mi", 2, 7200, "900Gi"},              // 0.25 GiB-hours
		{"100m", 3, 7, "2100m"},                 // 2.1 core-seconds
		{"100M", 1, 1, "100M"},                  // decimal memory stays decimal
		{"64Gi", 10, 365 * 86400, "19710000Ti"}, // beyond int64 byte-seconds
	}
	for _, tc := range cases {
		q := resource.MustParse(tc.perReplica)
		got := saved(&q, tc.replicas, tc.secs)
		if got.String() != tc.want {
			t.Errorf("saved(%s, %d, %d) = %s, want %s", tc.perReplica, tc.replicas, tc.secs, got.String(), tc.want)
		}
	}
}

// ledgerStep is one reconcile as Next sees it.
type ledgerStep struct {
	at       time.Duration // since the start
	active   string        // the Active reason the reconcile writes
	replicas int32         // what observe read
	requests Requests
	woken    *corev1.Pod
}

func runLedger(t *testing.T, start time.Time, steps []ledgerStep) *elastiv1alpha1.ElastiService {
	t.Helper()
	es := &elastiv1alpha1.ElastiService{Spec: elastiv1alpha1.ElastiServiceSpec{MinTargetReplicas: 1}}
	for _, s := range steps {
		st := *es.Status.DeepCopy()
		status := metav1.ConditionTrue
		if s.active == contract.ReasonScaledToZero {
			status = metav1.ConditionFalse
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: elastiv1alpha1.ConditionActive, Status: status, Reason: s.active})
		lo := Observed{requests: s.requests}
		if s.woken != nil {
			lo.looked, lo.woken = true, s.woken
		}
		st.Ledger = Next(es, st, start.Add(s.at), s.replicas, lo)
		es.Status = st
	}
	return es
}

func TestLedgerAccumulatesAcrossCycles(t *testing.T) {
	start := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	small := Requests{cpu: resource.MustParse("250m"), memory: resource.MustParse("64Mi")}
	custom := Requests{unknown: unknownTemplate}
	h := time.Hour
	es := runLedger(t, start, []ledgerStep{
		{at: 0, active: contract.ReasonServing, replicas: 2, requests: small},
		{at: 0, active: contract.ReasonScalingDown, replicas: 2, requests: small},
		{at: 10 * time.Second, active: contract.ReasonScaledToZero, replicas: 2, requests: small}, // sleep 1
		{at: 2*h + 10*time.Second, active: contract.ReasonWaking, requests: small},                // 7200 s at zero
		{at: 2*h + 50*time.Second, active: contract.ReasonServing, replicas: 1, requests: small, woken: readyPod(start.Add(2*h + 10*time.Second))},
		{at: 5 * h, active: contract.ReasonScaledToZero, replicas: 1, requests: small}, // sleep 2
		{at: 5*h + 30*time.Minute + 999*time.Millisecond, active: contract.ReasonWaking, requests: small},
		{at: 6 * h, active: contract.ReasonServing, replicas: 1, requests: small},
		{at: 10 * h, active: contract.ReasonScaledToZero, replicas: 3, requests: custom}, // sleep 3
		{at: 11 * h, active: contract.ReasonScaledToZero, requests: small},               // nothing happens
		{at: 12 * h, active: contract.ReasonServing, replicas: 3, requests: small},       // raised by someone else
		{at: 20 * h, active: contract.ReasonScaledToZero, requests: small},               // found at zero
	})
	l := es.Status.Ledger
	if l.Sleeps != 4 || l.Wakes != 3 {
		t.Errorf("sleeps %d wakes %d, want 4 and 3", l.Sleeps, l.Wakes)
	}
	if want := int64(7200 + 1800 + 7200); l.SecondsAtZero != want {
		t.Errorf("secondsAtZero = %d, want %d", l.SecondsAtZero, want)
	}
	// 250m x 2 x 7200 + 250m x 1 x 1800 = 3600 + 450 core-seconds.
	if got := l.Saved.CPUCoreSeconds.String(); got != "4050" {
		t.Errorf("saved CPU = %s core-seconds, want 4050", got)
	}
	// 64Mi x (2 x 7200 + 1 x 1800) = 64Mi x 16200 = 1012.5Gi byte-seconds.
	if got, want := l.Saved.MemoryByteSeconds.Value(), int64(64<<20)*16200; got != want {
		t.Errorf("saved memory = %d byte-seconds, want %d", got, want)
	}
	if l.Saved.UncountedSeconds != 7200 {
		t.Errorf("uncountedSeconds = %d, want 7200 (the period without a readable template)", l.Saved.UncountedSeconds)
	}
	wantAsleep := &elastiv1alpha1.LedgerAsleep{Replicas: 1, CPU: ptr.To(resource.MustParse("250m")), Memory: ptr.To(resource.MustParse("64Mi"))}
	if diff := cmp.Diff(wantAsleep, l.Asleep); diff != "" {
		t.Errorf("asleep (-want +got):\n%s", diff)
	}
	if l.AtZeroSince == nil || !l.AtZeroSince.Equal(ptr.To(metav1.NewTime(start.Add(20*h)))) {
		t.Errorf("atZeroSince = %v, want %v", l.AtZeroSince, start.Add(20*h))
	}
	// The third wake (raised by someone else) has no pod read yet; the
	// first one's phases were kept until then.
	if cs := l.LastColdStart; cs == nil || !cs.ScaleWriteTime.Time.Equal(start.Add(12*h)) || cs.ReadyTime != nil ||
		cs.Message != "the target went back to zero before a woken pod was Ready" {
		t.Errorf("last cold start = %+v", cs)
	}
}

// readyPod is a pod scheduled 3 s, started 20 s and Ready 41 s after wake.
func readyPod(wake time.Time) *corev1.Pod {
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(wake.Add(d)) }
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app-1"},
		Status: corev1.PodStatus{
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at(3 * time.Second)},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: at(41 * time.Second)},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at(41 * time.Second)},
			},
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "app", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(20 * time.Second)}}},
				{Name: "sidecar", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(12 * time.Second)}}},
			},
		},
	}
}

func TestColdStartPhases(t *testing.T) {
	wake := time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)
	cs := coldStartPhases(elastiv1alpha1.ColdStart{ScaleWriteTime: metav1.NewTime(wake)}, readyPod(wake), "")
	at := func(d time.Duration) *metav1.Time { return ptr.To(metav1.NewTime(wake.Add(d))) }
	want := elastiv1alpha1.ColdStart{
		ScaleWriteTime: metav1.NewTime(wake), Pod: "app-1",
		ScheduledTime: at(3 * time.Second), StartedTime: at(20 * time.Second), ReadyTime: at(41 * time.Second),
	}
	if diff := cmp.Diff(want, cs); diff != "" {
		t.Errorf("coldStartPhases (-want +got):\n%s", diff)
	}
	wantPhases := []coldStartPhase{{phaseScheduling, 3}, {phaseStarting, 17}, {phaseReadying, 21}, {phaseTotal, 41}}
	if diff := cmp.Diff(wantPhases, coldStartPhaseSeconds(cs), cmp.AllowUnexported(coldStartPhase{})); diff != "" {
		t.Errorf("coldStartPhaseSeconds (-want +got):\n%s", diff)
	}

	missing := coldStartPhases(elastiv1alpha1.ColdStart{ScaleWriteTime: metav1.NewTime(wake)}, nil, "no pod")
	if missing.Message != "no pod" || missing.ReadyTime != nil {
		t.Errorf("no woken pod: %+v", missing)
	}
	if got := coldStartPhaseSeconds(missing); len(got) != 0 {
		t.Errorf("phases of a cold start without a pod: %v", got)
	}
}

func TestWokenPod(t *testing.T) {
	wake := time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC)
	named := func(name string, p *corev1.Pod) corev1.Pod { p.Name = name; return *p }
	old := named("old", readyPod(wake.Add(-time.Hour)))        // Ready long before the wake
	late := named("late", readyPod(wake.Add(10*time.Second)))  // Ready at +51 s
	first := named("first", readyPod(wake))                    // Ready at +41 s
	gone := named("gone", readyPod(wake.Add(-10*time.Second))) // Ready at +31 s, terminating
	gone.DeletionTimestamp = ptr.To(metav1.NewTime(wake.Add(time.Minute)))
	unready := named("unready", readyPod(wake.Add(-20*time.Second)))
	unready.Status.Conditions = unready.Status.Conditions[:1]
	if got := wokenPod([]corev1.Pod{old, late, gone, unready, first}, wake); got == nil || got.Name != "first" {
		t.Errorf("wokenPod = %v, want first", got)
	}
	if got := wokenPod([]corev1.Pod{old, gone, unready}, wake); got != nil {
		t.Errorf("wokenPod = %s, want none", got.Name)
	}
}

// TestLedgerCountsADoze: a doze is a period asleep whose saving is what
// the doze freed (two pods, 100m → 5m CPU and 64Mi → 16Mi memory each),
// and its wake is no cold start: the pods never stopped.
func TestLedgerCountsADoze(t *testing.T) {
	start := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	q := func(s string) *resource.Quantity { return ptr.To(resource.MustParse(s)) }
	pod := func(uid string) elastiv1alpha1.DozedPod {
		return elastiv1alpha1.DozedPod{UID: uid, Containers: []elastiv1alpha1.DozedContainer{{
			Name:     "app",
			Requests: elastiv1alpha1.Resources{CPU: q("100m"), Memory: q("64Mi")},
			Dozed:    elastiv1alpha1.Resources{CPU: q("5m"), Memory: q("16Mi")},
		}}}
	}
	dozed := &elastiv1alpha1.DozeStatus{Pods: []elastiv1alpha1.DozedPod{pod("a"), pod("b")}}
	es := &elastiv1alpha1.ElastiService{}
	step := func(at time.Duration, reason string, status metav1.ConditionStatus, d *elastiv1alpha1.DozeStatus) {
		st := *es.Status.DeepCopy()
		st.Doze = d
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: elastiv1alpha1.ConditionActive, Status: status, Reason: reason})
		st.Ledger = Next(es, st, start.Add(at), 2, Observed{requests: Requests{cpu: resource.MustParse("100m"), memory: resource.MustParse("64Mi")}})
		es.Status = st
	}
	step(0, contract.ReasonServing, metav1.ConditionTrue, nil)
	step(10*time.Second, contract.ReasonDozing, metav1.ConditionFalse, dozed)
	l := es.Status.Ledger
	wantAsleep := &elastiv1alpha1.LedgerAsleep{Replicas: 2, CPU: q("95m"), Memory: q("48Mi")}
	if diff := cmp.Diff(wantAsleep, l.Asleep); diff != "" {
		t.Errorf("asleep (-want +got):\n%s", diff)
	}
	step(time.Hour+10*time.Second, contract.ReasonWaking, metav1.ConditionTrue, dozed)
	step(time.Hour+11*time.Second, contract.ReasonServing, metav1.ConditionTrue, nil)
	l = es.Status.Ledger
	if l.Sleeps != 1 || l.Wakes != 1 || l.SecondsAtZero != 3600 {
		t.Errorf("sleeps %d, wakes %d, seconds %d; want 1, 1 and 3600", l.Sleeps, l.Wakes, l.SecondsAtZero)
	}
	// 95m × 2 × 3600 = 684 core-seconds; 48Mi × 2 × 3600 byte-seconds.
	if got := l.Saved.CPUCoreSeconds.String(); got != "684" {
		t.Errorf("saved CPU = %s core-seconds, want 684", got)
	}
	if got, want := l.Saved.MemoryByteSeconds.Value(), int64(48<<20)*2*3600; got != want {
		t.Errorf("saved memory = %d byte-seconds, want %d", got, want)
	}
	if l.LastColdStart != nil {
		t.Errorf("a wake from a doze recorded a cold start: %+v", l.LastColdStart)
	}
}
