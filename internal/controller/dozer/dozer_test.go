package dozer

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/doze"
)

func pod(name, uid, cpu, statusCPU string, restarts int32) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid), Generation: 2},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
		Status: corev1.PodStatus{ObservedGeneration: 2, ContainerStatuses: []corev1.ContainerStatus{{Name: "app", RestartCount: restarts,
			Resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(statusCPU)}}}}},
	}
	return p
}

func record(uid, before, dozed string) elastiv1alpha1.DozedPod {
	b, d := resource.MustParse(before), resource.MustParse(dozed)
	return elastiv1alpha1.DozedPod{UID: uid, Generation: 2, Containers: []elastiv1alpha1.DozedContainer{{Name: "app",
		Requests: elastiv1alpha1.Resources{CPU: &b}, Dozed: elastiv1alpha1.Resources{CPU: &d}}}}
}

func TestObserve(t *testing.T) {
	st := &elastiv1alpha1.DozeStatus{TemplateHash: "h1", Pods: []elastiv1alpha1.DozedPod{record("a", "250m", "5m"), record("b", "250m", "5m"), record("gone", "250m", "5m")}}
	deferred := pod("web-b", "b", "250m", "5m", 0)
	deferred.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonDeferred}}
	for _, tc := range []struct {
		name string
		t    Target
		st   *elastiv1alpha1.DozeStatus
		want Report
	}{
		{"dozing, applied", Target{TemplateHash: "h1", Pods: []corev1.Pod{pod("web-a", "a", "5m", "5m", 0), pod("web-b", "b", "5m", "5m", 0)}}, st,
			Report{Done: true, Gone: []string{"gone"}}},
		{"dozing, not applied yet", Target{TemplateHash: "h1", Pods: []corev1.Pod{pod("web-a", "a", "5m", "250m", 0)}}, st,
			Report{Waiting: []string{"web-a"}, Gone: []string{"b", "gone"}}},
		{"woken and applied", Target{TemplateHash: "h1", Pods: []corev1.Pod{pod("web-a", "a", "250m", "250m", 0), pod("web-b", "b", "250m", "250m", 0)}}, st,
			Report{Done: true, Restored: true, Gone: []string{"gone"}}},
		{"woken, one deferred", Target{TemplateHash: "h1", Pods: []corev1.Pod{pod("web-a", "a", "250m", "250m", 0), deferred}}, st,
			Report{Restored: true, Deferred: []string{"web-b"}, Gone: []string{"gone"}}},
		{"restart, new pod, rollout", Target{TemplateHash: "h2", Pods: []corev1.Pod{pod("web-a", "a", "5m", "5m", 1), pod("web-c", "c", "250m", "250m", 0)}}, st,
			Report{Done: true, Restarted: []string{"web-a"}, Unrecorded: []string{"web-c"}, Gone: []string{"b", "gone"}, TemplateChanged: true}},
		{"no doze recorded", Target{Pods: []corev1.Pod{pod("web-a", "a", "5m", "5m", 0)}}, nil,
			Report{Done: true, Restored: true, Unrecorded: []string{"web-a"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Observe(tc.t, tc.st)); diff != "" {
				t.Errorf("report (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPlanBounds(t *testing.T) {
	floor := elastiv1alpha1.DozeSpec{CPU: resource.MustParse("5m")}
	var pods []corev1.Pod
	for i := 0; i <= MaxPods; i++ {
		pods = append(pods, pod(fmt.Sprintf("web-%d", i), fmt.Sprint(i), "250m", "250m", 0))
	}
	if _, err := Plan(pods[:MaxPods], floor, nil); err != nil {
		t.Fatalf("%d pods: %v", MaxPods, err)
	}
	if _, err := Plan(pods, floor, nil); !errors.Is(err, doze.ErrRefused) {
		t.Errorf("%d pods: %v, want doze.ErrRefused", len(pods), err)
	}

	rs, err := Plan(pods[:2], floor, nil)
	if err != nil || len(rs.Records) != 2 || len(rs.writes) != 2 || rs.Records[0].Generation != 3 {
		t.Fatalf("two pods at generation 2: %+v %v; want two records predicting generation 3, and two writes", rs.Records, err)
	}
	again, err := Plan([]corev1.Pod{pod("web-0", "0", "5m", "5m", 0)}, floor, rs.Records)
	if err != nil || len(again.writes) != 0 || len(again.Records) != 1 || again.Records[0].Containers[0].Requests.CPU.String() != "250m" {
		t.Errorf("planned again over a dozing pod: %+v %v; want its first record and no write", again.Records, err)
	}
}
