package activation

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
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
)

// reviewCacheTTL is how long a successful review is remembered, so a burst of
// calls costs one TokenReview. Projected tokens live an hour or more.
const reviewCacheTTL = time.Minute

// Authenticator verifies bearer tokens with the TokenReview API and
// accepts only one ServiceAccount.
type Authenticator struct {
	// Client creates TokenReviews.
	Client client.Client
	// ServiceAccountNamespace and ServiceAccountName name the only accepted
	// caller, the resolver's ServiceAccount.
	ServiceAccountNamespace, ServiceAccountName string
	// Audiences, if set, are requested in the review and one of them must
	// be granted.
	Audiences []string
	// Clock times the review cache; nil means the real clock.
	Clock clock.PassiveClock

	mu    sync.Mutex
	valid map[[32]byte]time.Time
}

// AllowedUsername is the username a TokenReview returns for the accepted
// ServiceAccount.
func (a *Authenticator) AllowedUsername() string {
	return fmt.Sprintf("system:serviceaccount:%s:%s", a.ServiceAccountNamespace, a.ServiceAccountName)
}

// Authenticate returns nil for a valid token of the allowed ServiceAccount,
// an error wrapping ErrUnauthenticated or ErrForbidden when the
// caller must be refused, and any other error when the review itself failed.
func (a *Authenticator) Authenticate(ctx context.Context, token string) error {
	sum := sha256.Sum256([]byte(token))
	now := a.now()
	a.mu.Lock()
	if exp, ok := a.valid[sum]; ok && now.Before(exp) {
		a.mu.Unlock()
		return nil
	}
	a.mu.Unlock()

	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: a.Audiences}}
	if err := a.Client.Create(ctx, tr); err != nil {
		return fmt.Errorf("create TokenReview: %w", err)
	}
	if err := checkReview(tr.Status, a.AllowedUsername(), a.Audiences); err != nil {
		return err
	}
	a.mu.Lock()
	if a.valid == nil || len(a.valid) > 1024 {
		a.valid = map[[32]byte]time.Time{}
	}
	a.valid[sum] = now.Add(reviewCacheTTL)
	a.mu.Unlock()
	return nil
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
