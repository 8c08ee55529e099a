package wakeprogress

import (
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/ledger"
)

// status.wakeProgress says how far a wake from zero has got, for the
// resolvers' waking page. It is read from the target's pods (conditions and
// container states) and their Events, never from a timer; while no pod
// exists, from what the target says of the pods its controller cannot
// create (fallback.Tracker.NotCreated, in package fallback).
// It exists while decide keeps the ElastiService in proxy mode with
// Active=Waking and the ledger's cold start (package ledger) is pending:
// from the wake's own status write (Scaling) until the reconcile that sees the Service's own ready endpoint, which
// switches to serve and clears it. Phase Ready therefore shows only between
// a pod's readiness and its endpoint's. At zero, in serve mode and when the
// ElastiService stands down it is unset.

// RecheckInterval is how often a reconcile comes back while a wake's
// progress is short of Ready: the target's pods are not watched, and an
// image pull changes no pod field at all.
const RecheckInterval = time.Second

// maxEventLookups bounds the pods whose Events one reconcile lists. A pod
// beyond it that is pulling an image shows as Starting.
const maxEventLookups = 3

// maxWakeMessage is status.wakeProgress.message's length limit in the CRD.
const maxWakeMessage = 1024

// Event reasons of the kubelet's image pulls.
const (
	eventReasonPulling = "Pulling"
	eventReasonPulled  = "Pulled"
)

// Container waiting reasons of a failed image pull (the kubelet's
// images.ErrImagePull and images.ErrImagePullBackOff).
const (
	waitingErrImagePull     = "ErrImagePull"
	waitingImagePullBackOff = "ImagePullBackOff"
)

// MsgNoPod is the Scaling phase's message while the workload controller
// gives no reason for the missing pod.
const MsgNoPod = "waiting for the workload controller to create a pod"

// MsgPodsNotCreated leads the workload controller's own message of why it
// creates no pod, in the Scaling phase's message and in the operator's
// FallbackActive condition.
const MsgPodsNotCreated = "the workload controller cannot create pods: "

// scalingMessage is the Scaling phase's message: why the workload
// controller creates no pod, when it says (fallback.Tracker.NotCreated).
func scalingMessage(notCreated string) string {
	if notCreated == "" {
		return MsgNoPod
	}
	return TruncateMessage(MsgPodsNotCreated + notCreated)
}

// Observed is what status.wakeProgress is derived from.
type Observed struct {
	// Pending: a wake from zero is in progress (the ledger's cold start
	// is pending), or this reconcile's status write begins one.
	Pending bool
	// Began is the wake's scale write; pods created before it (less
	// ledger.ClockSkew) are not the wake's.
	Began time.Time
	// Looked: the target's pods were listed; the phase, its message and
	// the pod it was read from follow.
	Looked       bool
	Phase        elastiv1alpha1.WakePhase
	Message, Pod string
}

// wakePhaseRank orders the phases: a pod further along ranks higher.
var wakePhaseRank = map[elastiv1alpha1.WakePhase]int{
	elastiv1alpha1.WakePhaseScaling:      0,
	elastiv1alpha1.WakePhaseScheduling:   1,
	elastiv1alpha1.WakePhasePullingImage: 2,
	elastiv1alpha1.WakePhaseStarting:     3,
	elastiv1alpha1.WakePhaseReady:        4,
}

// wakeProgressOf is the phase of the wake that began at wake, read from the
// pod furthest along among the target's pods created at or after it (less
// ledger.ClockSkew: the wake is stamped by the operator's clock, creation by the
// API server's) and not terminating: the pods of the previous awake period
// may still be on their way out. Ties go to the pod created first. events
// are the Events of the pods podsNeedingEvents named.
func wakeProgressOf(pods []corev1.Pod, events []corev1.Event, wake time.Time) (phase elastiv1alpha1.WakePhase, message, pod string) {
	phase, message = elastiv1alpha1.WakePhaseScaling, MsgNoPod
	for _, p := range WokenCandidates(pods, wake) {
		ph, msg := podWakePhase(p, events)
		if pod == "" || wakePhaseRank[ph] > wakePhaseRank[phase] {
			phase, message, pod = ph, msg, p.Name
		}
	}
	return phase, TruncateMessage(message), pod
}

