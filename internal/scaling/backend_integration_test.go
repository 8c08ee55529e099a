//go:build integration

package scaling_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
	"elasti.dev/elasti/internal/scaling"
	"elasti.dev/elasti/internal/scaling/scalingtest"
	"elasti.dev/elasti/internal/testenv/estest"
)

// vmauthConfig has two users, one with a bearer token and one with a
// username and password. Each routes by the X-Scope-OrgID header to the
// single node with extra_label=tenant=<id>, which VictoriaMetrics adds to
// every series selector of the query, so a tenant sees only its own series.
// vmauth drops a client's query arg that clashes with one of url_prefix,
// so a client cannot name another tenant's label instead. With no
// default_url, a header that matches no url_map entry (an unknown tenant,
// or none) is refused.
func vmauthConfig(backend string) string {
	routes := fmt.Sprintf(`
  url_map:
  - src_headers: ["X-Scope-OrgID: a"]
    url_prefix: "%[1]s/?extra_label=tenant=a"
  - src_headers: ["X-Scope-OrgID: b"]
    url_prefix: "%[1]s/?extra_label=tenant=b"
`, backend)
	return "users:\n- bearer_token: token-of-the-team\n" + routes +
		"- username: grafana\n  password: s3cret pass\n" + routes
}

// requestSamples is five minutes of http_requests_total, a sample every
// 15 s up to now: tenant a counts 30 requests per sample (2 per second),
// tenant b's counter stays put (no requests).
func requestSamples(now time.Time) string {
	var b strings.Builder
	for i := 0; i <= 20; i++ {
		ts := now.Add(time.Duration(i-20) * 15 * time.Second).UnixMilli()
		fmt.Fprintf(&b, "http_requests_total{tenant=\"a\",job=\"web\"} %d %d\n", 1000+30*i, ts)
		fmt.Fprintf(&b, "http_requests_total{tenant=\"b\",job=\"web\"} 500 %d\n", ts)
	}
	return b.String()
}

