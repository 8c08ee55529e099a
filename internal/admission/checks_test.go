package admission

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/testenv/estest"
)

func window(schedule, d string) estest.Option {
	return func(es *elastiv1alpha1.ElastiService) {
		es.Spec.EnabledPeriod = &elastiv1alpha1.EnabledPeriod{Schedule: schedule, Duration: d}
	}
}

func hold(d string) estest.Option {
	return func(es *elastiv1alpha1.ElastiService) {
		es.Spec.Proxy = &elastiv1alpha1.ProxySpec{HoldTimeout: d}
	}
}

func zone(tz string) estest.Option {
	return func(es *elastiv1alpha1.ElastiService) { es.Spec.EnabledPeriod.TimeZone = tz }
}

func withPreWarm(schedule, tz string) estest.Option {
	return func(es *elastiv1alpha1.ElastiService) {
		es.Spec.PreWarm = &elastiv1alpha1.PreWarm{Schedule: schedule, TimeZone: tz}
	}
}

func withHeaders(h map[string]string) estest.Option {
	return func(es *elastiv1alpha1.ElastiService) { es.Spec.Triggers[0].Metadata.Headers = h }
}

func TestCheck(t *testing.T) {
	prom := estest.Prometheus("http://prometheus:9090", "vector(0)", "0.5")
	for _, tc := range []struct {
		name string
		opts []estest.Option
		// want is each error as the webhook words it: "<field>: <detail>".
		want []string
	}{
		{name: "no optional fields"},
		{name: "workdays", opts: []estest.Option{window("0 9 * * 1-5", "8h"), hold("30s"), prom}},
		{name: "descriptor and compound durations", opts: []estest.Option{window("@daily", "1h30m"), hold("1.5m")}},
		{name: "time zones", opts: []estest.Option{window("0 8 * * 1-5", "11h"), zone("Europe/Berlin"), withPreWarm("55 8 * * 1-5", "America/New_York")}},
		{name: "unknown time zone", opts: []estest.Option{window("0 8 * * 1-5", "11h"), zone("Europe/Bärlin")}, want: []string{
			`spec.enabledPeriod.timeZone: load time zone: unknown time zone Europe/Bärlin; use an IANA time zone name such as Europe/Berlin, America/New_York or UTC`}},
		{name: "Local is not a zone", opts: []estest.Option{withPreWarm("@daily", "Local")}, want: []string{
			`spec.preWarm.timeZone: "Local" is the operator's own time zone, not a zone name; use an IANA time zone name such as Europe/Berlin, America/New_York or UTC`}},
		{name: "pre-warm minute 61 in an unknown zone", opts: []estest.Option{withPreWarm("61 8 * * 1-5", "Mars/Olympus_Mons")}, want: []string{
			`spec.preWarm.schedule: end of range (61) above maximum (59): 61; use a five-field cron expression such as "55 8 * * 1-5" or a descriptor such as @daily`,
			`spec.preWarm.timeZone: load time zone: unknown time zone Mars/Olympus_Mons; use an IANA time zone name such as Europe/Berlin, America/New_York or UTC`}},
		{name: "minute 61", opts: []estest.Option{window("61 * * * *", "1h")}, want: []string{
			`spec.enabledPeriod.schedule: end of range (61) above maximum (59): 61; use a five-field cron expression such as "0 9 * * 1-5" or a descriptor such as @daily`}},
		{name: "backwards range", opts: []estest.Option{window("5-1 * * * *", "1h")}, want: []string{
			`spec.enabledPeriod.schedule: beginning of range (5) beyond end of range (1): 5-1; use a five-field cron expression such as "0 9 * * 1-5" or a descriptor such as @daily`}},
		{name: "duration overflows", opts: []estest.Option{window("@daily", "99999999999h")}, want: []string{
			`spec.enabledPeriod.duration: time: invalid duration "99999999999h"; use a positive Go duration such as 8h or 90m`}},
		{name: "zero duration", opts: []estest.Option{window("@daily", "0s")}, want: []string{
			`spec.enabledPeriod.duration: "0s" is not above zero; use a positive Go duration such as 8h or 90m`}},
		{name: "zero hold", opts: []estest.Option{hold("0s")}, want: []string{
			`spec.proxy.holdTimeout: "0s" is not above zero; use a positive Go duration such as 30s or 5m`}},
		{name: "negative hold", opts: []estest.Option{hold("-5m")}, want: []string{
			`spec.proxy.holdTimeout: "-5m" is not above zero; use a positive Go duration such as 30s or 5m`}},
		{name: "hold of 100000s, beyond what CEL reads", opts: []estest.Option{hold("100000s")}, want: []string{
			`spec.proxy.holdTimeout: must be at most 1h0m0s, the longest a resolver holds a request or connection, such as 20m`}},
		{name: "fallback", opts: []estest.Option{hold("20m"), withFallback("web-static", "30s")}},
		{name: "fallback after the hold", opts: []estest.Option{hold("20m"), withFallback("web-static", "1200000000000ns")}, want: []string{
			`spec.proxy.fallback.after: must be shorter than spec.proxy.holdTimeout (20m), or held requests time out before they could go to the fallback; such as after: 30s with holdTimeout: 10m`}},
		{name: "fallback to itself", opts: []estest.Option{estest.Service("web"), withFallback("web", "30s")}, want: []string{
			`spec.proxy.fallback.service: must name another Service than spec.service, whose traffic it takes when the target cannot come up, such as web-static`}},
		{name: "threshold beyond float64", opts: []estest.Option{prom, estest.Prometheus("http://prometheus:9090", "vector(0)", "1e309")}, want: []string{
			`spec.triggers[1].metadata.threshold: threshold "1e309" is out of range; write a number between -1e308 and 1e308; a threshold is a number such as 0.1 or a numeric string such as "0.1"`}},
		{name: "threshold NaN", opts: []estest.Option{estest.Prometheus("http://prometheus:9090", "vector(0)", "NaN")}, want: []string{
			`spec.triggers[0].metadata.threshold: threshold "NaN" is not a finite number; a threshold is a number such as 0.1 or a numeric string such as "0.1"`}},
		{name: "headers", opts: []estest.Option{prom, withHeaders(map[string]string{"X-Scope-OrgID": "tenant-a", "Bad Name": "x", "X-Token": "secret\r\nInjected: 1"})}, want: []string{
			`spec.triggers[0].metadata.headers[Bad Name]: not a valid HTTP header name; use letters, digits and - (a token), such as X-Scope-OrgID`,
			`spec.triggers[0].metadata.headers[X-Token]: the value holds a control character such as a line break; use printable text, such as tenant-a`}},
		{name: "every error is reported", opts: []estest.Option{window("61 * * * *", "0s"), hold("0s")}, want: []string{
			`spec.enabledPeriod.schedule: end of range (61) above maximum (59): 61; use a five-field cron expression such as "0 9 * * 1-5" or a descriptor such as @daily`,
			`spec.enabledPeriod.duration: "0s" is not above zero; use a positive Go duration such as 8h or 90m`,
			`spec.proxy.holdTimeout: "0s" is not above zero; use a positive Go duration such as 30s or 5m`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, e := range Check(estest.New("ns", "web", tc.opts...)) {
				got = append(got, e.Field+": "+e.Detail)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
			for _, g := range got {
				if strings.Contains(g, "Injected") {
					t.Errorf("a header value is echoed: %s", g)
				}
			}
		})
	}
}

func TestValidator(t *testing.T) {
	ctx := context.Background()
	good := estest.New("ns", "web", window("0 9 * * 1-5", "8h"))
	bad := estest.New("ns", "web", window("61 * * * *", "8h"), hold("0s"))

	if _, err := (Validator{}).ValidateCreate(ctx, good); err != nil {
		t.Errorf("create of a valid ElastiService refused: %v", err)
	}
	_, err := Validator{}.ValidateCreate(ctx, bad)
	if !apierrors.IsInvalid(err) {
		t.Fatalf("create of an invalid ElastiService: want an Invalid status, got %v", err)
	}
	status := err.(apierrors.APIStatus).Status()
	wantMsg := `[spec.enabledPeriod.schedule: end of range (61) above maximum (59): 61; use a five-field cron expression such as "0 9 * * 1-5" or a descriptor such as @daily, ` +
		`spec.proxy.holdTimeout: "0s" is not above zero; use a positive Go duration such as 30s or 5m]`
	if status.Message != wantMsg {
		t.Errorf("message:\n got %s\nwant %s", status.Message, wantMsg)
	}
	var fields []string
	for _, c := range status.Details.Causes {
		fields = append(fields, c.Field)
	}
	if diff := cmp.Diff([]string{"spec.enabledPeriod.schedule", "spec.proxy.holdTimeout"}, fields); diff != "" {
		t.Errorf("causes (-want +got)\n%s", diff)
	}
	if status.Details.Kind != "ElastiService" || status.Details.Group != "elasti.dev" || status.Details.Name != "web" {
		t.Errorf("details name %s.%s %q", status.Details.Kind, status.Details.Group, status.Details.Name)
	}

	// An update that leaves the spec alone passes even when the stored spec
	// is one the webhook refuses now: a finalizer must be removable.
	relabelled := bad.DeepCopy()
	relabelled.Labels = map[string]string{"team": "a"}
	relabelled.Finalizers = nil
	relabelled.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	if _, err := (Validator{}).ValidateUpdate(ctx, bad, relabelled); err != nil {
		t.Errorf("metadata-only update refused: %v", err)
	}
	// A spec change is checked, even one that does not touch the bad field.
	edited := bad.DeepCopy()
	edited.Spec.CooldownPeriod = 60
	if _, err := (Validator{}).ValidateUpdate(ctx, bad, edited); !apierrors.IsInvalid(err) {
		t.Errorf("spec update of an invalid ElastiService: want Invalid, got %v", err)
	}
	fixed := bad.DeepCopy()
	fixed.Spec = good.Spec
	if _, err := (Validator{}).ValidateUpdate(ctx, bad, fixed); err != nil {
		t.Errorf("update that fixes the spec refused: %v", err)
	}
	if _, err := (Validator{}).ValidateDelete(ctx, bad); err != nil {
		t.Errorf("delete refused: %v", err)
	}
	// One error is not bracketed: the message is the brief "<field>: <detail>".
	_, err = Validator{}.ValidateCreate(ctx, estest.New("ns", "web", window("5-1 * * * *", "1h")))
	if msg := err.(apierrors.APIStatus).Status().Message; !strings.HasPrefix(msg, "spec.enabledPeriod.schedule: beginning of range") {
		t.Errorf("one error: message %q", msg)
	}
}

func withFallback(service, after string) estest.Option {
	return func(es *elastiv1alpha1.ElastiService) {
		if es.Spec.Proxy == nil {
			es.Spec.Proxy = &elastiv1alpha1.ProxySpec{}
		}
		es.Spec.Proxy.Fallback = &elastiv1alpha1.Fallback{Service: service, After: after}
	}
}
