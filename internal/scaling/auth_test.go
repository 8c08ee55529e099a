package scaling

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	elastiv1alpha1 "elasti.dev/elasti/api/v1alpha1"
)

// authSecrets is a fake Secret reader holding, in namespace n: basic (a
// kubernetes.io/basic-auth Secret whose password ends in a newline),
// no-password (without the password key), colon (a username with a colon)
// and token (a bearer token). Reading the Secret named forbidden fails as
// the API server does without a Role.
func authSecrets() client.Reader {
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	_ = discoveryv1.AddToScheme(scheme)
	secret := func(name string, typ corev1.SecretType, data map[string]string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: name}, Type: typ, Data: map[string][]byte{}}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		return s
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		secret("basic", corev1.SecretTypeBasicAuth, map[string]string{"username": "alice", "password": "pa ss:word\n"}),
		secret("no-password", corev1.SecretTypeOpaque, map[string]string{"username": "alice"}),
		secret("colon", corev1.SecretTypeBasicAuth, map[string]string{"username": "a:b", "password": "x"}),
		secret("token", corev1.SecretTypeOpaque, map[string]string{"token": "t0ken"}),
	).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if key.Name == "forbidden" {
				return apierrors.NewForbidden(corev1.Resource("secrets"), key.Name, nil)
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}).Build()
}

func prometheusTrigger(address string, md elastiv1alpha1.TriggerMetadata) *elastiv1alpha1.ElastiService {
	md.ServerAddress, md.Query = address, "low"
	return &elastiv1alpha1.ElastiService{ObjectMeta: metav1.ObjectMeta{Namespace: "n"}, Spec: elastiv1alpha1.ElastiServiceSpec{Triggers: []elastiv1alpha1.ScaleTrigger{{
		Type: elastiv1alpha1.TriggerTypePrometheus, Metadata: md,
	}}}}
}

func TestEvaluatorBasicAuth(t *testing.T) {
	seen := make(chan http.Header, 1)
	url := fakePrometheus(t, map[string]string{"low": vector("0")}, seen)
	ev := &Evaluator{Secrets: authSecrets(), Timeout: 5 * time.Second}
	es := prometheusTrigger(url, elastiv1alpha1.TriggerMetadata{
		Threshold:          ptr.To(elastiv1alpha1.Threshold("1")),
		Headers:            map[string]string{"X-Scope-OrgID": "team-a"},
		BasicAuthSecretRef: &elastiv1alpha1.LocalSecretReference{Name: "basic"},
	})
	if r := ev.Evaluate(context.Background(), es); r.State != StateIdle {
		t.Fatalf("result %+v", r)
	}
	h := <-seen
	req := &http.Request{Header: h}
	user, password, ok := req.BasicAuth()
	// The password's trailing newline is dropped; its space and colon are kept.
	if diff := cmp.Diff([]any{true, "alice", "pa ss:word", "team-a"}, []any{ok, user, password, h.Get("X-Scope-OrgID")}); diff != "" {
		t.Errorf("basic auth and tenant (-want +got)\n%s", diff)
	}
}

