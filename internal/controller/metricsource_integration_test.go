//go:build integration

package controller

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/controller/metricsource"
	"elasti.dev/elasti/internal/metricsapi"
	"elasti.dev/elasti/internal/scaling"
	"elasti.dev/elasti/internal/testenv/estest"
)

// rateTriggers says idle, with a podMetrics rate of 7 requests a second,
// and counts its evaluations.
type rateTriggers struct{ evaluations atomic.Int64 }

func (r *rateTriggers) Evaluate(context.Context, *elastiv1alpha1.ElastiService) scaling.Result {
	r.evaluations.Add(1)
	return scaling.Result{State: scaling.StateIdle, Message: "fake idle",
		Rate: &scaling.Rate{PerSecond: 7, Span: scaling.RateWindow, At: time.Now()}}
}

// TestRateMeasuredWhileASleepGateHolds: with the metrics API on, the
// serve-mode rate an HPA scales on is measured during the cooldown after a
// wake, when no sleep is decided, and it stays fresh for as long as the
// gate holds; the triggers, which say idle, put nothing to sleep.
func TestRateMeasuredWhileASleepGateHolds(t *testing.T) {
	triggers := &rateTriggers{}
	op := startOperator(t, operatorOptions{triggers: triggers, cfg: func(c *Config) { c.MeasureRate = true }})
	createDeployment(t, op.ns, "web", 1)
	createService(t, op.ns, "web")
	createES(t, op.ns, "web", "web", "web", estest.Cooldown(3600), estest.PodMetrics("http_requests_total", 8080, "1"))
	eventually(t, 30*time.Second, "serve mode", wantMode(op.ns, "web", elastiv1alpha1.ModeServe))

	// A rate older than a second is not served: the polling interval
	// (300 ms) must keep renewing it.
	src := metricsource.New(metricsource.Config{Reader: op.mgr.GetClient(), Triggers: op.triggers,
		Namespace: op.resolverNS, WatchNamespaces: []string{op.ns}, MaxTriggerAge: time.Second})
	key := types.NamespacedName{Namespace: op.ns, Name: "web"}
	rate := func() error {
		r, ok, err := src.Read(context.Background(), metricsapi.MetricRate, key)
		switch {
		case err != nil:
			return err
		case !ok:
			return errors.New("no reading")
		case r.Value.MilliValue() != 7000:
			return fmt.Errorf("rate %s, want 7", r.Value.String())
		}
		return nil
	}
	eventually(t, 30*time.Second, "the rate served in the cooldown", rate)
	never(t, 3*time.Second, "the rate stays served", rate)
	if n := triggers.evaluations.Load(); n < 3 {
		t.Errorf("%d evaluations in the cooldown, want one every polling interval", n)
	}
	if got := deploymentReplicas(t, op.ns, "web"); got != 1 {
		t.Errorf("the target has %d replicas in its cooldown, want 1: idle triggers decide no sleep then", got)
	}

	// Off (no metrics API), a target in its cooldown is not evaluated.
	off := &rateTriggers{}
	op2 := startOperator(t, operatorOptions{triggers: off})
	createDeployment(t, op2.ns, "web", 1)
	createService(t, op2.ns, "web")
	createES(t, op2.ns, "web", "web", "web", estest.Cooldown(3600), estest.PodMetrics("http_requests_total", 8080, "1"))
	eventually(t, 30*time.Second, "serve mode", wantMode(op2.ns, "web", elastiv1alpha1.ModeServe))
	time.Sleep(time.Second)
	if n := off.evaluations.Load(); n != 0 {
		t.Errorf("%d evaluations in the cooldown without the metrics API, want none", n)
	}
}