// WokenCandidates are the pods a wake at wake may have created, oldest
// first.
func WokenCandidates(pods []corev1.Pod, wake time.Time) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil || p.CreationTimestamp.Time.Before(wake.Add(-ledger.ClockSkew)) {
			continue
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if a, b := out[i].CreationTimestamp.Time, out[j].CreationTimestamp.Time; !a.Equal(b) {
			return a.Before(b)
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// podsNeedingEvents names the candidate pods whose phase depends on their
// Events: placed, not Ready, no image-pull failure, and containers not all
// running. A Pulling Event can only hold a pod back (PullingImage ranks
// below Starting), so none is needed once another candidate is Starting or
// Ready on its own. At most maxEventLookups, oldest first.
func podsNeedingEvents(pods []corev1.Pod, wake time.Time) []string {
	var names []string
	for _, p := range WokenCandidates(pods, wake) {
		ph, _ := podWakePhase(p, nil)
		switch {
		case ph == elastiv1alpha1.WakePhaseStarting && !allContainersRunning(p):
			names = append(names, p.Name)
		case wakePhaseRank[ph] >= wakePhaseRank[elastiv1alpha1.WakePhaseStarting]:
			return nil
		}
	}
	if len(names) > maxEventLookups {
		names = names[:maxEventLookups]
	}
	return names
}

// podWakePhase is one pod's phase and what it waits for.
func podWakePhase(pod *corev1.Pod, events []corev1.Event) (elastiv1alpha1.WakePhase, string) {
	if c := podCondition(pod, corev1.PodReady); c != nil && c.Status == corev1.ConditionTrue {
		return elastiv1alpha1.WakePhaseReady, "pod " + pod.Name + " is Ready; the Service routes to it once its EndpointSlices list it"
	}
	if c := podCondition(pod, corev1.PodScheduled); c == nil || c.Status != corev1.ConditionTrue {
		if c != nil && c.Reason == corev1.PodReasonUnschedulable && c.Message != "" {
			return elastiv1alpha1.WakePhaseScheduling, c.Message
		}
		return elastiv1alpha1.WakePhaseScheduling, "waiting for the scheduler to place pod " + pod.Name
	}
	if msg := imagePullFailure(pod); msg != "" {
		return elastiv1alpha1.WakePhasePullingImage, msg
	}
	if !allContainersRunning(pod) {
		if e := pendingPull(pod, events); e != nil {
			return elastiv1alpha1.WakePhasePullingImage, e.Message
		}
	}
	return elastiv1alpha1.WakePhaseStarting, notReadyMessage(pod)
}

func podCondition(pod *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == typ {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// imagePullFailure words the first container whose image the kubelet
// failed to pull; "" when there is none.
func imagePullFailure(pod *corev1.Pod) string {
	for _, s := range append(append([]corev1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		w := s.State.Waiting
		if w == nil || (w.Reason != waitingErrImagePull && w.Reason != waitingImagePullBackOff) {
			continue
		}
		msg := w.Message
		if msg == "" {
			msg = fmt.Sprintf("image %q", s.Image)
		}
		return fmt.Sprintf("%s: %s", w.Reason, msg)
	}
	return ""
}

// allContainersRunning reports whether every container of the pod's spec
// runs.
func allContainersRunning(pod *corev1.Pod) bool {
	running := map[string]bool{}
	for _, s := range pod.Status.ContainerStatuses {
		running[s.Name] = s.State.Running != nil
	}
	for _, c := range pod.Spec.Containers {
		if !running[c.Name] {
			return false
		}
	}
	return len(pod.Spec.Containers) > 0
}

// pendingPull is the latest Pulling Event of the pod with no Pulled at or
// after it for the same container (its fieldPath, or the image the
// messages quote when there is none), and whose container has not started
// since; nil when there is none. An Event names the pod by UID, or by name
// when it carries none.
func pendingPull(pod *corev1.Pod, events []corev1.Event) *corev1.Event {
	pulling := map[string]*corev1.Event{}
	pulled := map[string]time.Time{}
	for i := range events {
		e := &events[i]
		if !eventOfPod(e, pod) {
			continue
		}
		key, at := pullKey(e), EventTime(e)
		switch e.Reason {
		case eventReasonPulling:
			if prev, ok := pulling[key]; !ok || at.After(EventTime(prev)) {
				pulling[key] = e
			}
		case eventReasonPulled:
			if at.After(pulled[key]) {
				pulled[key] = at
			}
		}
	}
	var latest *corev1.Event
	for key, e := range pulling {
		if at := EventTime(e); !at.After(pulled[key]) || containerStarted(pod, e.InvolvedObject.FieldPath) {
			continue
		}
		if latest == nil || EventTime(e).After(EventTime(latest)) ||
			(EventTime(e).Equal(EventTime(latest)) && e.Name < latest.Name) {
			latest = e
		}
	}
	return latest
}

func eventOfPod(e *corev1.Event, pod *corev1.Pod) bool {
	o := e.InvolvedObject
	if o.Kind != "" && o.Kind != "Pod" {
		return false
	}
	if o.UID != "" && pod.UID != "" {
		return o.UID == pod.UID
	}
	return o.Name == pod.Name
}

// pullKey names the container an image-pull Event is about: its fieldPath
// (spec.containers{app}), else the first quoted string of its message, the
// image.
func pullKey(e *corev1.Event) string {
	if e.InvolvedObject.FieldPath != "" {
		return e.InvolvedObject.FieldPath
	}
	if _, rest, ok := strings.Cut(e.Message, `"`); ok {
		if image, _, ok := strings.Cut(rest, `"`); ok {
			return image
		}
	}
	return ""
}

// EventTime is when an Event last happened.
func EventTime(e *corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

// containerStarted reports whether the container a fieldPath names
// (spec.containers{app}, spec.initContainers{init}) runs or has run.
func containerStarted(pod *corev1.Pod, fieldPath string) bool {
	statuses := pod.Status.ContainerStatuses
	name, ok := strings.CutPrefix(fieldPath, "spec.containers{")
	if !ok {
		if name, ok = strings.CutPrefix(fieldPath, "spec.initContainers{"); !ok {
			return false
		}
		statuses = pod.Status.InitContainerStatuses
	}
	name = strings.TrimSuffix(name, "}")
	for _, s := range statuses {
		if s.Name == name {
			return s.State.Running != nil || s.State.Terminated != nil
		}
	}
	return false
}

// notReadyMessage says which containers keep a placed pod from Ready: the
// first init container not done, sidecars and containers not ready.
func notReadyMessage(pod *corev1.Pod) string {
	initStatus, status := map[string]corev1.ContainerStatus{}, map[string]corev1.ContainerStatus{}
	for _, s := range pod.Status.InitContainerStatuses {
		initStatus[s.Name] = s
	}
	for _, s := range pod.Status.ContainerStatuses {
		status[s.Name] = s
	}
	var parts []string
	for _, c := range pod.Spec.InitContainers {
		s, ok := initStatus[c.Name]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			if !ok || !s.Ready {
				parts = append(parts, containerWaitsFor("init container", c.Name, s, ok, "not ready"))
			}
			continue
		}
		if ok && s.State.Terminated != nil && s.State.Terminated.ExitCode == 0 {
			continue
		}
		parts = append(parts, containerWaitsFor("init container", c.Name, s, ok, "running"))
		break
	}
	for _, c := range pod.Spec.Containers {
		if s, ok := status[c.Name]; !ok || !s.Ready {
			parts = append(parts, containerWaitsFor("container", c.Name, s, ok, "not ready"))
		}
	}
	if len(parts) > 0 {
		return strings.Join(parts, "; ")
	}
	msg := "pod " + pod.Name + " is not Ready yet"
	if c := podCondition(pod, corev1.PodReady); c != nil && c.Message != "" {
		msg += ": " + c.Message
	}
	return msg
}

// containerWaitsFor words what one container waits for; running is what a
// running container is said to be.
func containerWaitsFor(kind, name string, s corev1.ContainerStatus, ok bool, running string) string {
	switch {
	case !ok:
		return fmt.Sprintf("%s %s not started", kind, name)
	case s.State.Waiting != nil && s.State.Waiting.Reason != "":
		return fmt.Sprintf("%s %s waiting: %s", kind, name, s.State.Waiting.Reason)
	case s.State.Terminated != nil:
		return fmt.Sprintf("%s %s terminated: %s (exit code %d)", kind, name, s.State.Terminated.Reason, s.State.Terminated.ExitCode)
	case s.State.Running != nil:
		return fmt.Sprintf("%s %s %s", kind, name, running)
	}
	return fmt.Sprintf("%s %s not started", kind, name)
}

// TruncateMessage keeps a message within the CRD's limit, on a rune
// boundary.
func TruncateMessage(s string) string {
	if len(s) <= maxWakeMessage {
		return s
	}
	s = s[:maxWakeMessage-len("...")]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "..."
}

// ColdStartBegan is the scale write of the ledger's pending cold start: the
// wake from zero in progress. ok is false when none is pending.
func ColdStartBegan(l *elastiv1alpha1.Ledger) (began time.Time, ok bool) {
	if l == nil || !ledger.PendingColdStart(l) {
		return time.Time{}, false
	}
	return l.LastColdStart.ScaleWriteTime.Time, true
}

// Next is status.wakeProgress after a reconcile: st is the
// status about to be written (its ledger already updated), prev the
// progress it had. The phase comes from the pods observe read, or is
// Scaling when they were not read (the wake is this reconcile's own). An
// unchanged phase keeps its phaseTime, so that it costs no status write.
func Next(prev *elastiv1alpha1.WakeProgress, st elastiv1alpha1.ElastiServiceStatus, w Observed, mode elastiv1alpha1.Mode, active string, now time.Time) *elastiv1alpha1.WakeProgress {
	if mode != elastiv1alpha1.ModeProxy || active != contract.ReasonWaking {
		return nil
	}
	began, ok := ColdStartBegan(st.Ledger)
	if !ok {
		return nil
	}
	next := &elastiv1alpha1.WakeProgress{
		Phase: elastiv1alpha1.WakePhaseScaling, Message: MsgNoPod,
		StartTime: metav1.NewTime(began), PhaseTime: metav1.NewTime(now),
	}
	if w.Looked {
		next.Phase, next.Message, next.Pod = w.Phase, w.Message, w.Pod
	}
	if prev != nil && prev.Phase == next.Phase {
		next.PhaseTime = prev.PhaseTime
	}
	return next
}

// Recheck is when a reconcile comes back to read a wake's pods again:
// every RecheckInterval while its progress is short of Ready; 0 when
// there is no progress to follow.
func Recheck(w Observed, mode elastiv1alpha1.Mode, active string) time.Duration {
	if !w.Pending || mode != elastiv1alpha1.ModeProxy || active != contract.ReasonWaking ||
		(w.Looked && w.Phase == elastiv1alpha1.WakePhaseReady) {
		return 0
	}
	return RecheckInterval
}
