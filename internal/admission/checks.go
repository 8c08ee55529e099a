package admission

import (
	"fmt"
	"sort"
	"time"

	"golang.org/x/net/http/httpguts"
	"k8s.io/apimachinery/pkg/util/validation/field"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/scaling"
	"elasti.dev/elasti/internal/sleepgate"
)

// check is one rule of the webhook: it returns the spec's errors under the
// path of the spec. Each check calls the function the operator or the
// resolver uses on the field at run time.
type check func(spec *elastiv1alpha1.ElastiServiceSpec, path *field.Path) field.ErrorList

// checks run in order; every error of every check is reported.
var checks = []check{enabledPeriod, preWarm, holdTimeout, fallback, thresholds, headers}

// Check returns what is wrong with es's spec that the CRD's rules and the
// admission policy cannot see. Field paths start at spec.
func Check(es *elastiv1alpha1.ElastiService) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("spec")
	for _, c := range checks {
		errs = append(errs, c(&es.Spec, path)...)
	}
	return errs
}

// enabledPeriod parses the schedule with the enabledPeriod gate's parser and
// the duration as the gate does.
func enabledPeriod(spec *elastiv1alpha1.ElastiServiceSpec, path *field.Path) field.ErrorList {
	p := spec.EnabledPeriod
	if p == nil {
		return nil
	}
	path = path.Child("enabledPeriod")
	var errs field.ErrorList
	if err := sleepgate.ParseSchedule(p.Schedule); err != nil {
		errs = append(errs, field.Invalid(path.Child("schedule"), p.Schedule,
			err.Error()+`; use a five-field cron expression such as "0 9 * * 1-5" or a descriptor such as @daily`))
	}
	if err := timeZone(path.Child("timeZone"), p.TimeZone); err != nil {
		errs = append(errs, err)
	}
	if err := positiveDuration(path.Child("duration"), p.Duration, "8h or 90m"); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// preWarm parses the schedule with the same cron parser as the
// enabledPeriod's (scaling.ParsePreWarm uses it too) and loads the zone as
// the operator does.
func preWarm(spec *elastiv1alpha1.ElastiServiceSpec, path *field.Path) field.ErrorList {
	p := spec.PreWarm
	if p == nil {
		return nil
	}
	path = path.Child("preWarm")
	var errs field.ErrorList
	if err := sleepgate.ParseSchedule(p.Schedule); err != nil {
		errs = append(errs, field.Invalid(path.Child("schedule"), p.Schedule,
			err.Error()+`; use a five-field cron expression such as "55 8 * * 1-5" or a descriptor such as @daily`))
	}
	if err := timeZone(path.Child("timeZone"), p.TimeZone); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// timeZone loads name as the operator does, from the time zone database it
// embeds: a name of the right shape that names no zone (Europe/Bärlin, or
// one newer than the operator's database) is refused here.
func timeZone(path *field.Path, name string) *field.Error {
	if _, err := scaling.LoadTimeZone(name); err != nil {
		return field.Invalid(path, name, err.Error()+"; use an IANA time zone name such as Europe/Berlin, America/New_York or UTC")
	}
	return nil
}

// holdTimeout must be a duration the resolver uses rather than replacing it
// with its --hold-timeout.
func holdTimeout(spec *elastiv1alpha1.ElastiServiceSpec, path *field.Path) field.ErrorList {
	if spec.Proxy == nil || spec.Proxy.HoldTimeout == "" {
		return nil
	}
	path = path.Child("proxy", "holdTimeout")
	if err := positiveDuration(path, spec.Proxy.HoldTimeout, "30s or 5m"); err != nil {
		return field.ErrorList{err}
	}
	if d, _ := time.ParseDuration(spec.Proxy.HoldTimeout); d > contract.MaxHoldTimeout {
		return field.ErrorList{field.Invalid(path, spec.Proxy.HoldTimeout,
			fmt.Sprintf("must be at most %s, the longest a resolver holds a request or connection, such as 20m", contract.MaxHoldTimeout))}
	}
	return nil
}

// fallback reads fallback.after as the resolver does, wants it shorter than
// an explicit holdTimeout, and refuses the Service as its own fallback.
func fallback(spec *elastiv1alpha1.ElastiServiceSpec, path *field.Path) field.ErrorList {
	if spec.Proxy == nil || spec.Proxy.Fallback == nil {
		return nil
	}
	fb := spec.Proxy.Fallback
	path = path.Child("proxy", "fallback")
	var errs field.ErrorList
	if fb.Service == spec.Service {
		errs = append(errs, field.Invalid(path.Child("service"), fb.Service,
			"must name another Service than spec.service, whose traffic it takes when the target cannot come up, such as "+spec.Service+"-static"))
	}
	if err := positiveDuration(path.Child("after"), fb.After, "30s or 2m"); err != nil {
		return append(errs, err)
	}
	after, _ := time.ParseDuration(fb.After)
	if hold, err := time.ParseDuration(spec.Proxy.HoldTimeout); err == nil && hold > 0 && after >= hold {
		errs = append(errs, field.Invalid(path.Child("after"), fb.After,
			fmt.Sprintf("must be shorter than spec.proxy.holdTimeout (%s), or held requests time out before they could go to the fallback; such as after: 30s with holdTimeout: 10m", spec.Proxy.HoldTimeout)))
	}
	return errs
}

// positiveDuration reads s with time.ParseDuration, as the enabledPeriod
// gate and the resolver do, and wants it above zero. The CRD's rules already
// say so for every spelling short enough to be sure CEL's duration() cannot
// fail; this catches the rest, such as an overflowing 99999999999h.
func positiveDuration(path *field.Path, s, examples string) *field.Error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return field.Invalid(path, s, err.Error()+"; use a positive Go duration such as "+examples)
	}
	if d <= 0 {
		return field.Invalid(path, s, fmt.Sprintf("%q is not above zero; use a positive Go duration such as %s", s, examples))
	}
	return nil
}

// thresholds reads every threshold as the trigger evaluation does, with
// Threshold.Float64. A missing one reads as 0 at run time; the admission
// policy, not this check, asks prometheus triggers for one.
func thresholds(spec *elastiv1alpha1.ElastiServiceSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range spec.Triggers {
		if t.Metadata.Threshold == nil {
			continue
		}
		if _, err := t.Metadata.Threshold.Float64(); err != nil {
			errs = append(errs, field.Invalid(path.Child("triggers").Index(i).Child("metadata", "threshold"), string(*t.Metadata.Threshold),
				err.Error()+`; a threshold is a number such as 0.1 or a numeric string such as "0.1"`))
		}
	}
	return errs
}

// headers must be ones net/http sends: it refuses a request with an invalid
// header name or value, so the trigger could never query Prometheus. Values
// are never echoed, as they may hold credentials.
func headers(spec *elastiv1alpha1.ElastiServiceSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range spec.Triggers {
		names := make([]string, 0, len(t.Metadata.Headers))
		for name := range t.Metadata.Headers {
			names = append(names, name)
		}
		sort.Strings(names)
		p := path.Child("triggers").Index(i).Child("metadata", "headers")
		for _, name := range names {
			if !httpguts.ValidHeaderFieldName(name) {
				errs = append(errs, field.Invalid(p.Key(name), name,
					"not a valid HTTP header name; use letters, digits and - (a token), such as X-Scope-OrgID"))
				continue
			}
			if !httpguts.ValidHeaderFieldValue(t.Metadata.Headers[name]) {
				errs = append(errs, field.Invalid(p.Key(name), "(value not shown)",
					"the value holds a control character such as a line break; use printable text, such as tenant-a"))
			}
		}
	}
	return errs
}
