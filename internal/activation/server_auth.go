package activation

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Authentication outcomes.
var (
	// ErrUnauthenticated: the token is not valid.
	ErrUnauthenticated = errors.New("token not authenticated")
	// ErrForbidden: the token is valid but names another identity.
	ErrForbidden = errors.New("identity not allowed to activate")
	// ErrRateLimited: the caller's address asked for too many token reviews;
	// the token was not looked at.
	ErrRateLimited = errors.New("too many token reviews from this source")
)

const (
	// reviewCacheTTL is how long a successful review is remembered, so a
	// burst of calls costs one TokenReview. It is cut short when the token
	// itself expires sooner.
	reviewCacheTTL = time.Minute
	// refusalCacheTTL is how long a refused token stays refused without a
	// new review. Short, because a refusal can be transient: a pod-bound
	// token is refused until the API server sees its pod.
	refusalCacheTTL = 10 * time.Second
	// maxCachedTokens bounds each of the two caches.
	maxCachedTokens = 1024
)

// Authenticator verifies bearer tokens with the TokenReview API and
// accepts only one ServiceAccount. It remembers accepted tokens until
// reviewCacheTTL or their expiry, whichever comes first, and refused ones
// for refusalCacheTTL; reviews of tokens in neither cache are rate-limited
// per source address.
type Authenticator struct {
	// Client creates TokenReviews.
	Client client.Client
	// ServiceAccountNamespace and ServiceAccountName name the only accepted
	// caller, the resolver's ServiceAccount.
	ServiceAccountNamespace, ServiceAccountName string
	// Audiences, if set, are requested in the review and one of them must
	// be granted. The operator requires Audience unless told otherwise.
	Audiences []string
	// Clock times the caches and the rate limit; nil means the real clock.
	Clock clock.PassiveClock
	// ReviewsPerSecond and ReviewBurst limit the TokenReviews one source
	// address may cause; zero means DefaultReviewsPerSecond and
	// DefaultReviewBurst.
	ReviewsPerSecond float64
	ReviewBurst      int

	mu      sync.Mutex
	valid   map[[32]byte]time.Time
	refused map[[32]byte]refusal
	sources sourceLimiters
}

// refusal is a cached refused review: the error to answer with, and until
// when.
type refusal struct {
	err   error
	until time.Time
}

// AllowedUsername is the username a TokenReview returns for the accepted
// ServiceAccount.
func (a *Authenticator) AllowedUsername() string {
	return fmt.Sprintf("system:serviceaccount:%s:%s", a.ServiceAccountNamespace, a.ServiceAccountName)
}

// Authenticate returns nil for a valid token of the allowed ServiceAccount,
// an error wrapping ErrUnauthenticated or ErrForbidden when the caller must
// be refused, ErrRateLimited when source (the caller's IP address) has
// caused too many reviews lately, and any other error when the review
// itself failed. Tokens in either cache are answered without a review and
// without counting against source's limit.
func (a *Authenticator) Authenticate(ctx context.Context, source, token string) error {
	sum := sha256.Sum256([]byte(token))
	now := a.now()
	a.mu.Lock()
	if until, ok := a.valid[sum]; ok && now.Before(until) {
		a.mu.Unlock()
		return nil
	}
	if r, ok := a.refused[sum]; ok && now.Before(r.until) {
		a.mu.Unlock()
		return r.err
	}
	allowed := a.sources.allow(source, now, a.ReviewsPerSecond, a.ReviewBurst)
	a.mu.Unlock()
	if !allowed {
		return ErrRateLimited
	}

	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: a.Audiences}}
	if err := a.Client.Create(ctx, tr); err != nil {
		return fmt.Errorf("create TokenReview: %w", err)
	}
	if err := checkReview(tr.Status, a.AllowedUsername(), a.Audiences); err != nil {
		a.mu.Lock()
		a.refused = remember(a.refused, now, func(r refusal) time.Time { return r.until })
		a.refused[sum] = refusal{err: err, until: now.Add(refusalCacheTTL)}
		a.mu.Unlock()
		return err
	}
	until := now.Add(reviewCacheTTL)
	if exp, ok := tokenExpiry(token); ok && exp.Before(until) {
		until = exp
	}
	a.mu.Lock()
	a.valid = remember(a.valid, now, func(t time.Time) time.Time { return t })
	a.valid[sum] = until
	a.mu.Unlock()
	return nil
}

// remember makes room in a token cache for one more entry: it drops the
// entries expired at now and, if the cache is still full, all of them.
// A nil cache is allocated.
func remember[V any](cache map[[32]byte]V, now time.Time, until func(V) time.Time) map[[32]byte]V {
	if cache == nil {
		return map[[32]byte]V{}
	}
	if len(cache) < maxCachedTokens {
		return cache
	}
	for k, v := range cache {
		if !now.Before(until(v)) {
			delete(cache, k)
		}
	}
	if len(cache) >= maxCachedTokens {
		clear(cache)
	}
	return cache
}

// checkReview decides on a TokenReview's status.
func checkReview(st authenticationv1.TokenReviewStatus, allowed string, audiences []string) error {
	if !st.Authenticated {
		if st.Error != "" {
			return fmt.Errorf("%w: %s", ErrUnauthenticated, st.Error)
		}
		return ErrUnauthenticated
	}
	if len(audiences) > 0 && !intersects(audiences, st.Audiences) {
		return fmt.Errorf("%w: the token is not for audience %v", ErrUnauthenticated, audiences)
	}
	if st.User.Username != allowed {
		return fmt.Errorf("%w: %s is not %s", ErrForbidden, st.User.Username, allowed)
	}
	return nil
}

// tokenExpiry reads the exp claim of a JWT. It verifies nothing: it is
// called only on a token a TokenReview has just accepted, to keep the
// acceptance from being cached past the token's own end.
func tokenExpiry(token string) (time.Time, bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, false
	}
	var claims struct {
		Exp json.Number `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Exp == "" {
		return time.Time{}, false
	}
	// A NumericDate may have a fraction; whole seconds are enough here, and
	// rounding down ends the cache entry no later than the token.
	secs, err := claims.Exp.Float64()
	if err != nil || secs <= 0 || secs > 1<<40 {
		return time.Time{}, false
	}
	return time.Unix(int64(secs), 0), true
}

func intersects(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}

func (a *Authenticator) now() time.Time {
	if a.Clock == nil {
		return time.Now()
	}
	return a.Clock.Now()
}
