package wakeprogress

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/ledger"
)

// quotaMsg is a workload controller's reason for a pod it cannot create.
const quotaMsg = `pods "web-7d9f8-abcde" is forbidden: exceeded quota: compute`

var wakeAt = time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)

// podOpt shapes a test pod.
type podOpt func(*corev1.Pod)

// wokenTestPod is a pod named name created created after wakeAt, with one
// container "app" and no status.
func wokenTestPod(name string, created time.Duration, opts ...podOpt) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name + "-uid"), CreationTimestamp: metav1.NewTime(wakeAt.Add(created))},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1"}}},
	}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func withCondition(typ corev1.PodConditionType, status corev1.ConditionStatus, reason, msg string) podOpt {
	return func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: typ, Status: status, Reason: reason, Message: msg})
	}
}

var (
	scheduled = withCondition(corev1.PodScheduled, corev1.ConditionTrue, "", "")
	readyCond = withCondition(corev1.PodReady, corev1.ConditionTrue, "", "")
)

func withContainer(name string, state corev1.ContainerState, ready bool) podOpt {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: name, Image: "example.com/" + name + ":1", State: state, Ready: ready})
	}
}

func waiting(reason, msg string) corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
}

var running = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}

func terminating(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(wakeAt)) }

// pullEvent is a kubelet image-pull Event for container "app" of pod at
// wakeAt+at.
func pullEvent(pod, reason, image string, at time.Duration) corev1.Event {
	msg := `Pulling image "` + image + `"`
	if reason == eventReasonPulled {
		msg = `Successfully pulled image "` + image + `" in 1.2s (1.2s including waiting). Image size: 1000 bytes.`
	}
	return corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: pod + "." + reason},
		InvolvedObject: corev1.ObjectReference{
			Kind: "Pod", Name: pod, UID: types.UID(pod + "-uid"), FieldPath: "spec.containers{app}",
		},
		Reason: reason, Message: msg, LastTimestamp: metav1.NewTime(wakeAt.Add(at)),
	}
}

