//go:build integration

package activation

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"elasti.dev/elasti/internal/contract"
	"elasti.dev/elasti/internal/testenv"
)

var k8s client.Client

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{}, func(e *testenv.Env) { k8s = e.Client })
}

// serviceAccountToken creates namespace/name's ServiceAccount if needed
// and returns a token for it from the TokenRequest API; no audiences means
// the API server's own.
func serviceAccountToken(t *testing.T, namespace, name string, audiences ...string) string {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if err := k8s.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := k8s.Create(ctx, sa); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600)), Audiences: audiences}}
	if err := k8s.SubResource("token").Create(ctx, sa, tr); err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// serve runs an activation server with auth until the test ends, and
// returns a function that makes one activation call with a token and
// returns the status code.
func serve(t *testing.T, auth *Authenticator) (call func(token string) int, waker *fakeWaker) {
	t.Helper()
	waker = &fakeWaker{}
	srv := &Server{Addr: "127.0.0.1:0", Waker: waker, Authenticator: auth}
	addr, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	return func(tok string) int {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr.String()+contract.ActivationPath,
			bytes.NewBufferString(`{"namespace":"tenant","elastiService":"web"}`))
		req.Header.Set("Content-Type", "application/json")
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}, waker
}

// TestServerWithTokenReview runs the activation server, configured as the
// operator is by default, against a real kube-apiserver: ServiceAccount
// tokens from the TokenRequest API are verified with TokenReview.
func TestServerWithTokenReview(t *testing.T) {
	call, w := serve(t, &Authenticator{
		Client: k8s, ServiceAccountNamespace: "elasti-system", ServiceAccountName: "elasti-resolver", Audiences: []string{Audience},
	})
	for _, tc := range []struct {
		name, token string
		want        int
	}{
		{"resolver ServiceAccount", serviceAccountToken(t, "elasti-system", "elasti-resolver", Audience), http.StatusOK},
		{"no token", "", http.StatusUnauthorized},
		{"forged token", "eyJhbGciOiJSUzI1NiJ9.e30.c2ln", http.StatusUnauthorized},
		{"another ServiceAccount", serviceAccountToken(t, "elasti-system", "default-reader", Audience), http.StatusForbidden},
		{"same name, other namespace", serviceAccountToken(t, "tenant", "elasti-resolver", Audience), http.StatusForbidden},
		{"token for another audience", serviceAccountToken(t, "elasti-system", "elasti-resolver", "vault"), http.StatusUnauthorized},
	} {
		if got := call(tc.token); got != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, got, tc.want)
		}
	}
	if w.calls.Load() != 1 {
		t.Errorf("waker called %d times, want once (only for the accepted call)", w.calls.Load())
	}
}

// TestServerRequiresActivationAudience: with the operator's default
// audiences, the resolver's own token for the API server is refused and
// a token for Audience accepted; and the API server does not accept the
// Audience token, so one seen on the wire cannot be used against it.
func TestServerRequiresActivationAudience(t *testing.T) {
	apiToken := serviceAccountToken(t, "elasti-system", "elasti-resolver")
	activationToken := serviceAccountToken(t, "elasti-system", "elasti-resolver", Audience)

	call, _ := serve(t, &Authenticator{
		Client: k8s, ServiceAccountNamespace: "elasti-system", ServiceAccountName: "elasti-resolver", Audiences: []string{Audience},
	})
	if got := call(apiToken); got != http.StatusUnauthorized {
		t.Errorf("token with the API server's audience: status %d, want 401", got)
	}
	if got := call(activationToken); got != http.StatusOK {
		t.Errorf("token with audience %s: status %d, want 200", Audience, got)
	}

	// Control: the API token is refused for its audience alone. Without a
	// required audience (--activation-audiences=) the same token passes.
	open, _ := serve(t, &Authenticator{Client: k8s, ServiceAccountNamespace: "elasti-system", ServiceAccountName: "elasti-resolver"})
	if got := open(apiToken); got != http.StatusOK {
		t.Errorf("token with the API server's audience, no audience required: status %d, want 200", got)
	}

	// The API server itself rejects the activation token.
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: activationToken}}
	if err := k8s.Create(context.Background(), tr); err != nil {
		t.Fatal(err)
	}
	if tr.Status.Authenticated {
		t.Errorf("the API server accepts a token for audience %s as %s", Audience, tr.Status.User.Username)
	}
}
