package activation

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"elasti.dev/elasti/internal/contract"
)

const resolverUser = "system:serviceaccount:elasti-system:elasti-resolver"

// jwtWith returns a JWT-shaped token whose payload is claims; the fake
// reviewer accepts whatever it is told to, so the signature is a dummy.
func jwtWith(claims string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(claims)) + ".c2ln"
}

// newTestAuth returns an Authenticator on a fake clock and fake reviewer
// that accepts "good" and the extra tokens as the resolver and "other" as
// another ServiceAccount.
func newTestAuth(t *testing.T, reviews *atomic.Int32, extra ...string) (*Authenticator, *clocktesting.FakeClock) {
	t.Helper()
	users := map[string]string{"good": resolverUser, "other": "system:serviceaccount:default:default"}
	for _, tok := range extra {
		users[tok] = resolverUser
	}
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	return &Authenticator{
		Client:                  reviewer(t, users, reviews),
		ServiceAccountNamespace: "elasti-system", ServiceAccountName: "elasti-resolver", Clock: fc,
	}, fc
}

// post sends one activation call from remote through h.
func post(h http.Handler, remote, token string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, contract.ActivationPath, strings.NewReader(`{"namespace":"demo","elastiService":"web"}`))
	req.RemoteAddr = remote
	req.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestRefusalsCached: a refused token is refused again from the cache,
// without a TokenReview, until refusalCacheTTL has passed; a failed review
// is not a refusal and is not cached.
func TestRefusalsCached(t *testing.T) {
	var reviews atomic.Int32
	auth, fc := newTestAuth(t, &reviews)
	h := (&Server{Authenticator: auth, Waker: &fakeWaker{}}).Handler()
	unauth := refusals.WithLabelValues(refusedUnauthenticated)
	before := testutil.ToFloat64(unauth)

	for i := 0; i < 3; i++ {
		if rec := post(h, "10.0.0.1:4000", "forged"); rec.Code != http.StatusUnauthorized {
			t.Fatalf("call %d: status %d, want 401", i, rec.Code)
		}
	}
	if n := reviews.Load(); n != 1 {
		t.Errorf("an unauthenticated token was reviewed %d times in a row, want once", n)
	}
	if got := testutil.ToFloat64(unauth) - before; got != 3 {
		t.Errorf("refusals{reason=unauthenticated} grew by %v, want 3", got)
	}

	for i := 0; i < 2; i++ {
		if err := auth.Authenticate(context.Background(), "10.0.0.1", "other"); !errors.Is(err, ErrForbidden) {
			t.Fatalf("call %d: %v, want ErrForbidden", i, err)
		}
	}
	if n := reviews.Load(); n != 2 {
		t.Errorf("after a forbidden token twice: %d reviews, want 2", n)
	}

	fc.Step(refusalCacheTTL)
	if err := auth.Authenticate(context.Background(), "10.0.0.1", "forged"); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("after the refusal expired: %v", err)
	}
	if n := reviews.Load(); n != 3 {
		t.Errorf("an expired refusal was not reviewed again: %d reviews, want 3", n)
	}

	for i := 0; i < 2; i++ {
		if err := auth.Authenticate(context.Background(), "10.0.0.1", "explode"); err == nil || errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("failed review: %v", err)
		}
	}
	if n := reviews.Load(); n != 5 {
		t.Errorf("a failed review was cached: %d reviews, want 5", n)
	}
}

// TestReviewRateLimit: reviews of uncached tokens are limited per source
// IP, beyond the burst with 429 and no review; other sources, and tokens
// either cache already decided, are not affected.
func TestReviewRateLimit(t *testing.T) {
	var reviews atomic.Int32
	auth, fc := newTestAuth(t, &reviews)
	h := (&Server{Authenticator: auth, Waker: &fakeWaker{}}).Handler()
	limited := refusals.WithLabelValues(refusedRateLimited)
	before := testutil.ToFloat64(limited)

	// One good and one refused token, decided before the flood.
	if rec := post(h, "10.0.0.1:4000", "good"); rec.Code != http.StatusOK {
		t.Fatalf("good token: %d", rec.Code)
	}
	if rec := post(h, "10.0.0.1:4000", "forged-0"); rec.Code != http.StatusUnauthorized {
		t.Fatalf("forged token: %d", rec.Code)
	}
	// The rest of the burst, each a new token from another port of the
	// same address.
	for i := 1; i < DefaultReviewBurst-2; i++ {
		if rec := post(h, fmt.Sprintf("10.0.0.1:%d", 4000+i), fmt.Sprintf("forged-%d", i)); rec.Code != http.StatusUnauthorized {
			t.Fatalf("call %d within the burst: status %d, want 401", i, rec.Code)
		}
	}
	if n := reviews.Load(); n != DefaultReviewBurst-1 {
		t.Fatalf("%d reviews within the burst, want %d", n, DefaultReviewBurst-1)
	}
	// Exactly the burst; the next review is over the limit.
	if rec := post(h, "10.0.0.1:5000", "forged-x"); rec.Code != http.StatusUnauthorized {
		t.Fatalf("last call of the burst: %d", rec.Code)
	}
	rec := post(h, "10.0.0.1:5001", "forged-y")
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("beyond the burst: status %d Retry-After %q, want 429 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
	}
	if n := reviews.Load(); n != DefaultReviewBurst {
		t.Errorf("a rate-limited call was reviewed: %d reviews, want %d", n, DefaultReviewBurst)
	}
	if got := testutil.ToFloat64(limited) - before; got != 1 {
		t.Errorf("refusals{reason=rate_limited} grew by %v, want 1", got)
	}

	// Cached decisions still answer for the limited source.
	if rec := post(h, "10.0.0.1:5002", "good"); rec.Code != http.StatusOK {
		t.Errorf("cached valid token from a limited source: %d, want 200", rec.Code)
	}
	if rec := post(h, "10.0.0.1:5003", "forged-0"); rec.Code != http.StatusUnauthorized {
		t.Errorf("cached refusal from a limited source: %d, want 401", rec.Code)
	}
	// Another source has its own budget.
	if rec := post(h, "10.0.0.2:4000", "forged-z"); rec.Code != http.StatusUnauthorized {
		t.Errorf("another source: %d, want 401", rec.Code)
	}
	if n := reviews.Load(); n != DefaultReviewBurst+1 {
		t.Errorf("%d reviews, want %d", n, DefaultReviewBurst+1)
	}
	// The limit refills at DefaultReviewsPerSecond.
	fc.Step(time.Second / DefaultReviewsPerSecond)
	if rec := post(h, "10.0.0.1:5004", "forged-y"); rec.Code != http.StatusUnauthorized {
		t.Errorf("after one refill interval: %d, want 401", rec.Code)
	}
}

