package plan

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/controller/dozer"
	"elasti.dev/elasti/internal/scaling"
	"elasti.dev/elasti/internal/sleepgate"
)

func TestCurrentPhaseOfADoze(t *testing.T) {
	cond := func(reason string) []metav1.Condition {
		return []metav1.Condition{{Type: elastiv1alpha1.ConditionActive, Status: metav1.ConditionFalse, Reason: reason}}
	}
	doze := &elastiv1alpha1.DozeStatus{Pods: []elastiv1alpha1.DozedPod{{UID: "a"}}}
	for _, tc := range []struct {
		name string
		st   elastiv1alpha1.ElastiServiceStatus
		want Phase
	}{
		{"dozing with replicas is asleep", elastiv1alpha1.ElastiServiceStatus{Mode: elastiv1alpha1.ModeProxy, Doze: doze, Conditions: cond(contract.ReasonDozing)}, PhaseProxy},
		{"a wake writing requests back", elastiv1alpha1.ElastiServiceStatus{Mode: elastiv1alpha1.ModeProxy, Doze: doze, Conditions: cond(contract.ReasonWaking)}, PhaseWaking},
		{"a Dozing reason without records is not a doze", elastiv1alpha1.ElastiServiceStatus{Mode: elastiv1alpha1.ModeProxy, Conditions: cond(contract.ReasonDozing)}, PhaseWaking},
		{"a doze left in serve mode", elastiv1alpha1.ElastiServiceStatus{Mode: elastiv1alpha1.ModeServe, Doze: doze}, PhaseServe},
	} {
		if got := CurrentPhase(tc.st, 2); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestDecideDoze(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	ports := []elastiv1alpha1.ProxyPort{{Name: "http", Port: 80, ResolverPort: 20000}}
	dozed := dozer.Report{Done: true}
	restoredPending := dozer.Report{Restored: true, Waiting: []string{"web-a"}}
	restoredDone := dozer.Report{Restored: true, Done: true}
	base := func(ph Phase, mut func(*Observed)) Observed {
		o := Observed{
			Now: now, Phase: ph, Resolvers: 2, OwnReady: true,
			Sleep:        sleepgate.Verdict{Reason: sleepgate.ReasonOpen, Polls: true},
			PollInterval: 30 * time.Second,
			Service:      ServiceObserved{Found: true, Ports: ports},
			Target:       TargetObserved{Found: true, Replicas: 2},
			Grace:        GraceObserved{Period: 2 * time.Second, StartedAt: now.Add(-3 * time.Second)},
			Doze:         DozeObserved{On: true},
		}
		if mut != nil {
			mut(&o)
		}
		return o
	}
	asleep := func(r dozer.Report) func(*Observed) {
		return func(o *Observed) { o.Doze.Dozing, o.Doze.Report = true, r }
	}
	proxy := func(active string) Plan {
		return Plan{Slices: SliceEnsure, Mode: elastiv1alpha1.ModeProxy, Active: active}
	}
	with := func(p Plan, edit func(*Plan)) Plan { edit(&p); return p }

	for _, tc := range []struct {
		name string
		o    Observed
		want Plan
	}{
		{"a confirmed sleep dozes instead of scaling to zero", base(PhaseScalingDown, func(o *Observed) { o.Triggers = &scaling.Result{State: scaling.StateIdle} }),
			with(proxy(contract.ReasonDozing), func(p *Plan) { p.Doze = true })},
		{"without Doze it scales to zero", base(PhaseScalingDown, func(o *Observed) { o.Doze.On = false; o.Triggers = &scaling.Result{State: scaling.StateIdle} }),
			with(proxy(contract.ReasonScaledToZero), func(p *Plan) { p.Sleep = true })},
		{"a target someone put at zero is not dozed", base(PhaseScalingDown, func(o *Observed) { o.Target.Replicas = 0 }),
			with(proxy(contract.ReasonScaledToZero), func(p *Plan) { p.Sleep = true })},
		{"dozing pods are Ready, yet it stays asleep in proxy mode", base(PhaseProxy, asleep(dozed)),
			with(proxy(contract.ReasonDozing), func(p *Plan) { p.Doze, p.RequeueAfter = true, 30*time.Second })},
		{"a pod that appeared while dozing dozes too", base(PhaseProxy, asleep(dozer.Report{Done: true, Unrecorded: []string{"web-c"}})),
			with(proxy(contract.ReasonDozing), func(p *Plan) { p.Doze, p.RequeueAfter = true, 30*time.Second })},
		{"a wake writes the requests back and waits, in proxy mode", base(PhaseProxy, func(o *Observed) { asleep(dozed)(o); o.Demand.Wake = true }),
			with(proxy(contract.ReasonWaking), func(p *Plan) { p.Wake, p.Undoze, p.RequeueAfter = true, true, dozeRecheck })},
		{"keep-awake wakes a dozing target", base(PhaseProxy, func(o *Observed) { asleep(dozed)(o); o.Demand.KeepAwake = true }),
			with(proxy(contract.ReasonWaking), func(p *Plan) { p.Undoze, p.RequeueAfter = true, dozeRecheck })},
		{"triggers that see traffic past the resolvers wake it", base(PhaseProxy, func(o *Observed) { asleep(dozed)(o); o.Triggers = &scaling.Result{State: scaling.StateActive} }),
			with(proxy(contract.ReasonWaking), func(p *Plan) { p.Undoze, p.RequeueAfter = true, dozeRecheck })},
		{"idle triggers leave it dozing", base(PhaseProxy, func(o *Observed) { asleep(dozed)(o); o.Triggers = &scaling.Result{State: scaling.StateIdle} }),
			with(proxy(contract.ReasonDozing), func(p *Plan) { p.Doze, p.RequeueAfter = true, 30*time.Second })},
		{"a trigger that cannot be evaluated leaves it dozing", base(PhaseProxy, func(o *Observed) { asleep(dozed)(o); o.Triggers = &scaling.Result{State: scaling.StateUnhealthy} }),
			with(proxy(contract.ReasonDozing), func(p *Plan) { p.Doze, p.RequeueAfter = true, 30*time.Second })},
		{"a restarted container wakes it", base(PhaseProxy, asleep(dozer.Report{Done: true, Restarted: []string{"web-a"}})),
			with(proxy(contract.ReasonWaking), func(p *Plan) { p.Undoze, p.RequeueAfter = true, dozeRecheck })},
		{"a rollout wakes it", base(PhaseProxy, asleep(dozer.Report{Done: true, TemplateChanged: true})),
			with(proxy(contract.ReasonWaking), func(p *Plan) { p.Undoze, p.RequeueAfter = true, dozeRecheck })},
		{"an infeasible doze wakes it", base(PhaseProxy, asleep(dozer.Report{Infeasible: []string{"web-a"}})),
			with(proxy(contract.ReasonWaking), func(p *Plan) { p.Undoze, p.RequeueAfter = true, dozeRecheck })},
		{"requests back but not applied: still waking", base(PhaseWaking, asleep(restoredPending)),
			with(proxy(contract.ReasonWaking), func(p *Plan) { p.Undoze, p.RequeueAfter = true, dozeRecheck })},
		{"requests back and applied: serve, records cleared", base(PhaseWaking, asleep(restoredDone)),
			Plan{Slices: SliceDelete, Mode: elastiv1alpha1.ModeServe, Active: contract.ReasonServing, Undoze: true, DozeOver: true, RequeueAfter: 30 * time.Second}},
		{"no resolver: fail open, and wake the pods", base(PhaseProxy, func(o *Observed) { asleep(dozed)(o); o.Resolvers = 0 }),
			Plan{Slices: SliceDelete, Mode: elastiv1alpha1.ModeServe, Active: contract.ReasonWaking, FailOpen: true, Undoze: true, RequeueAfter: dozeRecheck}},
		{"the Service is gone: wake the pods, out of the data path", base(PhaseProxy, func(o *Observed) { asleep(dozed)(o); o.Service = ServiceObserved{} }),
			Plan{Slices: SliceDelete, Mode: elastiv1alpha1.ModeServe, Active: contract.ReasonServing, Undoze: true, RequeueAfter: dozeRecheck}},
		{"pods that cannot be read: the doze is left as it is", base(PhaseProxy, func(o *Observed) { asleep(dozed)(o); o.Doze.Err = errors.New("list pods: timeout") }),
			with(proxy(contract.ReasonDozing), func(p *Plan) { p.RequeueAfter = 30 * time.Second })},
		{"pods that cannot be read during a wake: still waking", base(PhaseWaking, func(o *Observed) { asleep(restoredPending)(o); o.Doze.Err = errors.New("list pods: timeout") }),
			with(proxy(contract.ReasonWaking), func(p *Plan) { p.RequeueAfter = 30 * time.Second })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Decide(tc.o)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDesiredStatusOfADoze(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	es := &elastiv1alpha1.ElastiService{}
	o := Observed{Now: now, Target: TargetObserved{Found: true, Replicas: 2}, Service: ServiceObserved{Found: true}}
	rec := &elastiv1alpha1.DozeStatus{Since: metav1.NewTime(now), Pods: []elastiv1alpha1.DozedPod{{UID: "a"}}}

	st := DesiredStatus(es, o, Plan{Mode: elastiv1alpha1.ModeProxy, Active: contract.ReasonDozing, Doze: true}, Effects{Dozed: rec}, "elasti")
	if st.Doze == nil || st.LastScaledDownTime == nil {
		t.Fatalf("a doze recorded: doze %v lastScaledDownTime %v, want both set", st.Doze, st.LastScaledDownTime)
	}
	if c := findActive(st); c == nil || c.Status != metav1.ConditionFalse || c.Reason != contract.ReasonDozing {
		t.Errorf("Active %+v, want False/Dozing", c)
	}

	es.Status = st
	st = DesiredStatus(es, o, Plan{Mode: elastiv1alpha1.ModeServe, Active: contract.ReasonServing, Undoze: true, DozeOver: true}, Effects{}, "elasti")
	if st.Doze != nil {
		t.Errorf("the wake is over, and status.doze is %+v", st.Doze)
	}

	// Pods that could not doze sent the target to zero instead.
	st = DesiredStatus(&elastiv1alpha1.ElastiService{}, o, Plan{Mode: elastiv1alpha1.ModeProxy, Active: contract.ReasonDozing, Doze: true}, Effects{Slept: true}, "elasti")
	if c := findActive(st); c == nil || c.Reason != contract.ReasonScaledToZero || st.Doze != nil {
		t.Errorf("a refused doze: Active %+v doze %v, want ScaledToZero and no records", c, st.Doze)
	}
}

func findActive(st elastiv1alpha1.ElastiServiceStatus) *metav1.Condition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == elastiv1alpha1.ConditionActive {
			return &st.Conditions[i]
		}
	}
	return nil
}
