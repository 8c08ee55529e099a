package activation

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"elasti.dev/elasti/internal/contract"
)

func writeToken(t *testing.T, path, token string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestClientActivate(t *testing.T) {
	type seen struct {
		Method, Path, Auth, ContentType string
		Body                            contract.ActivationRequest
	}
	tests := []struct {
		name       string
		status     int
		answer     string
		wantResp   *contract.ActivationResponse
		wantStatus int // 0: no StatusError expected
	}{
		{name: "accepted", status: 200, answer: `{"replicas":2}`, wantResp: &contract.ActivationResponse{Replicas: 2}},
		{name: "unauthenticated", status: 401, answer: "the token is not valid", wantStatus: 401},
		{name: "forbidden", status: 403, answer: "no", wantStatus: 403},
		{name: "not found", status: 404, answer: "ElastiService x not found", wantStatus: 404},
		{name: "retry later", status: 503, answer: "retry", wantStatus: 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got seen
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got = seen{Method: r.Method, Path: r.URL.Path, Auth: r.Header.Get("Authorization"), ContentType: r.Header.Get("Content-Type")}
				_ = json.NewDecoder(r.Body).Decode(&got.Body)
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.answer))
			}))
			defer srv.Close()
			tokenPath := filepath.Join(t.TempDir(), "token")
			writeToken(t, tokenPath, "tok-1")
			c := NewClient(ClientOptions{OperatorURL: srv.URL + "/", TokenPath: tokenPath})
			resp, err := c.Activate(context.Background(), "demo", "web")

			want := seen{Method: "POST", Path: contract.ActivationPath, Auth: "Bearer tok-1", ContentType: "application/json",
				Body: contract.ActivationRequest{Namespace: "demo", ElastiService: "web"}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantResp, resp); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
			var ce *StatusError
			switch {
			case tt.wantStatus == 0 && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tt.wantStatus != 0 && (!errors.As(err, &ce) || ce.HTTPStatus() != tt.wantStatus):
				t.Fatalf("error = %v, want a StatusError with status %d", err, tt.wantStatus)
			}
		})
	}
}

func TestClientReadsTokenOnEveryCall(t *testing.T) {
	var mu sync.Mutex
	var auths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = w.Write([]byte(`{"replicas":1}`))
	}))
	defer srv.Close()
	tokenPath := filepath.Join(t.TempDir(), "token")
	c := NewClient(ClientOptions{OperatorURL: srv.URL, TokenPath: tokenPath})
	for _, tok := range []string{"first", "rotated"} {
		writeToken(t, tokenPath, tok)
		if _, err := c.Activate(context.Background(), "demo", "web"); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string{"Bearer first", "Bearer rotated"}, auths); diff != "" {
		t.Errorf("Authorization headers (-want +got):\n%s", diff)
	}

	if err := os.Remove(tokenPath); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Activate(context.Background(), "demo", "web"); err == nil {
		t.Error("Activate without a token file succeeded")
	}
}

func TestClientDeduplicatesInFlightCalls(t *testing.T) {
	var calls atomic.Int32
	release := make(chan struct{})
	arrived := make(chan struct{}, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		arrived <- struct{}{}
		<-release
		_, _ = w.Write([]byte(`{"replicas":1}`))
	}))
	defer srv.Close()
	tokenPath := filepath.Join(t.TempDir(), "token")
	writeToken(t, tokenPath, "tok")
	c := NewClient(ClientOptions{OperatorURL: srv.URL, TokenPath: tokenPath})

	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n+1)
	for range n {
		wg.Go(func() {
			_, err := c.Activate(context.Background(), "demo", "web")
			errs <- err
		})
	}
	<-arrived // one call for demo/web reached the server
	// A different ElastiService is not merged with it.
	wg.Go(func() {
		_, err := c.Activate(context.Background(), "demo", "other")
		errs <- err
	})
	<-arrived
	// A caller that gives up returns at once; the shared call goes on.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Activate(ctx, "demo", "web"); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled caller got %v, want context.Canceled", err)
	}
	// While the first call is in flight every call for demo/web joins it,
	// so exactly one call per ElastiService has reached the server.
	if got := calls.Load(); got != 2 {
		t.Errorf("server saw %d calls while one was in flight, want 2 (one per ElastiService)", got)
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Activate: %v", err)
		}
	}
}