// TestPrometheusTriggerAgainstVictoriaMetricsBehindVMAuth evaluates
// prometheus triggers, created through the real API server, against
// VictoriaMetrics single-node behind vmauth: the tenant goes in
// metadata.headers, the credentials come from Secrets the Evaluator reads
// from the API server.
func TestPrometheusTriggerAgainstVictoriaMetricsBehindVMAuth(t *testing.T) {
	bin := scalingtest.VictoriaMetricsDir(t)
	ctx := context.Background()
	vm := scalingtest.StartVictoriaMetrics(t, bin)
	gateway := scalingtest.StartVMAuth(t, bin, vmauthConfig(vm))
	scalingtest.ImportPrometheus(t, vm, requestSamples(time.Now()))

	ns := namespace(t, "vm-backend")
	for _, s := range []*corev1.Secret{
		// A trailing newline, as `kubectl create secret --from-file` keeps
		// it: the Evaluator trims it.
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vm-token"}, Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{"token": []byte("token-of-the-team\n")}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vm-basic"}, Type: corev1.SecretTypeBasicAuth,
			Data: map[string][]byte{corev1.BasicAuthUsernameKey: []byte("grafana"), corev1.BasicAuthPasswordKey: []byte("s3cret pass")}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vm-basic-wrong"}, Type: corev1.SecretTypeBasicAuth,
			Data: map[string][]byte{corev1.BasicAuthUsernameKey: []byte("grafana"), corev1.BasicAuthPasswordKey: []byte("not the password")}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vm-token-wrong"}, Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{"token": []byte("someone-elses-token")}},
	} {
		if err := k8s.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}

	const requestRate = "sum(rate(http_requests_total[2m])) or vector(0)"
	bearer := func(secret string) func(*elastiv1alpha1.TriggerMetadata) {
		return func(md *elastiv1alpha1.TriggerMetadata) {
			md.AuthSecretRef = &elastiv1alpha1.SecretKeySelector{Name: secret, Key: "token"}
		}
	}
	basic := func(secret string) func(*elastiv1alpha1.TriggerMetadata) {
		return func(md *elastiv1alpha1.TriggerMetadata) {
			md.BasicAuthSecretRef = &elastiv1alpha1.LocalSecretReference{Name: secret}
		}
	}
	none := func(*elastiv1alpha1.TriggerMetadata) {}

	ev := &scaling.Evaluator{Secrets: k8s, Timeout: 10 * time.Second}
	for i, tc := range []struct {
		name   string
		tenant string // X-Scope-OrgID; empty sends none
		query  string
		creds  func(*elastiv1alpha1.TriggerMetadata)
		// threshold defaults to 1 request per second.
		threshold  string
		wantState  scaling.State
		wantValue  float64 // checked when not unhealthy
		wantReason string
		wantIn     string
	}{
		// Tenant a serves 2 requests per second, tenant b none: only the
		// tenant header tells the two apart, so a backend that ignored it
		// would give both the same answer.
		{name: "bearer, busy tenant a", tenant: "a", query: requestRate, creds: bearer("vm-token"), wantState: scaling.StateActive, wantValue: 2},
		{name: "bearer, quiet tenant b", tenant: "b", query: requestRate, creds: bearer("vm-token"), wantState: scaling.StateIdle, wantValue: 0},
		{name: "basic, quiet tenant b", tenant: "b", query: requestRate, creds: basic("vm-basic"), wantState: scaling.StateIdle, wantValue: 0},
		{name: "basic, busy tenant a", tenant: "a", query: requestRate, creds: basic("vm-basic"), wantState: scaling.StateActive, wantValue: 2},
		// Tenant a naming tenant b's series by their label still sees only
		// its own: none of them has tenant="b". Without the tenant's
		// extra_label this would count tenant b's one series.
		{name: "tenant a cannot read tenant b's series", tenant: "a", query: `count(http_requests_total{tenant="b"}) or vector(0)`, creds: bearer("vm-token"),
			threshold: "0.5", wantState: scaling.StateIdle, wantValue: 0},
		{name: "tenant b sees its own series", tenant: "b", query: `count(http_requests_total{tenant="b"}) or vector(0)`, creds: bearer("vm-token"),
			threshold: "0.5", wantState: scaling.StateActive, wantValue: 1},

		// vmauth answers 401 with no credentials, and 401 (after a
		// deliberate 2-3 s delay) with ones it does not know.
		{name: "no credentials", tenant: "a", query: requestRate, creds: none, wantState: scaling.StateUnhealthy,
			wantReason: scaling.ReasonPrometheusUnauthorized, wantIn: "refused the request for lack of credentials (HTTP 401 Unauthorized), and the trigger sends none"},
		{name: "wrong password", tenant: "a", query: requestRate, creds: basic("vm-basic-wrong"), wantState: scaling.StateUnhealthy,
			wantReason: scaling.ReasonPrometheusUnauthorized, wantIn: "refused the credentials (HTTP 401 Unauthorized): check the username and password in Secret vm-backend/vm-basic-wrong"},
		{name: "wrong token", tenant: "a", query: requestRate, creds: bearer("vm-token-wrong"), wantState: scaling.StateUnhealthy,
			wantReason: scaling.ReasonPrometheusUnauthorized, wantIn: "refused the credentials (HTTP 401 Unauthorized): check the bearer token in Secret vm-backend/vm-token-wrong key token"},

		// vmauth, with valid credentials but a tenant header that matches
		// no url_map entry (and no default_url), answers 400 Bad Request
		// "missing route": the query reaches no tenant's data. The trigger
		// is unhealthy, so the target is never scaled down on it.
		{name: "unknown tenant", tenant: "c", query: requestRate, creds: bearer("vm-token"), wantState: scaling.StateUnhealthy,
			wantReason: scaling.ReasonPrometheusUnreachable, wantIn: "answered HTTP 400 Bad Request instead of a query result"},
		// What the server wrote (vmauth's "missing route" text) stays out
		// of the status: the server is the ElastiService author's to choose.
		{name: "no tenant header", query: requestRate, creds: basic("vm-basic"), wantState: scaling.StateUnhealthy,
			wantReason: scaling.ReasonPrometheusUnreachable, wantIn: "answered HTTP 400 Bad Request instead of a query result"},

		// Secrets the API server cannot give.
		{name: "missing Secret", tenant: "a", query: requestRate, creds: basic("no-such-secret"), wantState: scaling.StateUnhealthy,
			wantReason: scaling.ReasonAuthSecretUnavailable, wantIn: "read Secret vm-backend/no-such-secret: secrets \"no-such-secret\" not found"},
		{name: "Secret without username", tenant: "a", query: requestRate, creds: basic("vm-token"), wantState: scaling.StateUnhealthy,
			wantReason: scaling.ReasonAuthSecretUnavailable, wantIn: `Secret vm-backend/vm-token has no key "username"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			threshold := tc.threshold
			if threshold == "" {
				threshold = "1"
			}
			es := estest.New(ns, fmt.Sprintf("es-%d", i), estest.Prometheus(gateway, tc.query, threshold))
			md := &es.Spec.Triggers[0].Metadata
			if tc.tenant != "" {
				md.Headers = map[string]string{"X-Scope-OrgID": tc.tenant}
			}
			tc.creds(md)
			// The Evaluator gets the object as the API server stored it.
			if err := k8s.Create(ctx, es); err != nil {
				t.Fatal(err)
			}
			stored := &elastiv1alpha1.ElastiService{}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(es), stored); err != nil {
				t.Fatal(err)
			}
			r := ev.Evaluate(ctx, stored)
			if r.State != tc.wantState || r.Reason != tc.wantReason || !strings.Contains(r.Message, tc.wantIn) {
				t.Fatalf("got %+v\nwant %s %s with %q", r, tc.wantState, tc.wantReason, tc.wantIn)
			}
			if tc.wantState != scaling.StateUnhealthy && math.Abs(r.Value-tc.wantValue) > 1e-9 {
				t.Errorf("value %v, want %v", r.Value, tc.wantValue)
			}
			t.Logf("%s: %s", r.State, r.Message)
		})
	}

	// The CRD refuses both credentials on one trigger.
	both := estest.New(ns, "both", estest.Prometheus(gateway, requestRate, "1"))
	basic("vm-basic")(&both.Spec.Triggers[0].Metadata)
	bearer("vm-token")(&both.Spec.Triggers[0].Metadata)
	err := k8s.Create(ctx, both)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.triggers[0].metadata.basicAuthSecretRef") ||
		!strings.Contains(err.Error(), "metadata.authSecretRef and metadata.basicAuthSecretRef cannot both be set") {
		t.Errorf("both authSecretRef and basicAuthSecretRef: got %v, want an Invalid error naming both", err)
	}
}
