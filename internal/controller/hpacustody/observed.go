package hpacustody

import (
	"strings"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/scaling"
)

// Observed is what decide learns about the HPA spec.autoscaler names.
type Observed struct {
	// Custody: Elasti holds the HPA's floor at 1, and the HPA's own
	// metrics join the triggers in saying whether the target is idle.
	Custody bool
	// Exposed: the HPA has minReplicas 0 and could take the target to zero
	// itself, and its floor could not be raised: the target is not put to
	// sleep, since the HPA could take the last step before the proxy is in
	// place.
	Exposed bool
	// Metrics is what the HPA's readings say (MetricsVerdict), as a
	// trigger would; nil when observe did not read them.
	Metrics *scaling.Result
}

// SaysIdle reports whether every voice on whether the target is idle says
// so. The triggers (nil when not evaluated for this reconcile; noTriggers
// when the ElastiService has none) speak; an HPA in custody speaks through
// its own metrics, beside them or, without triggers, alone. With neither,
// nothing ever says idle. An HPA that could take the last step itself
// vetoes.
func (o Observed) SaysIdle(triggers *scaling.Result, noTriggers bool) bool {
	switch {
	case o.Exposed:
		return false
	case o.Custody && !isIdle(o.Metrics):
		return false
	case noTriggers:
		return o.Custody
	default:
		return isIdle(triggers)
	}
}

func isIdle(r *scaling.Result) bool { return r != nil && r.State == scaling.StateIdle }

// IdleVerdict is what the triggers and the HPA in custody say together, for
// the status: unhealthy when one cannot be evaluated, active when one is
// active, idle when all that spoke say idle; nil when none was evaluated.
func (o Observed) IdleVerdict(triggers *scaling.Result, noTriggers bool) *scaling.Result {
	var voices []*scaling.Result
	if triggers != nil && !noTriggers {
		voices = append(voices, triggers)
	}
	if o.Custody && o.Metrics != nil {
		voices = append(voices, o.Metrics)
	}
	if len(voices) == 1 {
		return voices[0]
	}
	var active, idle *scaling.Result
	var msgs []string
	for _, v := range voices {
		switch v.State {
		case scaling.StateUnhealthy:
			return v
		case scaling.StateActive:
			if active == nil {
				active = v
			}
		default:
			idle = v
			msgs = append(msgs, v.Message)
		}
	}
	if active != nil {
		return active
	}
	if idle == nil {
		return nil
	}
	return &scaling.Result{State: scaling.StateIdle, Message: strings.Join(msgs, "; "), Value: idle.Value}
}

// GateView is the ElastiService as the sleep gates see it. Their first gate
// holds a target without triggers awake for good, since nothing would ever
// say it is idle; an HPA in custody says so through its metrics, so for the
// gates it stands in for a trigger. Every other gate (keep-awake, cooldown,
// enabledPeriod) applies as it does to triggers.
func GateView(es *elastiv1alpha1.ElastiService, custody bool) *elastiv1alpha1.ElastiService {
	if !custody || len(es.Spec.Triggers) > 0 {
		return es
	}
	v := *es
	v.Spec.Triggers = []elastiv1alpha1.ScaleTrigger{{}}
	return &v
}

// Named is the HPA an ElastiService names, or "".
func Named(es *elastiv1alpha1.ElastiService) string {
	if a := es.Spec.Autoscaler; a != nil && a.Type == elastiv1alpha1.AutoscalerHPA {
		return a.Name
	}
	return ""
}