func TestWakeProgressOf(t *testing.T) {
	creating := withContainer("app", waiting("ContainerCreating", ""), false)
	cases := []struct {
		name   string
		pods   []corev1.Pod
		events []corev1.Event
		want   elastiv1alpha1.WakePhase
		msg    string // a substring of the message
		pod    string
	}{
		{name: "no pod", want: elastiv1alpha1.WakePhaseScaling, msg: MsgNoPod},
		{
			name: "only a terminating pod of the last awake period",
			pods: []corev1.Pod{wokenTestPod("old", -time.Hour, scheduled, readyCond, terminating)},
			want: elastiv1alpha1.WakePhaseScaling, msg: MsgNoPod,
		},
		{
			name: "a pod created well before the wake is not the wake's",
			pods: []corev1.Pod{wokenTestPod("old", -ledger.ClockSkew-time.Second, scheduled, readyCond)},
			want: elastiv1alpha1.WakePhaseScaling, msg: MsgNoPod,
		},
		{
			name: "a pod created within the clock skew before the wake is",
			pods: []corev1.Pod{wokenTestPod("new", -ledger.ClockSkew+time.Second)},
			want: elastiv1alpha1.WakePhaseScheduling, msg: "waiting for the scheduler", pod: "new",
		},
		{
			name: "unschedulable: the scheduler's message",
			pods: []corev1.Pod{wokenTestPod("p", time.Second, withCondition(corev1.PodScheduled, corev1.ConditionFalse, corev1.PodReasonUnschedulable, "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."))},
			want: elastiv1alpha1.WakePhaseScheduling, msg: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.", pod: "p",
		},
		{
			name:   "Pulling without Pulled",
			pods:   []corev1.Pod{wokenTestPod("p", time.Second, scheduled, creating)},
			events: []corev1.Event{pullEvent("p", eventReasonPulling, "example.com/app:1", 2*time.Second)},
			want:   elastiv1alpha1.WakePhasePullingImage, msg: `Pulling image "example.com/app:1"`, pod: "p",
		},
		{
			name: "Pulled after Pulling: the containers are created",
			pods: []corev1.Pod{wokenTestPod("p", time.Second, scheduled, creating)},
			events: []corev1.Event{
				pullEvent("p", eventReasonPulled, "example.com/app:1", 9*time.Second),
				pullEvent("p", eventReasonPulling, "example.com/app:1", 2*time.Second),
			},
			want: elastiv1alpha1.WakePhaseStarting, msg: "container app waiting: ContainerCreating", pod: "p",
		},
		{
			name: "Pulled in the same second as Pulling ends the pull",
			pods: []corev1.Pod{wokenTestPod("p", time.Second, scheduled, creating)},
			events: []corev1.Event{
				pullEvent("p", eventReasonPulling, "example.com/app:1", 2*time.Second),
				pullEvent("p", eventReasonPulled, "example.com/app:1", 2*time.Second),
			},
			want: elastiv1alpha1.WakePhaseStarting, pod: "p",
		},
		{
			name: "a Pulling again after an earlier Pulled (a restart re-pulls)",
			pods: []corev1.Pod{wokenTestPod("p", time.Second, scheduled, creating)},
			events: []corev1.Event{
				pullEvent("p", eventReasonPulled, "example.com/app:1", 3*time.Second),
				pullEvent("p", eventReasonPulling, "example.com/app:1", 30*time.Second),
			},
			want: elastiv1alpha1.WakePhasePullingImage, msg: `Pulling image "example.com/app:1"`, pod: "p",
		},
		{
			name: "a Pulled for another container does not end the pull",
			pods: []corev1.Pod{wokenTestPod("p", time.Second, scheduled, creating)},
			events: []corev1.Event{
				pullEvent("p", eventReasonPulling, "example.com/app:1", 2*time.Second),
				func() corev1.Event {
					e := pullEvent("p", eventReasonPulled, "example.com/sidecar:1", 5*time.Second)
					e.InvolvedObject.FieldPath = "spec.containers{sidecar}"
					return e
				}(),
			},
			want: elastiv1alpha1.WakePhasePullingImage, msg: "example.com/app:1", pod: "p",
		},
		{
			name: "Events without a fieldPath pair by the quoted image",
			pods: []corev1.Pod{wokenTestPod("p", time.Second, scheduled, creating)},
			events: func() []corev1.Event {
				a, b := pullEvent("p", eventReasonPulling, "example.com/app:1", 2*time.Second), pullEvent("p", eventReasonPulled, "example.com/app:1", 4*time.Second)
				a.InvolvedObject.FieldPath, b.InvolvedObject.FieldPath = "", ""
				return []corev1.Event{a, b}
			}(),
			want: elastiv1alpha1.WakePhaseStarting, pod: "p",
		},
		{
			name: "a Pulling of an earlier pod with the same name (another UID) is not this pod's",
			pods: []corev1.Pod{wokenTestPod("web-0", time.Second, scheduled, creating)},
			events: func() []corev1.Event {
				e := pullEvent("web-0", eventReasonPulling, "example.com/app:1", -time.Hour)
				e.InvolvedObject.UID = "an-older-web-0"
				return []corev1.Event{e}
			}(),
			want: elastiv1alpha1.WakePhaseStarting, pod: "web-0",
		},
		{
			name:   "a Pulling whose container runs is over, its Pulled lost",
			pods:   []corev1.Pod{wokenTestPod("p", time.Second, scheduled, withContainer("app", running, false))},
			events: []corev1.Event{pullEvent("p", eventReasonPulling, "example.com/app:1", 2*time.Second)},
			want:   elastiv1alpha1.WakePhaseStarting, msg: "container app not ready", pod: "p",
		},
		{
			name: "ImagePullBackOff shows as PullingImage with the kubelet's message",
			pods: []corev1.Pod{wokenTestPod("p", time.Second, scheduled,
				withContainer("app", waiting(waitingImagePullBackOff, `Back-off pulling image "example.com/app:1"`), false))},
			want: elastiv1alpha1.WakePhasePullingImage, msg: `ImagePullBackOff: Back-off pulling image "example.com/app:1"`, pod: "p",
		},
		{
			name: "ErrImagePull without a message names the image",
			pods: []corev1.Pod{wokenTestPod("p", time.Second, scheduled, withContainer("app", waiting(waitingErrImagePull, ""), false))},
			want: elastiv1alpha1.WakePhasePullingImage, msg: `ErrImagePull: image "example.com/app:1"`, pod: "p",
		},
		{
			name: "running and not ready: the containers not ready, init containers too",
			pods: []corev1.Pod{wokenTestPod("p", time.Second, scheduled, func(p *corev1.Pod) {
				p.Spec.InitContainers = []corev1.Container{{Name: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}
				p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "worker"})
				p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "proxy", State: running}}
			}, withContainer("app", running, false), withContainer("worker", running, true))},
			want: elastiv1alpha1.WakePhaseStarting, msg: "init container proxy not ready; container app not ready", pod: "p",
		},
		{
			name: "an init container not done",
			pods: []corev1.Pod{wokenTestPod("p", time.Second, scheduled, func(p *corev1.Pod) {
				p.Spec.InitContainers = []corev1.Container{{Name: "done"}, {Name: "migrate"}, {Name: "later"}}
				p.Status.InitContainerStatuses = []corev1.ContainerStatus{
					{Name: "done", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}},
					{Name: "migrate", State: running},
				}
			}, withContainer("app", waiting("PodInitializing", ""), false))},
			want: elastiv1alpha1.WakePhaseStarting, msg: "init container migrate running; container app waiting: PodInitializing", pod: "p",
		},
		{
			name: "containers ready, the pod not yet",
			pods: []corev1.Pod{wokenTestPod("p", time.Second, scheduled, withContainer("app", running, true),
				withCondition(corev1.PodReady, corev1.ConditionFalse, "ReadinessGatesNotReady", "corresponding condition of pod readiness gate \"lb\" does not exist."))},
			want: elastiv1alpha1.WakePhaseStarting, msg: `pod p is not Ready yet: corresponding condition of pod readiness gate "lb" does not exist.`, pod: "p",
		},
		{
			name: "scheduled without container statuses yet",
			pods: []corev1.Pod{wokenTestPod("p", time.Second, scheduled)},
			want: elastiv1alpha1.WakePhaseStarting, msg: "container app not started", pod: "p",
		},
		{
			name: "Ready",
			pods: []corev1.Pod{wokenTestPod("p", time.Second, scheduled, withContainer("app", running, true), readyCond)},
			want: elastiv1alpha1.WakePhaseReady, pod: "p",
		},
		{
			name: "the furthest pod wins",
			pods: []corev1.Pod{
				wokenTestPod("a", time.Second),
				wokenTestPod("b", 2*time.Second, scheduled, creating),
				wokenTestPod("c", 3*time.Second, scheduled, withContainer("app", running, false)),
			},
			events: []corev1.Event{pullEvent("b", eventReasonPulling, "example.com/app:1", 2*time.Second)},
			want:   elastiv1alpha1.WakePhaseStarting, msg: "container app not ready", pod: "c",
		},
		{
			name: "a tie goes to the pod created first",
			pods: []corev1.Pod{
				wokenTestPod("b", 2*time.Second, scheduled, creating),
				wokenTestPod("a", time.Second, scheduled, creating),
			},
			events: []corev1.Event{
				pullEvent("a", eventReasonPulling, "example.com/app:1", 2*time.Second),
				pullEvent("b", eventReasonPulling, "example.com/app:1", 3*time.Second),
			},
			want: elastiv1alpha1.WakePhasePullingImage, pod: "a",
		},
		{
			name: "a terminating Ready pod does not end the wake",
			pods: []corev1.Pod{
				wokenTestPod("going", 0, scheduled, readyCond, terminating),
				wokenTestPod("coming", time.Second),
			},
			want: elastiv1alpha1.WakePhaseScheduling, pod: "coming",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			phase, msg, pod := wakeProgressOf(tc.pods, tc.events, wakeAt)
			if phase != tc.want || pod != tc.pod || !strings.Contains(msg, tc.msg) {
				t.Errorf("wakeProgressOf = (%s, %q, %q), want (%s, containing %q, %q)", phase, msg, pod, tc.want, tc.msg, tc.pod)
			}
		})
	}
}

