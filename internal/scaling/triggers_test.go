package scaling

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

func TestSampleValue(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      model.Value
		want    float64
		wantErr error
	}{
		{"one sample", model.Vector{{Value: 0.25}}, 0.25, nil},
		{"scalar", &model.Scalar{Value: 3}, 3, nil},
		{"empty", model.Vector{}, 0, ErrEmptyResult},
		{"nil", nil, 0, ErrEmptyResult},
		{"two series", model.Vector{{Value: 1}, {Value: 2}}, 0, ErrMultipleSeries},
		{"NaN", model.Vector{{Value: model.SampleValue(math.NaN())}}, 0, ErrNotANumber},
		{"Inf", &model.Scalar{Value: model.SampleValue(math.Inf(1))}, 0, ErrNotANumber},
		{"matrix", model.Matrix{}, 0, ErrUnsupportedResult},
	} {
		got, err := sampleValue(tc.in)
		if (tc.wantErr == nil) != (err == nil) || (tc.wantErr != nil && !strings.Contains(err.Error(), tc.wantErr.Error())) || got != tc.want {
			t.Errorf("%s: got %v, %v; want %v, %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

func TestUptimeQuery(t *testing.T) {
	if got, want := uptimeQuery(` container="prometheus" `, 15*time.Minute), `min(min_over_time(up{container="prometheus"}[900s]))`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if got, want := uptimeQuery(`job="p"`, 0), `min(up{job="p"})`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestWindow(t *testing.T) {
	w, err := ParseWindow(elastiv1alpha1.EnabledPeriod{Schedule: "@daily", Duration: "90m"})
	if err != nil {
		t.Fatal(err)
	}
	day := time.Date(2030, 3, 4, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		at   time.Duration
		want bool
	}{{0, true}, {89 * time.Minute, true}, {90 * time.Minute, false}, {-time.Second, false}, {23 * time.Hour, false}} {
		if got := w.Contains(day.Add(tc.at)); got != tc.want {
			t.Errorf("at %s: got %v", tc.at, got)
		}
	}
	if next := w.NextOpen(day.Add(time.Hour)); !next.Equal(day.Add(24 * time.Hour)) {
		t.Errorf("next open %s", next)
	}
	for _, bad := range []elastiv1alpha1.EnabledPeriod{{Schedule: "nope", Duration: "1h"}, {Schedule: "@daily", Duration: "1x"}, {Schedule: "@daily", Duration: "0s"}} {
		if _, err := ParseWindow(bad); err == nil {
			t.Errorf("%+v parsed", bad)
		}
	}
}

// fakePrometheus answers instant queries on loopback from a table.
func fakePrometheus(t *testing.T, answers map[string]string, seen chan<- http.Header) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		if seen != nil {
			select {
			case seen <- r.Header.Clone():
			default:
			}
		}
		body, ok := answers[r.Form.Get("query")]
		if !ok {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"status":"error","errorType":"bad_data","error":"parse error"}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func vector(v string) string {
	return `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000,"` + v + `"]}]}}`
}

func TestEvaluator(t *testing.T) {
	url := fakePrometheus(t, map[string]string{
		"low":   vector("0.05"),
		"high":  vector("7"),
		"nan":   vector("NaN"),
		"empty": `{"status":"success","data":{"resultType":"vector","result":[]}}`,
		`min(min_over_time(up{job="prom"}[60s]))`:  vector("1"),
		`min(min_over_time(up{job="flaky"}[60s]))`: vector("0"),
	}, nil)
	es := func(triggers ...elastiv1alpha1.TriggerMetadata) *elastiv1alpha1.ElastiService {
		e := &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{Namespace: "n"}, Spec: elastiv1alpha1.ElastiServiceSpec{CooldownPeriod: 60}}
		for _, md := range triggers {
			e.Spec.Triggers = append(e.Spec.Triggers, elastiv1alpha1.ScaleTrigger{Type: elastiv1alpha1.TriggerTypePrometheus, Metadata: md})
		}
		return e
	}
	th := func(s string) *elastiv1alpha1.Threshold { return ptr.To(elastiv1alpha1.Threshold(s)) }
	ev := &Evaluator{DefaultServerAddress: url, Timeout: 5 * time.Second}
	for _, tc := range []struct {
		name       string
		es         *elastiv1alpha1.ElastiService
		wantState  State
		wantReason string
	}{
		{"below threshold", es(elastiv1alpha1.TriggerMetadata{Query: "low", Threshold: th("0.1")}), StateIdle, ""},
		{"above threshold", es(elastiv1alpha1.TriggerMetadata{Query: "high", Threshold: th("0.1")}), StateActive, ""},
		{"all must be idle", es(elastiv1alpha1.TriggerMetadata{Query: "low", Threshold: th("1")}, elastiv1alpha1.TriggerMetadata{Query: "high", Threshold: th("1")}), StateActive, ""},
		{"unhealthy wins over active", es(elastiv1alpha1.TriggerMetadata{Query: "high", Threshold: th("1")}, elastiv1alpha1.TriggerMetadata{Query: "empty", Threshold: th("1")}), StateUnhealthy, ReasonEmptyResult},
		{"NaN", es(elastiv1alpha1.TriggerMetadata{Query: "nan", Threshold: th("1")}), StateUnhealthy, ReasonNotANumber},
		{"query error", es(elastiv1alpha1.TriggerMetadata{Query: "sum(", Threshold: th("1")}), StateUnhealthy, ReasonQueryFailed},
		{"bad threshold", es(elastiv1alpha1.TriggerMetadata{Query: "low", Threshold: th("lots")}), StateUnhealthy, ReasonInvalidThreshold},
		{"unreachable", es(elastiv1alpha1.TriggerMetadata{ServerAddress: "http://127.0.0.1:1", Query: "low", Threshold: th("1")}), StateUnhealthy, ReasonPrometheusUnreachable},
		{"uptime ok", es(elastiv1alpha1.TriggerMetadata{Query: "low", Threshold: th("1"), UptimeFilter: `job="prom"`}), StateIdle, ""},
		{"prometheus was down", es(elastiv1alpha1.TriggerMetadata{Query: "low", Threshold: th("1"), UptimeFilter: `job="flaky"`}), StateUnhealthy, ReasonPrometheusWasDown},
		{"no triggers never idle", es(), StateActive, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ev.Evaluate(context.Background(), tc.es)
			if got.State != tc.wantState || got.Reason != tc.wantReason {
				t.Errorf("got %+v, want %s/%s", got, tc.wantState, tc.wantReason)
			}
		})
	}
	if r := (&Evaluator{}).Evaluate(context.Background(), es(elastiv1alpha1.TriggerMetadata{Query: "low"})); r.Reason != ReasonNoServerAddress {
		t.Errorf("no address: %+v", r)
	}
	unknown := es(elastiv1alpha1.TriggerMetadata{Query: "low", Threshold: th("1")}, elastiv1alpha1.TriggerMetadata{Query: "low", Threshold: th("1")})
	unknown.Spec.Triggers[1].Type = "cron"
	if r := ev.Evaluate(context.Background(), unknown); r.Reason != ReasonUnsupportedTrigger || r.Message != `trigger 1: trigger type "cron" is not supported` {
		t.Errorf("unsupported type: %+v", r)
	}
}

func TestEvaluatorHeadersAndBearer(t *testing.T) {
	seen := make(chan http.Header, 1)
	url := fakePrometheus(t, map[string]string{"low": vector("0")}, seen)
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	secrets := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "prom-auth"}, Data: map[string][]byte{"token": []byte("s3cret\n")},
	}).Build()
	e := &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{Namespace: "n"}, Spec: elastiv1alpha1.ElastiServiceSpec{Triggers: []elastiv1alpha1.ScaleTrigger{{
		Type: elastiv1alpha1.TriggerTypePrometheus, Metadata: elastiv1alpha1.TriggerMetadata{
			ServerAddress: url, Query: "low", Headers: map[string]string{"X-Scope-OrgID": "team-a"},
			AuthSecretRef: &elastiv1alpha1.SecretKeySelector{Name: "prom-auth", Key: "token"},
		},
	}}}}
	r := (&Evaluator{Secrets: secrets}).Evaluate(context.Background(), e)
	if r.State != StateActive { // value 0 is not below threshold 0
		t.Fatalf("result %+v", r)
	}
	h := <-seen
	if diff := cmp.Diff([]string{"Bearer s3cret", "team-a"}, []string{h.Get("Authorization"), h.Get("X-Scope-OrgID")}); diff != "" {
		t.Errorf("headers (-want +got)\n%s", diff)
	}
	e.Spec.Triggers[0].Metadata.AuthSecretRef.Name = "missing"
	if r := (&Evaluator{Secrets: secrets}).Evaluate(context.Background(), e); r.Reason != ReasonAuthSecretUnavailable {
		t.Errorf("missing secret: %+v", r)
	}
}