func TestEvaluatorAuthSecretUnavailable(t *testing.T) {
	// No server answers: every case fails before a query is sent.
	ev := &Evaluator{Secrets: authSecrets(), Timeout: time.Second}
	for _, tc := range []struct {
		name   string
		md     elastiv1alpha1.TriggerMetadata
		wantIn string
	}{
		{"missing Secret", elastiv1alpha1.TriggerMetadata{BasicAuthSecretRef: &elastiv1alpha1.LocalSecretReference{Name: "missing"}}, "read Secret n/missing"},
		{"missing password key", elastiv1alpha1.TriggerMetadata{BasicAuthSecretRef: &elastiv1alpha1.LocalSecretReference{Name: "no-password"}}, `Secret n/no-password has no key "password"`},
		{"missing username key", elastiv1alpha1.TriggerMetadata{BasicAuthSecretRef: &elastiv1alpha1.LocalSecretReference{Name: "token"}}, `Secret n/token has no key "username"`},
		{"colon in the username", elastiv1alpha1.TriggerMetadata{BasicAuthSecretRef: &elastiv1alpha1.LocalSecretReference{Name: "colon"}}, `Secret n/colon key "username" holds a colon`},
		{"forbidden", elastiv1alpha1.TriggerMetadata{BasicAuthSecretRef: &elastiv1alpha1.LocalSecretReference{Name: "forbidden"}}, "the operator may not read Secret n/forbidden: grant it with a Role"},
		{"forbidden bearer", elastiv1alpha1.TriggerMetadata{AuthSecretRef: &elastiv1alpha1.SecretKeySelector{Name: "forbidden", Key: "token"}}, "the operator may not read Secret n/forbidden"},
		{"missing bearer key", elastiv1alpha1.TriggerMetadata{AuthSecretRef: &elastiv1alpha1.SecretKeySelector{Name: "basic", Key: "token"}}, `Secret n/basic has no key "token"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ev.Evaluate(context.Background(), prometheusTrigger("http://127.0.0.1:1", tc.md))
			if r.State != StateUnhealthy || r.Reason != ReasonAuthSecretUnavailable || !strings.Contains(r.Message, tc.wantIn) {
				t.Errorf("got %+v; want %s with %q", r, ReasonAuthSecretUnavailable, tc.wantIn)
			}
		})
	}
	if r := (&Evaluator{}).Evaluate(context.Background(), prometheusTrigger("http://127.0.0.1:1", elastiv1alpha1.TriggerMetadata{
		BasicAuthSecretRef: &elastiv1alpha1.LocalSecretReference{Name: "basic"},
	})); r.Reason != ReasonAuthSecretUnavailable || !strings.Contains(r.Message, "no Secret reader") {
		t.Errorf("no Secret reader: %+v", r)
	}
}

// TestEvaluatorHTTPStatus: a bare HTTP error status, as an auth proxy in
// front of Prometheus answers, is worded by what it means.
func TestEvaluatorHTTPStatus(t *testing.T) {
	var status int
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, body, status)
	}))
	t.Cleanup(srv.Close)
	ev := &Evaluator{Secrets: authSecrets(), Timeout: 5 * time.Second}
	basic := elastiv1alpha1.TriggerMetadata{BasicAuthSecretRef: &elastiv1alpha1.LocalSecretReference{Name: "basic"}}
	for _, tc := range []struct {
		name       string
		status     int
		body       string
		md         elastiv1alpha1.TriggerMetadata
		wantReason string
		wantIn     string
	}{
		{"401 without credentials", http.StatusUnauthorized, "missing 'Authorization' request header", elastiv1alpha1.TriggerMetadata{}, ReasonPrometheusUnauthorized,
			"refused the request for lack of credentials (HTTP 401 Unauthorized), and the trigger sends none: set metadata.authSecretRef (a bearer token) or metadata.basicAuthSecretRef"},
		{"401 with basic auth", http.StatusUnauthorized, "Unauthorized", basic, ReasonPrometheusUnauthorized,
			"refused the credentials (HTTP 401 Unauthorized): check the username and password in Secret n/basic"},
		{"401 with a bearer token", http.StatusUnauthorized, "Unauthorized", elastiv1alpha1.TriggerMetadata{AuthSecretRef: &elastiv1alpha1.SecretKeySelector{Name: "token", Key: "token"}}, ReasonPrometheusUnauthorized,
			"refused the credentials (HTTP 401 Unauthorized): check the bearer token in Secret n/token key token"},
		{"403 with basic auth", http.StatusForbidden, "no", basic, ReasonPrometheusUnauthorized,
			"refused the credentials (HTTP 403 Forbidden): the username and password in Secret n/basic may not run this query"},
		{"502 from a proxy", http.StatusBadGateway, "upstream down\nmore detail", elastiv1alpha1.TriggerMetadata{}, ReasonPrometheusUnreachable,
			"answered HTTP 502 Bad Gateway instead of a query result"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body = tc.status, tc.body
			r := ev.Evaluate(context.Background(), prometheusTrigger(srv.URL, tc.md))
			if r.State != StateUnhealthy || r.Reason != tc.wantReason || !strings.Contains(r.Message, tc.wantIn) || !strings.Contains(r.Message, "the server at "+srv.URL) {
				t.Errorf("got %+v\nwant %s with %q", r, tc.wantReason, tc.wantIn)
			}
			if strings.Contains(r.Message, "upstream down") {
				t.Errorf("message %q holds the server's body", r.Message)
			}
		})
	}
}

func TestPodMetricsBasicAuth(t *testing.T) {
	pods, port := servePods(t, 1)
	scheme := runtime.NewScheme()
	_ = discoveryv1.AddToScheme(scheme)
	endpoints := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "n", Name: "web-abc", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{pods[0].addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "n", Name: "web-a", UID: "a"}}},
	}).Build()
	ev := &Evaluator{Endpoints: endpoints, Secrets: authSecrets(), Timeout: 5 * time.Second}
	es := &elastiv1alpha1.ElastiService{
		ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "web", UID: "es-1"},
		Spec: elastiv1alpha1.ElastiServiceSpec{Service: "web", CooldownPeriod: 60, Triggers: []elastiv1alpha1.ScaleTrigger{{
			Type: elastiv1alpha1.TriggerTypePodMetrics, Metadata: elastiv1alpha1.TriggerMetadata{
				MetricName: "http_requests_total", Port: port, Path: "/stats", Threshold: ptr.To(elastiv1alpha1.Threshold("1")),
				BasicAuthSecretRef: &elastiv1alpha1.LocalSecretReference{Name: "basic"},
			},
		}}},
	}
	if r := ev.Evaluate(context.Background(), es); r.State != StateActive || !strings.Contains(r.Message, "not enough history yet") {
		t.Fatalf("first scrape: %+v", r)
	}
	var h http.Header
	pods[0].set(func(p *fakePod) { h = p.header })
	user, password, ok := (&http.Request{Header: h}).BasicAuth()
	if diff := cmp.Diff([]any{true, "alice", "pa ss:word"}, []any{ok, user, password}); diff != "" {
		t.Errorf("scrape basic auth (-want +got)\n%s", diff)
	}

	es.Spec.Triggers[0].Metadata.BasicAuthSecretRef.Name = "no-password"
	if r := ev.Evaluate(context.Background(), es); r.Reason != ReasonAuthSecretUnavailable || !strings.Contains(r.Message, `Secret n/no-password has no key "password"`) {
		t.Errorf("missing key: %+v", r)
	}
}

// TestTriggerServerCannotSpeakThroughStatus: the server a trigger names is
// the ElastiService author's to choose, so it may be theirs. A redirect is
// not followed (the query and the credentials go nowhere else), and
// nothing the server writes (an error body, a Prometheus error message)
// reaches the status the author reads; an answer is read up to a bound.
func TestTriggerServerCannotSpeakThroughStatus(t *testing.T) {
	other := make(chan http.Header, 10)
	elsewhere := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { other <- r.Header.Clone() }))
	t.Cleanup(elsewhere.Close)
	var answer func(w http.ResponseWriter, r *http.Request)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { answer(w, r) }))
	t.Cleanup(srv.Close)
	ev := &Evaluator{Secrets: authSecrets(), Timeout: 5 * time.Second}
	token := elastiv1alpha1.TriggerMetadata{AuthSecretRef: &elastiv1alpha1.SecretKeySelector{Name: "token", Key: "token"}}
	for _, tc := range []struct {
		name   string
		answer func(w http.ResponseWriter, r *http.Request)
		reason string
	}{
		{"a redirect to another host", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, elsewhere.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
		}, ReasonPrometheusUnreachable},
		{"a Prometheus error that echoes the request", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"status":"error","errorType":"bad_data","error":"ECHO %s"}`, r.Header.Get("Authorization"))
		}, ReasonQueryFailed},
		{"a Prometheus error type that echoes the request", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnprocessableEntity)
			fmt.Fprintf(w, `{"status":"error","errorType":"ECHO %s","error":"x"}`, r.Header.Get("Authorization"))
		}, ReasonQueryFailed},
		{"an error page that echoes the request", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "ECHO "+r.Header.Get("Authorization"), http.StatusInternalServerError)
		}, ReasonPrometheusUnreachable},
		{"an answer past the bound", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[],"x":"`)
			_, _ = w.Write(bytes.Repeat([]byte("E"), 2*maxAnswer))
			fmt.Fprint(w, `"}}`)
		}, ReasonPrometheusUnreachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer = tc.answer
			r := ev.Evaluate(context.Background(), prometheusTrigger(srv.URL, token))
			if r.State != StateUnhealthy || r.Reason != tc.reason {
				t.Errorf("got %+v; want unhealthy, %s", r, tc.reason)
			}
			if strings.Contains(r.Message, "ECHO") || strings.Contains(r.Message, "t0ken") || strings.Contains(r.Message, "EEEE") {
				t.Errorf("the status message carries what the server wrote: %q", r.Message)
			}
			t.Logf("%s: %s", r.Reason, r.Message)
			select {
			case h := <-other:
				t.Errorf("the other host got a request, Authorization %q", h.Get("Authorization"))
			default:
			}
		})
	}
}