func TestPodsNeedingEvents(t *testing.T) {
	creating := withContainer("app", waiting("ContainerCreating", ""), false)
	cases := []struct {
		name string
		pods []corev1.Pod
		want []string
	}{
		{"none", nil, nil},
		{"an unscheduled pod", []corev1.Pod{wokenTestPod("a", 0)}, nil},
		{"a placed pod whose containers do not run", []corev1.Pod{wokenTestPod("a", 0), wokenTestPod("b", time.Second, scheduled, creating)}, []string{"b"}},
		{"not once another pod runs its containers", []corev1.Pod{
			wokenTestPod("a", 0, scheduled, creating), wokenTestPod("b", time.Second, scheduled, withContainer("app", running, false)),
		}, nil},
		{"not once another pod is Ready", []corev1.Pod{
			wokenTestPod("a", 0, scheduled, creating), wokenTestPod("b", time.Second, scheduled, readyCond),
		}, nil},
		{"not for an image-pull failure", []corev1.Pod{
			wokenTestPod("a", 0, scheduled, withContainer("app", waiting(waitingErrImagePull, "x"), false)),
		}, nil},
		{"not for old or terminating pods", []corev1.Pod{
			wokenTestPod("old", -time.Hour, scheduled, creating), wokenTestPod("going", 0, scheduled, creating, terminating),
		}, nil},
		{"at most maxEventLookups, oldest first", []corev1.Pod{
			wokenTestPod("e", 5*time.Second, scheduled, creating), wokenTestPod("d", 4*time.Second, scheduled, creating),
			wokenTestPod("c", 3*time.Second, scheduled, creating), wokenTestPod("b", 2*time.Second, scheduled, creating),
			wokenTestPod("a", time.Second, scheduled, creating),
		}, []string{"a", "b", "c"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, podsNeedingEvents(tc.pods, wakeAt)); diff != "" {
				t.Errorf("podsNeedingEvents (-want +got):\n%s", diff)
			}
		})
	}
}

