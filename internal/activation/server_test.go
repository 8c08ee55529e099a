package activation

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"elasti.dev/elasti/internal/contract"
)

// reviewer is a fake API server that knows a few tokens.
func reviewer(t *testing.T, users map[string]string, reviews *atomic.Int32) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = authenticationv1.AddToScheme(scheme)
	return fake.NewClientBuilder().WithScheme(scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
			tr, ok := obj.(*authenticationv1.TokenReview)
			if !ok {
				return errors.New("unexpected create")
			}
			reviews.Add(1)
			if tr.Spec.Token == "explode" {
				return errors.New("apiserver down")
			}
			if u, ok := users[tr.Spec.Token]; ok {
				tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: u}}
			} else {
				tr.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
			}
			return nil
		},
	}).Build()
}

type fakeWaker struct{ calls atomic.Int32 }

func (f *fakeWaker) Wake(_ context.Context, key types.NamespacedName) (WakeResult, error) {
	f.calls.Add(1)
	switch key.Name {
	case "missing":
		return WakeResult{}, nil
	case "slow":
		return WakeResult{}, context.DeadlineExceeded
	}
	return WakeResult{Found: true, Replicas: 2}, nil
}

func TestServer(t *testing.T) {
	var reviews atomic.Int32
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	auth := &Authenticator{
		Client:                  reviewer(t, map[string]string{"good": "system:serviceaccount:elasti-system:elasti-resolver", "other": "system:serviceaccount:default:default"}, &reviews),
		ServiceAccountNamespace: "elasti-system", ServiceAccountName: "elasti-resolver", Clock: fc,
	}
	w := &fakeWaker{}
	h := (&Server{Authenticator: auth, Waker: w}).Handler()
	body := func(ns, name string) string { return `{"namespace":"` + ns + `","elastiService":"` + name + `"}` }
	for _, tc := range []struct {
		name, method, auth, body string
		want                     int
		wantBody                 string
	}{
		{"ok", http.MethodPost, "Bearer good", body("demo", "web"), 200, `{"replicas":2}`},
		{"lower-case scheme", http.MethodPost, "bearer good", body("demo", "web"), 200, `{"replicas":2}`},
		{"GET", http.MethodGet, "Bearer good", "", 405, ""},
		{"no token", http.MethodPost, "", body("demo", "web"), 401, ""},
		{"basic auth", http.MethodPost, "Basic Zm9vOmJhcg==", body("demo", "web"), 401, ""},
		{"invalid token", http.MethodPost, "Bearer forged", body("demo", "web"), 401, ""},
		{"wrong identity", http.MethodPost, "Bearer other", body("demo", "web"), 403, ""},
		{"review fails", http.MethodPost, "Bearer explode", body("demo", "web"), 503, ""},
		{"bad json", http.MethodPost, "Bearer good", `{"namespace":`, 400, ""},
		{"unknown field", http.MethodPost, "Bearer good", `{"namespace":"a","elastiService":"b","x":1}`, 400, ""},
		{"bad namespace", http.MethodPost, "Bearer good", body("Demo_1", "web"), 400, ""},
		{"empty name", http.MethodPost, "Bearer good", body("demo", ""), 400, ""},
		{"huge body", http.MethodPost, "Bearer good", `{"namespace":"` + strings.Repeat("a", 10000) + `"}`, 400, ""},
		{"unknown ElastiService", http.MethodPost, "Bearer good", body("demo", "missing"), 404, ""},
		{"wake times out", http.MethodPost, "Bearer good", body("demo", "slow"), 503, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, contract.ActivationPath, strings.NewReader(tc.body))
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.want, rec.Body)
			}
			if tc.wantBody != "" && strings.TrimSpace(rec.Body.String()) != tc.wantBody {
				t.Fatalf("body %q", rec.Body)
			}
		})
	}
	// Successful reviews are cached for a minute.
	before := reviews.Load()
	for i := 0; i < 3; i++ {
		if err := auth.Authenticate(context.Background(), "10.0.0.1", "good"); err != nil {
			t.Fatal(err)
		}
	}
	if reviews.Load() != before {
		t.Errorf("cached token reviewed again")
	}
	fc.Step(2 * time.Minute)
	if err := auth.Authenticate(context.Background(), "10.0.0.1", "good"); err != nil || reviews.Load() != before+1 {
		t.Errorf("expired cache entry not reviewed: %v", err)
	}
}

func TestCheckReview(t *testing.T) {
	const me = "system:serviceaccount:ns:sa"
	ok := authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: me}, Audiences: []string{"elasti"}}
	for _, tc := range []struct {
		name string
		st   authenticationv1.TokenReviewStatus
		aud  []string
		want error
	}{
		{"ok", ok, nil, nil},
		{"audience ok", ok, []string{"elasti"}, nil},
		{"wrong audience", ok, []string{"other"}, ErrUnauthenticated},
		{"not authenticated", authenticationv1.TokenReviewStatus{}, nil, ErrUnauthenticated},
		{"other user", authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "system:serviceaccount:ns:other"}}, nil, ErrForbidden},
	} {
		if err := checkReview(tc.st, me, tc.aud); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
}
