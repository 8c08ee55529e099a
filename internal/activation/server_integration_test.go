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

// TestServerWithTokenReview runs the activation server against a real
// kube-apiserver: ServiceAccount tokens from the TokenRequest API are
// verified with TokenReview.
func TestServerWithTokenReview(t *testing.T) {
	ctx := context.Background()
	for _, ns := range []string{"elasti-system", "tenant"} {
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	token := func(ns, name string, audiences ...string) string {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if err := k8s.Create(ctx, sa); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
		tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600)), Audiences: audiences}}
		if err := k8s.SubResource("token").Create(ctx, sa, tr); err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	w := &fakeWaker{}
	srv := &Server{Addr: "127.0.0.1:0", Waker: w, Authenticator: &Authenticator{
		Client: k8s, ServiceAccountNamespace: "elasti-system", ServiceAccountName: "elasti-resolver",
	}}
	addr, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Start(sctx) }()
	t.Cleanup(func() { cancel(); <-done })

	call := func(tok string) int {
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
	}
	for _, tc := range []struct {
		name, token string
		want        int
	}{
		{"resolver ServiceAccount", token("elasti-system", "elasti-resolver"), http.StatusOK},
		{"no token", "", http.StatusUnauthorized},
		{"forged token", "eyJhbGciOiJSUzI1NiJ9.e30.c2ln", http.StatusUnauthorized},
		{"another ServiceAccount", token("elasti-system", "default-reader"), http.StatusForbidden},
		{"same name, other namespace", token("tenant", "elasti-resolver"), http.StatusForbidden},
		{"token for another audience", token("elasti-system", "elasti-resolver", "vault"), http.StatusUnauthorized},
	} {
		if got := call(tc.token); got != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, got, tc.want)
		}
	}
	if w.calls.Load() != 1 {
		t.Errorf("waker called %d times, want once (only for the accepted call)", w.calls.Load())
	}
}