// plan is the part of the reconciler's plan Next reads.
type plan struct {
	mode   elastiv1alpha1.Mode
	active string
}

func TestNextWakeProgress(t *testing.T) {
	now := wakeAt.Add(10 * time.Second)
	began := metav1.NewTime(wakeAt)
	pending := elastiv1alpha1.ElastiServiceStatus{Ledger: &elastiv1alpha1.Ledger{LastColdStart: &elastiv1alpha1.ColdStart{ScaleWriteTime: began}}}
	done := elastiv1alpha1.ElastiServiceStatus{Ledger: &elastiv1alpha1.Ledger{LastColdStart: &elastiv1alpha1.ColdStart{ScaleWriteTime: began, ReadyTime: &began}}}
	waking := plan{mode: elastiv1alpha1.ModeProxy, active: contract.ReasonWaking}
	starting := Observed{Pending: true, Began: wakeAt, Looked: true, Phase: elastiv1alpha1.WakePhaseStarting, Message: "container app not ready", Pod: "p"}
	earlier := metav1.NewTime(wakeAt.Add(3 * time.Second))
	cases := []struct {
		name string
		prev *elastiv1alpha1.WakeProgress
		st   elastiv1alpha1.ElastiServiceStatus
		w    Observed
		p    plan
		want *elastiv1alpha1.WakeProgress
	}{
		{
			name: "the wake's own reconcile: Scaling",
			st:   pending, w: Observed{Pending: true, Began: wakeAt}, p: waking,
			want: &elastiv1alpha1.WakeProgress{Phase: elastiv1alpha1.WakePhaseScaling, Message: MsgNoPod, StartTime: began, PhaseTime: metav1.NewTime(now)},
		},
		{
			name: "a new phase is stamped now",
			prev: &elastiv1alpha1.WakeProgress{Phase: elastiv1alpha1.WakePhaseScheduling, StartTime: began, PhaseTime: earlier},
			st:   pending, w: starting, p: waking,
			want: &elastiv1alpha1.WakeProgress{Phase: elastiv1alpha1.WakePhaseStarting, Message: "container app not ready", Pod: "p", StartTime: began, PhaseTime: metav1.NewTime(now)},
		},
		{
			name: "an unchanged phase keeps its time",
			prev: &elastiv1alpha1.WakeProgress{Phase: elastiv1alpha1.WakePhaseStarting, Message: "container app not ready", Pod: "p", StartTime: began, PhaseTime: earlier},
			st:   pending, w: starting, p: waking,
			want: &elastiv1alpha1.WakeProgress{Phase: elastiv1alpha1.WakePhaseStarting, Message: "container app not ready", Pod: "p", StartTime: began, PhaseTime: earlier},
		},
		{
			name: "serve mode clears it",
			prev: &elastiv1alpha1.WakeProgress{Phase: elastiv1alpha1.WakePhaseReady, StartTime: began, PhaseTime: earlier},
			st:   pending, w: starting, p: plan{mode: elastiv1alpha1.ModeServe, active: contract.ReasonServing},
		},
		{
			name: "at zero clears it",
			prev: &elastiv1alpha1.WakeProgress{Phase: elastiv1alpha1.WakePhaseStarting, StartTime: began, PhaseTime: earlier},
			st:   pending, p: plan{mode: elastiv1alpha1.ModeProxy, active: contract.ReasonScaledToZero},
		},
		{
			name: "a scale-down grace period has none",
			st:   pending, w: starting, p: plan{mode: elastiv1alpha1.ModeProxy, active: contract.ReasonScalingDown},
		},
		{
			name: "no wake from zero pending: none",
			st:   done, w: starting, p: waking,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Next(tc.prev, tc.st, tc.w, tc.p.mode, tc.p.active, now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Next (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTruncateMessage(t *testing.T) {
	long := strings.Repeat("é", maxWakeMessage)
	got := TruncateMessage(long)
	if len(got) > maxWakeMessage || !strings.HasSuffix(got, "...") || !strings.HasPrefix(long, strings.TrimSuffix(got, "...")) {
		t.Errorf("TruncateMessage: %d bytes, %q...", len(got), got[:10])
	}
	if got := TruncateMessage("short"); got != "short" {
		t.Errorf("TruncateMessage(short) = %q", got)
	}
}

func TestWakeProgressScalingMessage(t *testing.T) {
	if diff := cmp.Diff(MsgNoPod, scalingMessage("")); diff != "" {
		t.Errorf("no reason (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(MsgPodsNotCreated+quotaMsg, scalingMessage(quotaMsg)); diff != "" {
		t.Errorf("a reason (-want +got):\n%s", diff)
	}
	if got := scalingMessage(strings.Repeat("x", 2*maxWakeMessage)); len(got) != maxWakeMessage || !strings.HasPrefix(got, MsgPodsNotCreated) {
		t.Errorf("a long reason: %d bytes, want %d starting with %q", len(got), maxWakeMessage, MsgPodsNotCreated)
	}
}
