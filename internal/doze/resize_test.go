package doze

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

func TestShrink(t *testing.T) {
	twoContainers := podOf("u1", ctr("app", "cpu=250m,memory=128Mi", "cpu=1,memory=256Mi"), ctr("proxy", "cpu=10m,memory=16Mi", ""))
	twoContainers.Status.ContainerStatuses[0].RestartCount = 3

	// The same pod after an operator restart, already at the floor: the
	// record of the first Shrink still says what to restore.
	dozed := podOf("u1", ctr("app", "cpu=5m,memory=128Mi", "cpu=1,memory=256Mi"), ctr("proxy", "cpu=5m,memory=16Mi", ""))
	firstRecord := elastiv1alpha1.DozedPod{UID: "u1", Name: "web-u1", Generation: 2, Containers: []elastiv1alpha1.DozedContainer{
		{Name: "app", RestartCount: 3, Requests: elastiv1alpha1.Resources{CPU: q("250m")}, Limits: elastiv1alpha1.Resources{CPU: q("1"), Memory: q("256Mi")}, Dozed: elastiv1alpha1.Resources{CPU: q("5m")}},
		{Name: "proxy", Requests: elastiv1alpha1.Resources{CPU: q("10m")}, Dozed: elastiv1alpha1.Resources{CPU: q("5m")}},
	}}
	halfDone := podOf("u1", ctr("app", "cpu=5m,memory=128Mi", "cpu=1,memory=256Mi"), ctr("proxy", "cpu=10m,memory=16Mi", ""))

	for _, tc := range []struct {
		name      string
		pod       *corev1.Pod
		floor     elastiv1alpha1.DozeSpec
		prev      *elastiv1alpha1.DozedPod
		wantPatch string
		wantRec   elastiv1alpha1.DozedPod
		wantErr   error
	}{
		{
			name: "CPU only, limits kept", pod: twoContainers, floor: floorOf("5m", ""),
			wantPatch: `{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"5m"}}},{"name":"proxy","resources":{"requests":{"cpu":"5m"}}}]}}`,
			wantRec: elastiv1alpha1.DozedPod{UID: "u1", Name: "web-u1", Containers: []elastiv1alpha1.DozedContainer{
				{Name: "app", RestartCount: 3, Requests: elastiv1alpha1.Resources{CPU: q("250m")}, Limits: elastiv1alpha1.Resources{CPU: q("1"), Memory: q("256Mi")}, Dozed: elastiv1alpha1.Resources{CPU: q("5m")}},
				{Name: "proxy", Requests: elastiv1alpha1.Resources{CPU: q("10m")}, Dozed: elastiv1alpha1.Resources{CPU: q("5m")}},
			}},
		},
		{
			name: "CPU and memory; a container at the floor is left", pod: twoContainers, floor: floorOf("10m", "32Mi"),
			wantPatch: `{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"10m","memory":"32Mi"}}}]}}`,
			wantRec: elastiv1alpha1.DozedPod{UID: "u1", Name: "web-u1", Containers: []elastiv1alpha1.DozedContainer{
				{Name: "app", RestartCount: 3, Requests: elastiv1alpha1.Resources{CPU: q("250m"), Memory: q("128Mi")}, Limits: elastiv1alpha1.Resources{CPU: q("1"), Memory: q("256Mi")}, Dozed: elastiv1alpha1.Resources{CPU: q("10m"), Memory: q("32Mi")}},
			}},
		},
		{
			name: "already dozed: nothing to send, the first record kept", pod: dozed, floor: floorOf("5m", ""), prev: &firstRecord,
			wantPatch: ``, wantRec: firstRecord,
		},
		{
			name: "half done: the rest is sent, originals from the record", pod: halfDone, floor: floorOf("5m", ""), prev: &firstRecord,
			wantPatch: `{"spec":{"containers":[{"name":"proxy","resources":{"requests":{"cpu":"5m"}}}]}}`, wantRec: firstRecord,
		},
		{
			name: "a record of another UID is ignored", pod: dozed, floor: floorOf("5m", ""),
			prev:      &elastiv1alpha1.DozedPod{UID: "old", Containers: firstRecord.Containers},
			wantPatch: ``, wantRec: elastiv1alpha1.DozedPod{UID: "u1", Name: "web-u1"},
		},
		{
			name: "a request defaulted from the limit is lowered", pod: podOf("u2", ctr("app", "memory=64Mi", "cpu=200m")), floor: floorOf("5m", ""),
			wantPatch: `{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"5m"}}}]}}`,
			wantRec: elastiv1alpha1.DozedPod{UID: "u2", Name: "web-u2", Containers: []elastiv1alpha1.DozedContainer{
				{Name: "app", Requests: elastiv1alpha1.Resources{CPU: q("200m")}, Limits: elastiv1alpha1.Resources{CPU: q("200m")}, Dozed: elastiv1alpha1.Resources{CPU: q("5m")}},
			}},
		},
		{name: "guaranteed pod", pod: podOf("u3", ctr("app", "cpu=1,memory=1Gi", "cpu=1,memory=1Gi")), floor: floorOf("5m", ""), wantErr: ErrRefused},
		{name: "best effort pod", pod: podOf("u4", ctr("app", "", "")), floor: floorOf("5m", ""), wantErr: ErrRefused},
		{name: "no pod", pod: nil, floor: floorOf("5m", ""), wantErr: ErrRefused},
		{name: "zero floor", pod: twoContainers, floor: elastiv1alpha1.DozeSpec{}, wantErr: ErrBadFloor},
		{name: "memory floor under 1Mi", pod: twoContainers, floor: floorOf("5m", "1k"), wantErr: ErrBadFloor},
	} {
		t.Run(tc.name, func(t *testing.T) {
			patch, rec, err := Shrink(tc.pod, tc.floor, tc.prev)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if got := patchString(t, patch); got != tc.wantPatch {
				t.Errorf("patch:\n got %s\nwant %s", got, tc.wantPatch)
			}
			if diff := cmp.Diff(tc.wantRec, rec, quantities); diff != "" {
				t.Errorf("record (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRestoreUndoesShrink(t *testing.T) {
	pod := podOf("u1", ctr("app", "cpu=250m,memory=128Mi", "cpu=1,memory=256Mi"), ctr("proxy", "cpu=10m,memory=16Mi", ""))
	patch, rec, err := Shrink(pod, floorOf("5m", "8Mi"), nil)
	if err != nil {
		t.Fatal(err)
	}
	apply(pod, patch)
	if got := pod.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; got.String() != "5m" {
		t.Fatalf("after the doze, app requests %s CPU, want 5m", got.String())
	}

	back := Restore(pod, rec)
	want := `{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"250m","memory":"128Mi"}}},{"name":"proxy","resources":{"requests":{"cpu":"10m","memory":"16Mi"}}}]}}`
	if got := patchString(t, back); got != want {
		t.Errorf("restore patch:\n got %s\nwant %s", got, want)
	}
	apply(pod, back)
	orig := podOf("u1", ctr("app", "cpu=250m,memory=128Mi", "cpu=1,memory=256Mi"), ctr("proxy", "cpu=10m,memory=16Mi", ""))
	if diff := cmp.Diff(orig.Spec, pod.Spec, quantities); diff != "" {
		t.Errorf("spec after doze and wake (-want +got):\n%s", diff)
	}
	if again := Restore(pod, rec); !again.Empty() {
		t.Errorf("a second restore sends %s, want nothing", patchString(t, again))
	}
	other := pod.DeepCopy()
	other.UID = "u9"
	if p := Restore(other, rec); !p.Empty() {
		t.Errorf("restore of a recreated pod (new UID) sends %s, want nothing", patchString(t, p))
	}
	if p := Restore(nil, rec); !p.Empty() {
		t.Error("restore of no pod sends a patch")
	}
}

func TestFreed(t *testing.T) {
	recs := []elastiv1alpha1.DozedPod{
		{UID: "a", Containers: []elastiv1alpha1.DozedContainer{
			{Name: "app", Requests: elastiv1alpha1.Resources{CPU: q("250m"), Memory: q("128Mi")}, Dozed: elastiv1alpha1.Resources{CPU: q("5m"), Memory: q("32Mi")}},
			{Name: "proxy", Requests: elastiv1alpha1.Resources{CPU: q("10m")}, Dozed: elastiv1alpha1.Resources{CPU: q("5m")}},
		}},
		{UID: "b", Containers: []elastiv1alpha1.DozedContainer{
			{Name: "app", Requests: elastiv1alpha1.Resources{CPU: q("250m")}, Dozed: elastiv1alpha1.Resources{CPU: q("5m")}},
		}},
	}
	got := Freed(recs)
	if got.CPU == nil || got.CPU.MilliValue() != 245+5+245 {
		t.Errorf("freed CPU %v, want 495m", got.CPU)
	}
	if got.Memory == nil || got.Memory.Value() != 96<<20 {
		t.Errorf("freed memory %v, want 96Mi", got.Memory)
	}
	if none := Freed(nil); none.CPU != nil || none.Memory != nil {
		t.Errorf("nothing recorded frees %+v, want nothing", none)
	}
}

func TestRestarted(t *testing.T) {
	pod := podOf("u1", ctr("app", "cpu=250m", ""), ctr("proxy", "cpu=10m", ""))
	pod.Status.ContainerStatuses[0].RestartCount = 2
	_, rec, err := Shrink(pod, floorOf("5m", ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := Restarted(pod, rec); got != nil {
		t.Errorf("no restart yet, got %v", got)
	}
	pod.Status.ContainerStatuses[1].RestartCount = 1
	if diff := cmp.Diff([]string{"proxy"}, Restarted(pod, rec)); diff != "" {
		t.Errorf("restarted (-want +got):\n%s", diff)
	}
	pod.UID = "u2"
	if got := Restarted(pod, rec); got != nil {
		t.Errorf("a recreated pod is not a restart, got %v", got)
	}
}

var quantities = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

func patchString(t *testing.T, p Patch) string {
	t.Helper()
	if p.Empty() {
		return ""
	}
	data, err := p.JSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// apply writes p's requests into pod's spec, as the API server would.
func apply(pod *corev1.Pod, p Patch) {
	for _, cr := range p.Containers {
		c := container(pod, cr.Name)
		if cr.CPU != nil {
			c.Resources.Requests[corev1.ResourceCPU] = *cr.CPU
		}
		if cr.Memory != nil {
			c.Resources.Requests[corev1.ResourceMemory] = *cr.Memory
		}
	}
}

func TestTemplateHash(t *testing.T) {
	a := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{ctr("app", "cpu=100m", "")}}}
	b := a.DeepCopy()
	if TemplateHash(a) == "" || TemplateHash(a) != TemplateHash(b) {
		t.Fatalf("equal templates hash to %q and %q", TemplateHash(a), TemplateHash(b))
	}
	b.Annotations = map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-12-04T17:00:00Z"}
	if TemplateHash(a) == TemplateHash(b) {
		t.Error("a rollout restart does not change the hash")
	}
	if TemplateHash(nil) != "" {
		t.Error("no template hashes to something")
	}
}
