package admission

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/scaling"
)

// Limits are the cluster admin's bounds on what one ElastiService may ask of
// the operator and the resolvers that every tenant shares
// (docs/security.md, "Fair shares" and "Calls to trigger servers"). The
// zero value bounds nothing.
type Limits struct {
	// TriggerServers lists the servers a prometheus trigger may query
	// (--trigger-servers); nil allows any.
	TriggerServers *scaling.ServerPolicy
	// MaxHeldRequests is the highest spec.proxy.maxHeldRequests allowed
	// (--max-held-requests-ceiling); 0 leaves the CRD's own maximum.
	MaxHeldRequests int32
	// MaxHoldTimeout is the longest spec.proxy.holdTimeout allowed
	// (--hold-timeout-ceiling); 0 leaves the CRD's own maximum.
	MaxHoldTimeout time.Duration
}

// check returns the fields of spec beyond the limits, under path.
func (l Limits) check(spec *elastiv1alpha1.ElastiServiceSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if l.TriggerServers != nil {
		for i, t := range spec.Triggers {
			if t.Type != elastiv1alpha1.TriggerTypePrometheus || t.Metadata.ServerAddress == "" {
				continue
			}
			if err := l.TriggerServers.Check(t.Metadata.ServerAddress); err != nil {
				errs = append(errs, field.Forbidden(path.Child("triggers").Index(i).Child("metadata", "serverAddress"), err.Error()))
			}
		}
	}
	if spec.Proxy == nil {
		return errs
	}
	if l.MaxHeldRequests > 0 && spec.Proxy.MaxHeldRequests > l.MaxHeldRequests {
		errs = append(errs, field.Forbidden(path.Child("proxy", "maxHeldRequests"),
			fmt.Sprintf("%d is above %d, the most one ElastiService may hold per resolver in this cluster (operator --max-held-requests-ceiling); the resolvers are shared by every team", spec.Proxy.MaxHeldRequests, l.MaxHeldRequests)))
	}
	if l.MaxHoldTimeout > 0 && spec.Proxy.HoldTimeout != "" {
		if d, err := time.ParseDuration(spec.Proxy.HoldTimeout); err == nil && d > l.MaxHoldTimeout {
			errs = append(errs, field.Forbidden(path.Child("proxy", "holdTimeout"),
				fmt.Sprintf("%s is longer than %s, the longest hold in this cluster (operator --hold-timeout-ceiling)", spec.Proxy.HoldTimeout, l.MaxHoldTimeout)))
		}
	}
	return errs
}
