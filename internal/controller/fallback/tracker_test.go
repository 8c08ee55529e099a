package fallback

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
)

// recorded is one Event a recorder was given.
type recorded struct{ eventtype, reason, note string }

type recorder struct{ events []recorded }

func (r *recorder) Eventf(_ runtime.Object, _ runtime.Object, eventtype, reason, _, note string, args ...interface{}) {
	r.events = append(r.events, recorded{eventtype, reason, fmt.Sprintf(note, args...)})
}

// waking is an ElastiService in proxy mode whose wake began at wakeAt,
// with a fallback to web-static after 30s.
func waking() *elastiv1alpha1.ElastiService {
	es := &elastiv1alpha1.ElastiService{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ai", Name: "web", Generation: 3},
		Spec: elastiv1alpha1.ElastiServiceSpec{Service: "web", Proxy: &elastiv1alpha1.ProxySpec{
			Fallback: &elastiv1alpha1.Fallback{Service: "web-static", After: "30s"},
		}},
	}
	es.Status.Mode = elastiv1alpha1.ModeProxy
	meta.SetStatusCondition(&es.Status.Conditions, metav1.Condition{
		Type: elastiv1alpha1.ConditionActive, Status: metav1.ConditionTrue, Reason: contract.ReasonWaking, LastTransitionTime: metav1.NewTime(wakeAt),
	})
	return es
}

// fallbackService is web-static, with an endpoint when ready.
func fallbackService(ready bool) []client.Object {
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ai", Name: "web-static-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web-static"}}}
	if ready {
		s.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}
	}
	return []client.Object{&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ai", Name: "web-static"}}, s}
}

func newTracker(t *testing.T, objs ...client.Object) (*Tracker, client.Client, *recorder) {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := elastiv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithStatusSubresource(&elastiv1alpha1.ElastiService{}).Build()
	rec := &recorder{}
	return &Tracker{Services: c, Status: c, Recorder: rec}, c, rec
}

func TestTrackerObserve(t *testing.T) {
	ctx := context.Background()
	unschedulablePod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1"}, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available",
	}}}}
	inProgress := Wake{InProgress: true, Pods: []corev1.Pod{unschedulablePod}, NotCreated: quotaMsg}
	for _, tc := range []struct {
		name string
		es   func() *elastiv1alpha1.ElastiService
		objs []client.Object
		w    Wake
		want Observed
	}{
		{"no fallback", func() *elastiv1alpha1.ElastiService { es := waking(); es.Spec.Proxy = nil; return es }, nil, inProgress, Observed{}},
		{"an unparsable after is no fallback", func() *elastiv1alpha1.ElastiService {
			es := waking()
			es.Spec.Proxy.Fallback.After = "soon"
			return es
		}, nil, inProgress, Observed{}},
		{"not waking: nothing read", waking, nil, Wake{}, Observed{After: 30 * time.Second, Service: "web-static"}},
		{"waking, fallback ready", waking, fallbackService(true), inProgress, Observed{
			After: 30 * time.Second, Service: "web-static", Waking: true, WokeAt: wakeAt, ServiceFound: true, Ready: true,
			NotCreated: quotaMsg, Unschedulable: "pod web-1: 0/3 nodes are available",
		}},
		{"waking, fallback without endpoint", waking, fallbackService(false), Wake{InProgress: true}, Observed{
			After: 30 * time.Second, Service: "web-static", Waking: true, WokeAt: wakeAt, ServiceFound: true,
		}},
		{"waking, no fallback Service", waking, nil, Wake{InProgress: true}, Observed{
			After: 30 * time.Second, Service: "web-static", Waking: true, WokeAt: wakeAt,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, _, _ := newTracker(t, tc.objs...)
			got, err := tr.Observe(ctx, tc.es(), tc.w)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("Observe = %+v\nwant      %+v", got, tc.want)
			}
		})
	}
}

