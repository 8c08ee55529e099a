package activation

import (
	"time"

	"golang.org/x/time/rate"
)

// Defaults of the per-source TokenReview limit. The resolver needs one
// review per token rotation and replica restart; anything near this rate
// is a caller trying tokens.
const (
	DefaultReviewsPerSecond = 5
	DefaultReviewBurst      = 10
)

const (
	// maxSources bounds the number of source addresses with a limiter.
	maxSources = 1024
	// sourceIdle is how long a source goes without a review before its
	// limiter may be dropped. It exceeds the time a limiter at the default
	// rate takes to refill its burst, so a dropped limiter was full and
	// dropping it forgives nothing.
	sourceIdle = time.Minute
)

// sourceLimiters holds one token-bucket limiter per source address. It is
// not safe for concurrent use; the Authenticator's mutex guards it.
type sourceLimiters struct {
	m map[string]*sourceLimiter
}

type sourceLimiter struct {
	lim  *rate.Limiter
	seen time.Time
}

// allow reports whether source may cause one more TokenReview at now, and
// counts it if so. perSecond and burst of zero mean the defaults.
func (s *sourceLimiters) allow(source string, now time.Time, perSecond float64, burst int) bool {
	if perSecond <= 0 {
		perSecond = DefaultReviewsPerSecond
	}
	if burst <= 0 {
		burst = DefaultReviewBurst
	}
	if s.m == nil {
		s.m = map[string]*sourceLimiter{}
	}
	l, ok := s.m[source]
	if !ok {
		s.makeRoom(now)
		l = &sourceLimiter{lim: rate.NewLimiter(rate.Limit(perSecond), burst)}
		s.m[source] = l
	}
	l.seen = now
	return l.lim.AllowN(now, 1)
}

// makeRoom keeps the map below maxSources: it drops the limiters idle for
// sourceIdle and, if none is, the one idle longest.
func (s *sourceLimiters) makeRoom(now time.Time) {
	if len(s.m) < maxSources {
		return
	}
	var oldest *string
	var oldestSeen time.Time
	for src, l := range s.m {
		if now.Sub(l.seen) >= sourceIdle {
			delete(s.m, src)
			continue
		}
		if oldest == nil || l.seen.Before(oldestSeen) {
			oldest, oldestSeen = &src, l.seen
		}
	}
	if len(s.m) >= maxSources && oldest != nil {
		delete(s.m, *oldest)
	}
}
