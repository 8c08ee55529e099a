package fallback

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
)

// wakeAt is the scale write of the wake the tests observe.
var wakeAt = time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)

const quotaMsg = `pods "web-7d9f8-abcde" is forbidden: exceeded quota: compute, requested: requests.cpu=2, used: requests.cpu=8, limited: requests.cpu=8`

// deploymentWithConditions is a Deployment as the API server serves it to
// an unstructured read: times are RFC 3339 strings.
func deploymentWithConditions(conds ...map[string]any) *unstructured.Unstructured {
	list := make([]any, 0, len(conds))
	for _, c := range conds {
		list = append(list, c)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "ai", "uid": "web-uid"},
		"status":   map[string]any{"conditions": list},
	}}
	return u
}

func TestFallbackReplicaFailure(t *testing.T) {
	at := func(d time.Duration) string { return wakeAt.Add(d).Format(time.RFC3339) }
	failure := func(transition string) map[string]any {
		return map[string]any{
			"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": quotaMsg,
			"lastTransitionTime": transition, "lastUpdateTime": transition,
		}
	}
	progressing := map[string]any{"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable", "lastTransitionTime": at(-time.Hour)}
	for _, tc := range []struct {
		name  string
		u     *unstructured.Unstructured
		since time.Time
		want  string
	}{
		{"since the wake", deploymentWithConditions(progressing, failure(at(3*time.Second))), wakeAt, quotaMsg},
		{"within the clock skew before the wake", deploymentWithConditions(failure(at(-4 * time.Second))), wakeAt, quotaMsg},
		{"older than the wake", deploymentWithConditions(failure(at(-time.Hour))), wakeAt, ""},
		{"older, wake unknown", deploymentWithConditions(failure(at(-time.Hour))), time.Time{}, quotaMsg},
		{"lastUpdateTime when no lastTransitionTime", deploymentWithConditions(map[string]any{
			"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": quotaMsg, "lastUpdateTime": at(time.Second),
		}), wakeAt, quotaMsg},
		{"undated", deploymentWithConditions(map[string]any{"type": "ReplicaFailure", "status": "True", "message": quotaMsg}), wakeAt, ""},
		{"False", deploymentWithConditions(map[string]any{"type": "ReplicaFailure", "status": "False", "message": quotaMsg, "lastTransitionTime": at(time.Second)}), wakeAt, ""},
		{"no message", deploymentWithConditions(map[string]any{"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "lastTransitionTime": at(time.Second)}), wakeAt, "ReplicaFailure=True, reason FailedCreate"},
		{"no conditions", deploymentWithConditions(), wakeAt, ""},
		{"a malformed condition is skipped", deploymentWithConditions(map[string]any{"type": "ReplicaFailure", "status": "True", "lastTransitionTime": int64(42)}, failure(at(time.Second))), wakeAt, quotaMsg},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc2 := CreationOf(tc.u)
			if tc2.uid != "web-uid" {
				t.Errorf("uid %q, want web-uid", tc2.uid)
			}
			if got := replicaFailure(tc2, tc.since); got != tc.want {
				t.Errorf("replicaFailure = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFallbackFailedCreateEvent(t *testing.T) {
	ev := func(name, typ, reason, kind, objName string, uid types.UID, at time.Duration, msg string) corev1.Event {
		return corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: name},
			InvolvedObject: corev1.ObjectReference{Kind: kind, Name: objName, UID: uid},
			Type:           typ, Reason: reason, Message: msg, LastTimestamp: metav1.NewTime(wakeAt.Add(at)),
		}
	}
	const stsMsg = `create Pod web-0 in StatefulSet web failed error: ` + `pods "web-0" is forbidden: exceeded quota: compute`
	warn, sts := corev1.EventTypeWarning, "StatefulSet"
	for _, tc := range []struct {
		name   string
		events []corev1.Event
		since  time.Time
		want   string
	}{
		{"none", nil, wakeAt, ""},
		{"since the wake", []corev1.Event{ev("a", warn, eventReasonFailedCreate, sts, "web", "web-uid", 2*time.Second, stsMsg)}, wakeAt, stsMsg},
		{"older than the wake", []corev1.Event{ev("a", warn, eventReasonFailedCreate, sts, "web", "web-uid", -time.Hour, stsMsg)}, wakeAt, ""},
		{"older, wake unknown", []corev1.Event{ev("a", warn, eventReasonFailedCreate, sts, "web", "web-uid", -time.Hour, stsMsg)}, time.Time{}, stsMsg},
		{"the latest", []corev1.Event{
			ev("a", warn, eventReasonFailedCreate, sts, "web", "web-uid", 2*time.Second, "first"),
			ev("b", warn, eventReasonFailedCreate, sts, "web", "web-uid", 9*time.Second, "latest"),
			ev("c", warn, eventReasonFailedCreate, sts, "web", "web-uid", 5*time.Second, "middle"),
		}, wakeAt, "latest"},
		{"a tie goes to the first name", []corev1.Event{
			ev("b", warn, eventReasonFailedCreate, sts, "web", "web-uid", 2*time.Second, "b"),
			ev("a", warn, eventReasonFailedCreate, sts, "web", "web-uid", 2*time.Second, "a"),
		}, wakeAt, "a"},
		{"not a Warning", []corev1.Event{ev("a", corev1.EventTypeNormal, eventReasonFailedCreate, sts, "web", "web-uid", time.Second, stsMsg)}, wakeAt, ""},
		{"another reason", []corev1.Event{ev("a", warn, "SuccessfulCreate", sts, "web", "web-uid", time.Second, stsMsg)}, wakeAt, ""},
		{"another object", []corev1.Event{
			ev("a", warn, eventReasonFailedCreate, sts, "api", "api-uid", time.Second, stsMsg),
			ev("b", warn, eventReasonFailedCreate, "ReplicaSet", "web", "rs-uid", time.Second, stsMsg),
		}, wakeAt, ""},
		{"a previous object of the same name", []corev1.Event{ev("a", warn, eventReasonFailedCreate, sts, "web", "old-uid", time.Second, stsMsg)}, wakeAt, ""},
		{"an Event without UID", []corev1.Event{ev("a", warn, eventReasonFailedCreate, sts, "web", "", time.Second, stsMsg)}, wakeAt, stsMsg},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := failedCreate(tc.events, sts, "web", "web-uid", tc.since); got != tc.want {
				t.Errorf("failedCreate = %q, want %q", got, tc.want)
			}
		})
	}
}

// An Event of the events.k8s.io API (wakeprogress.EventTime and a series) is dated by
// its series' last observation.
func TestFallbackFailedCreateEventSeries(t *testing.T) {
	e := corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "a"},
		InvolvedObject: corev1.ObjectReference{Kind: "StatefulSet", Name: "web"},
		Type:           corev1.EventTypeWarning, Reason: eventReasonFailedCreate, Message: "forbidden",
		EventTime: metav1.NewMicroTime(wakeAt.Add(-time.Hour)),
		Series:    &corev1.EventSeries{Count: 40, LastObservedTime: metav1.NewMicroTime(wakeAt.Add(time.Second))},
	}
	if got := failedCreate([]corev1.Event{e}, "StatefulSet", "web", "", wakeAt); got != "forbidden" {
		t.Errorf("failedCreate = %q, want the series' Event", got)
	}
}

func TestFallbackWakeBegan(t *testing.T) {
	waking := elastiv1alpha1.ElastiService{Status: elastiv1alpha1.ElastiServiceStatus{Conditions: []metav1.Condition{{
		Type: elastiv1alpha1.ConditionActive, Status: metav1.ConditionTrue, Reason: contract.ReasonWaking, LastTransitionTime: metav1.NewTime(wakeAt.Add(time.Second)),
	}}}}
	if got := wakeBegan(&waking); !got.Equal(wakeAt.Add(time.Second)) {
		t.Errorf("without a ledger: %s, want the turn to Waking", got)
	}
	withLedger := waking.DeepCopy()
	withLedger.Status.Ledger = &elastiv1alpha1.Ledger{LastColdStart: &elastiv1alpha1.ColdStart{ScaleWriteTime: metav1.NewTime(wakeAt)}}
	if got := wakeBegan(withLedger); !got.Equal(wakeAt) {
		t.Errorf("with a pending cold start: %s, want its scale write", got)
	}
	if got := wakeBegan(&elastiv1alpha1.ElastiService{}); !got.IsZero() {
		t.Errorf("serving: %s, want zero", got)
	}
}
