package hpacustody

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/scaling"
	"elasti.dev/elasti/internal/sleepgate"
)

func TestIdleVerdict(t *testing.T) {
	idle := &scaling.Result{State: scaling.StateIdle, Message: "all 1 triggers report idle"}
	active := &scaling.Result{State: scaling.StateActive, Message: "trigger 0: busy"}
	hpaIdle := &scaling.Result{State: scaling.StateIdle, Message: "every metric of HPA web reads zero"}
	hpaActive := &scaling.Result{State: scaling.StateActive, Message: "HPA web: metric 0 (External queue) does not read zero"}
	hpaNone := &scaling.Result{State: scaling.StateUnhealthy, Reason: ReasonMetricsUnavailable, Message: "HPA web reports 0 readings for its 1 metrics"}
	for _, tc := range []struct {
		name       string
		triggers   *scaling.Result
		noTriggers bool
		hpa        Observed
		want       *scaling.Result
	}{
		{"nothing evaluated", nil, false, Observed{}, nil},
		{"triggers alone", active, false, Observed{}, active},
		{"HPA not held is not heard", idle, false, Observed{Metrics: hpaActive}, idle},
		{"HPA alone", nil, true, Observed{Custody: true, Metrics: hpaIdle}, hpaIdle},
		{"both idle", idle, false, Observed{Custody: true, Metrics: hpaIdle},
			&scaling.Result{State: scaling.StateIdle, Message: "all 1 triggers report idle; every metric of HPA web reads zero"}},
		{"HPA active", idle, false, Observed{Custody: true, Metrics: hpaActive}, hpaActive},
		{"HPA without readings", active, false, Observed{Custody: true, Metrics: hpaNone}, hpaNone},
	} {
		if diff := cmp.Diff(tc.want, tc.hpa.IdleVerdict(tc.triggers, tc.noTriggers)); diff != "" {
			t.Errorf("%s: (-want +got)\n%s", tc.name, diff)
		}
	}
}

// TestSaysIdle: every voice must say idle; an HPA in custody speaks beside
// the triggers or, without any, alone; one that could take the last step
// itself vetoes.
func TestSaysIdle(t *testing.T) {
	idle := &scaling.Result{State: scaling.StateIdle}
	active := &scaling.Result{State: scaling.StateActive}
	unhealthy := &scaling.Result{State: scaling.StateUnhealthy, Reason: ReasonMetricsUnavailable}
	for _, tc := range []struct {
		name       string
		triggers   *scaling.Result
		noTriggers bool
		hpa        Observed
		want       bool
	}{
		{"triggers idle, no HPA", idle, false, Observed{}, true},
		{"triggers active, no HPA", active, false, Observed{}, false},
		{"triggers not evaluated", nil, false, Observed{}, false},
		{"HPA zero, triggers idle", idle, false, Observed{Custody: true, Metrics: idle}, true},
		{"HPA nonzero, triggers idle", idle, false, Observed{Custody: true, Metrics: active}, false},
		{"HPA zero, a trigger active", active, false, Observed{Custody: true, Metrics: idle}, false},
		{"HPA without readings", idle, false, Observed{Custody: true, Metrics: unhealthy}, false},
		{"HPA not read", idle, false, Observed{Custody: true}, false},
		{"no triggers, HPA zero: it decides alone", nil, true, Observed{Custody: true, Metrics: idle}, true},
		{"no triggers, HPA nonzero", nil, true, Observed{Custody: true, Metrics: active}, false},
		{"no triggers, no HPA: never", idle, true, Observed{}, false},
		{"HPA exposed vetoes", idle, false, Observed{Exposed: true}, false},
	} {
		if got := tc.hpa.SaysIdle(tc.triggers, tc.noTriggers); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestGateView: an HPA in custody lets an ElastiService without triggers
// past the first gate; the others apply as before.
func TestGateView(t *testing.T) {
	created := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	es := &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)},
		Spec: elastiv1alpha1.ElastiServiceSpec{CooldownPeriod: 60}}
	if v := sleepgate.Evaluate(GateView(es, false), created.Add(time.Hour)); v.Reason != sleepgate.ReasonNoTriggers {
		t.Errorf("no custody: %+v", v)
	}
	if v := sleepgate.Evaluate(GateView(es, true), created.Add(time.Hour)); !v.Allowed() {
		t.Errorf("custody, cooldown over: %+v", v)
	}
	if v := sleepgate.Evaluate(GateView(es, true), created.Add(time.Second)); v.Reason != sleepgate.ReasonInCooldown {
		t.Errorf("custody, in cooldown: %+v", v)
	}
	if len(es.Spec.Triggers) != 0 {
		t.Error("GateView changed the ElastiService")
	}
}
