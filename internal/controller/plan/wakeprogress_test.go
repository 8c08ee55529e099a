package plan

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/fallback"
	"elasti.dev/elasti/internal/controller/wakeprogress"
)

var wakeAt = time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)

// TestDecideWakeRecheck: a wake from zero short of Ready comes back after
// wakeprogress.RecheckInterval, never later than another requeue asks for, and not
// at all once a pod is Ready or outside a wake.
func TestDecideWakeRecheck(t *testing.T) {
	now := wakeAt
	waking := func(w wakeprogress.Observed) Observed {
		return Observed{
			Now:       now,
			Phase:     PhaseWaking,
			Resolvers: 1,
			Service:   ServiceObserved{Found: true, Ports: []elastiv1alpha1.ProxyPort{{Name: "http", Port: 80, ResolverPort: 20000}}},
			Target:    TargetObserved{Found: true, Replicas: 1},
			Concerns:  ConcernsObserved{Progress: w},
		}
	}
	pulling := wakeprogress.Observed{Pending: true, Began: now, Looked: true, Phase: elastiv1alpha1.WakePhasePullingImage}
	cases := []struct {
		name string
		o    Observed
		want time.Duration
	}{
		{"pulling", waking(pulling), wakeprogress.RecheckInterval},
		{"the wake's own reconcile", waking(wakeprogress.Observed{Pending: true, Began: now}), wakeprogress.RecheckInterval},
		{"a pod is Ready: the endpoint's slice is watched", waking(wakeprogress.Observed{Pending: true, Began: now, Looked: true, Phase: elastiv1alpha1.WakePhaseReady}), 0},
		{"no wake from zero", waking(wakeprogress.Observed{}), 0},
		{"a sooner fallback deadline stays", func() Observed {
			o := waking(pulling)
			o.Concerns.Fallback = fallback.Observed{After: 30 * time.Second, Waking: true, WokeAt: now.Add(-30*time.Second + 200*time.Millisecond)}
			return o
		}(), 200 * time.Millisecond},
		{"the fallback's 5 s recheck gives way", func() Observed {
			o := waking(pulling)
			o.Concerns.Fallback = fallback.Observed{After: time.Hour, Waking: true, WokeAt: now}
			return o
		}(), wakeprogress.RecheckInterval},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := Decide(tc.o)
			if p.Mode != elastiv1alpha1.ModeProxy || p.Active != contract.ReasonWaking {
				t.Fatalf("plan %+v: want proxy mode, Waking", p)
			}
			if p.RequeueAfter != tc.want {
				t.Errorf("requeueAfter = %s, want %s", p.RequeueAfter, tc.want)
			}
		})
	}
}

// TestDesiredStatusWakeProgress: the status written at a wake from zero
// carries Scaling from the ledger's new cold start, and a later reconcile
// that finds nothing new writes nothing.
func TestDesiredStatusWakeProgress(t *testing.T) {
	es := &elastiv1alpha1.ElastiService{Spec: elastiv1alpha1.ElastiServiceSpec{Service: "web", MinTargetReplicas: 1}}
	es.Status.Mode = elastiv1alpha1.ModeProxy
	meta.SetStatusCondition(&es.Status.Conditions, metav1.Condition{Type: elastiv1alpha1.ConditionActive, Status: metav1.ConditionFalse, Reason: contract.ReasonScaledToZero})
	o := Observed{
		Now:       wakeAt,
		Phase:     PhaseProxy,
		Resolvers: 1,
		Service:   ServiceObserved{Found: true, Ports: []elastiv1alpha1.ProxyPort{{Name: "http", Port: 80, ResolverPort: 20000}}},
		Target:    TargetObserved{Found: true},
		Demand:    Demand{Wake: true},
		Concerns:  ConcernsObserved{Progress: wakeprogress.Observed{Pending: true, Began: wakeAt}},
	}
	p := Decide(o)
	st := DesiredStatus(es, o, p, Effects{Woke: true, Replicas: 1}, "elasti-system")
	want := &elastiv1alpha1.WakeProgress{Phase: elastiv1alpha1.WakePhaseScaling, Message: wakeprogress.MsgNoPod, StartTime: metav1.NewTime(wakeAt), PhaseTime: metav1.NewTime(wakeAt)}
	if diff := cmp.Diff(want, st.WakeProgress); diff != "" {
		t.Fatalf("wakeProgress at the wake (-want +got):\n%s", diff)
	}

	es.Status = st
	o.Now, o.Phase, o.Target.Replicas, o.Demand.Wake = wakeAt.Add(time.Second), PhaseWaking, 1, false
	o.Concerns.Progress = wakeprogress.Observed{Pending: true, Began: wakeAt, Looked: true, Phase: elastiv1alpha1.WakePhaseScaling, Message: wakeprogress.MsgNoPod}
	p = Decide(o)
	if next := DesiredStatus(es, o, p, Effects{}, "elasti-system"); StatusChanged(es.Status, next) {
		t.Errorf("a second reconcile with no pod yet changed the status:\n%s", cmp.Diff(es.Status, next))
	}
}