// TestReportRefusedWake: a refused scale write turns FallbackActive True
// with ScaleRefused at once, with its Event, even before the target has a
// replica; a second refusal writes and says nothing new; a wake that goes
// through forgets the refusal.
func TestReportRefusedWake(t *testing.T) {
	ctx := context.Background()
	es := waking()
	tr, c, rec := newTracker(t, append(fallbackService(true), es)...)
	refusal := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", errors.New("denied by policy"))
	if !ScaleRefusal(refusal) || ScaleRefusal(errors.New("connection refused")) {
		t.Fatal("ScaleRefusal: a forbidden write is a refusal, a failure to answer is not")
	}

	now := wakeAt.Add(time.Second)
	if err := tr.ReportRefusedWake(ctx, es, Wake{}, now, refusal); err != nil {
		t.Fatal(err)
	}
	got := &elastiv1alpha1.ElastiService{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(es), got); err != nil {
		t.Fatal(err)
	}
	cond := meta.FindStatusCondition(got.Status.Conditions, elastiv1alpha1.ConditionFallbackActive)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != ReasonScaleRefused || !strings.Contains(cond.Message, "denied by policy") || cond.ObservedGeneration != 3 {
		t.Fatalf("FallbackActive %+v, want True %s quoting the refusal, generation 3", cond, ReasonScaleRefused)
	}
	if len(rec.events) != 1 || rec.events[0].reason != EventActive || rec.events[0].eventtype != corev1.EventTypeWarning ||
		!strings.HasPrefix(rec.events[0].note, ReasonScaleRefused+": ") {
		t.Fatalf("Events %+v, want one Warning %s naming %s", rec.events, EventActive, ReasonScaleRefused)
	}

	if err := tr.ReportRefusedWake(ctx, got, Wake{}, now.Add(time.Second), refusal); err != nil {
		t.Fatal(err)
	}
	if len(rec.events) != 1 {
		t.Errorf("a second refusal recorded %d Events, want none new", len(rec.events)-1)
	}

	tr.Woke(client.ObjectKeyFromObject(es))
	if f, err := tr.Observe(ctx, got, Wake{}); err != nil || f.Refused != "" || f.Waking {
		t.Errorf("after a wake went through: %+v (%v), want no refusal and not waking", f, err)
	}
}

// creations answers CreationReader with one Creation.
type creations Creation

func (c creations) Creation(context.Context, string, elastiv1alpha1.ScaleTargetRef) Creation {
	return Creation(c)
}

// events answers Lister with Events, and counts the lists.
type events struct {
	items []corev1.Event
	lists int
	err   error
}

func (e *events) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	e.lists++
	if e.err != nil {
		return e.err
	}
	list.(*corev1.EventList).Items = e.items
	return nil
}

func TestNotCreated(t *testing.T) {
	ctx := context.Background()
	target := func(kind string) *elastiv1alpha1.ElastiService {
		es := waking()
		es.Spec.ScaleTargetRef = elastiv1alpha1.ScaleTargetRef{APIVersion: "apps/v1", Kind: kind, Name: "web"}
		return es
	}
	failing := CreationOf(deploymentWithConditions(map[string]any{
		"type": "ReplicaFailure", "status": "True", "reason": "FailedCreate", "message": quotaMsg, "lastTransitionTime": wakeAt.Add(time.Second).Format(time.RFC3339),
	}))
	failedCreateEvent := corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "web.1"},
		InvolvedObject: corev1.ObjectReference{Kind: "StatefulSet", Name: "web"},
		Type:           corev1.EventTypeWarning, Reason: eventReasonFailedCreate, Message: quotaMsg, LastTimestamp: metav1.NewTime(wakeAt.Add(time.Second)),
	}
	woken := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", CreationTimestamp: metav1.NewTime(wakeAt.Add(time.Second))}}
	for _, tc := range []struct {
		name      string
		es        *elastiv1alpha1.ElastiService
		creation  Creation
		events    *events
		pods      []corev1.Pod
		listed    bool
		want      string
		wantLists int
	}{
		{"pods not listed: no wake in progress", target("Deployment"), failing, &events{}, nil, false, "", 0},
		{"a pod of the wake exists", target("Deployment"), failing, &events{}, []corev1.Pod{woken}, true, "", 0},
		{"ReplicaFailure", target("Deployment"), failing, &events{}, nil, true, quotaMsg, 0},
		{"a Deployment without it: no Event list", target("Deployment"), Creation{}, &events{items: []corev1.Event{failedCreateEvent}}, nil, true, "", 0},
		{"a StatefulSet's FailedCreate Event", target("StatefulSet"), Creation{}, &events{items: []corev1.Event{failedCreateEvent}}, nil, true, quotaMsg, 1},
		{"a refused Event list says nothing", target("StatefulSet"), Creation{}, &events{err: errors.New("forbidden")}, nil, true, "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &Tracker{Targets: creations(tc.creation), Events: tc.events}
			if got := tr.NotCreated(ctx, tc.es, tc.pods, tc.listed); got != tc.want {
				t.Errorf("NotCreated = %q, want %q", got, tc.want)
			}
			if tc.events.lists != tc.wantLists {
				t.Errorf("%d Event lists, want %d", tc.events.lists, tc.wantLists)
			}
		})
	}
}