// TestAcceptanceBoundedByExpiry: an accepted token is reviewed again once
// its exp claim has passed, even within reviewCacheTTL; a token that
// outlives the TTL is reviewed again after the TTL.
func TestAcceptanceBoundedByExpiry(t *testing.T) {
	short := jwtWith(`{"sub":"x","exp":1030}`) // the fake clock starts at 1000
	long := jwtWith(`{"exp":100000}`)
	var reviews atomic.Int32
	auth, fc := newTestAuth(t, &reviews, short, long)
	ctx := context.Background()
	check := func(when string, tok string, want int32) {
		t.Helper()
		if err := auth.Authenticate(ctx, "10.0.0.1", tok); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if n := reviews.Load(); n != want {
			t.Errorf("%s: %d reviews, want %d", when, n, want)
		}
	}
	check("first call, short token", short, 1)
	check("first call, long token", long, 2)
	fc.Step(29 * time.Second)
	check("short token 29s later", short, 2)
	fc.Step(time.Second)
	check("short token at its exp", short, 3)
	check("long token 30s later", long, 3)
	fc.Step(reviewCacheTTL - 30*time.Second)
	check("long token after reviewCacheTTL", long, 4)
}

func TestTokenExpiry(t *testing.T) {
	for _, tc := range []struct {
		name, token string
		want        int64 // Unix seconds; 0: no expiry found
	}{
		{"integer", jwtWith(`{"exp":1700000000}`), 1700000000},
		{"fraction", jwtWith(`{"exp":1700000000.9}`), 1700000000},
		{"no exp", jwtWith(`{"sub":"a"}`), 0},
		{"exp a string", jwtWith(`{"exp":"soon"}`), 0},
		{"exp negative", jwtWith(`{"exp":-5}`), 0},
		{"exp absurd", jwtWith(`{"exp":1e300}`), 0},
		{"payload not JSON", jwtWith(`exp=5`), 0},
		{"payload not base64", "a.!!!.c", 0},
		{"two parts", "a.b", 0},
		{"opaque", "good", 0},
	} {
		got, ok := tokenExpiry(tc.token)
		if ok != (tc.want != 0) || (ok && got.Unix() != tc.want) {
			t.Errorf("%s: got %v %v, want %d", tc.name, got, ok, tc.want)
		}
	}
}

// TestCachesBounded: neither token cache nor the limiter map grows past
// its bound; expired or idle entries go first.
func TestCachesBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	key := func(i int) [32]byte { return [32]byte{byte(i), byte(i >> 8), 1} }
	cache := map[[32]byte]time.Time{}
	for i := 0; i < maxCachedTokens; i++ {
		until := now.Add(time.Minute)
		if i%2 == 0 {
			until = now.Add(-time.Second)
		}
		cache[key(i)] = until
	}
	cache = remember(cache, now, func(t time.Time) time.Time { return t })
	if len(cache) != maxCachedTokens/2 {
		t.Errorf("a full cache with half expired kept %d entries, want %d", len(cache), maxCachedTokens/2)
	}
	for i := 0; len(cache) < maxCachedTokens; i++ {
		cache[key(100000+i)] = now.Add(time.Minute)
	}
	if cache = remember(cache, now, func(t time.Time) time.Time { return t }); len(cache) != 0 {
		t.Errorf("a full cache of live entries kept %d, want it cleared", len(cache))
	}

	var s sourceLimiters
	for i := 0; i < maxSources; i++ {
		s.allow(fmt.Sprintf("10.0.%d.%d", i/256, i%256), now.Add(time.Duration(i)*time.Millisecond), 0, 0)
	}
	s.allow("10.1.0.0", now.Add(time.Second*2), 0, 0)
	if _, ok := s.m["10.0.0.0"]; ok || len(s.m) != maxSources {
		t.Errorf("full, none idle: %d limiters, the longest idle kept: %v; want %d without it", len(s.m), ok, maxSources)
	}
	s.allow("10.1.0.0", now.Add(2*sourceIdle-time.Second), 0, 0)
	s.allow("10.2.0.0", now.Add(2*sourceIdle), 0, 0)
	if len(s.m) != 2 {
		t.Errorf("full, all but one idle: %d limiters left, want 2", len(s.m))
	}
}
