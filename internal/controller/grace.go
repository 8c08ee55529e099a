package controller

import (
	"time"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
)

// gracePeriodOf is how long es's scale-down waits, with the proxy slice in
// place, before the target goes to zero: spec.scaleDownGracePeriod when
// set, else def (the operator's --grace-period). The CRD's rules admit
// only durations from 0s to 10m; a value that cannot be read anyway falls
// back to def, and one out of bounds is brought within them.
func gracePeriodOf(spec elastiv1alpha1.ElastiServiceSpec, def time.Duration) time.Duration {
	if spec.ScaleDownGracePeriod == "" {
		return def
	}
	d, err := time.ParseDuration(spec.ScaleDownGracePeriod)
	if err != nil {
		return def
	}
	return min(max(d, 0), contract.MaxScaleDownGracePeriod)
}
