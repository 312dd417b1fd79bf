package retryhttp

import (
	"context"
	"net/http"
	"time"
)

// Test seams. Tests in package retryhttp_test reach internals through these.

// SetClock makes t read the time from now (for deadline checks).
func SetClock(t *Transport, now func() time.Time) { t.now = now }

// SetSleep replaces the wait between attempts.
func SetSleep(t *Transport, sleep func(ctx context.Context, d time.Duration) error) { t.sleep = sleep }

// DelayWith is the DelayFn of opts with the time and the random number given.
func DelayWith(opts CustomizedDelayFnOptions, a Attempt, now time.Time, r float64) time.Duration {
	return newDelayPolicy(opts).delay(a, func() time.Time { return now }, r)
}

// ParseRetryAfter exposes parseRetryAfter.
func ParseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	return parseRetryAfter(h, func() time.Time { return now })
}

// FullJitter exposes fullJitter.
func FullJitter(base, ceil time.Duration, n int, r float64) time.Duration {
	return fullJitter(base, ceil, n, r)
}

// MaxDrain is the bound on draining a discarded response body.
const MaxDrain = maxDrain

// ResolvedSettings are the settings one RoundTrip runs with: the transport's
// options, with the context's overrides applied and defaults filled in.
type ResolvedSettings struct {
	MaxRetries           int
	ShouldRetry          ShouldRetryFn
	Delay                DelayFn
	PreventRetryWithBody bool
	AttemptTimeout       time.Duration
	MaxDelay             time.Duration
	BodyBufferLimit      int64
}

// Settings resolves the settings of t for a request carrying ctx.
func Settings(t *Transport, ctx context.Context) ResolvedSettings {
	s := t.settings(ctx)
	return ResolvedSettings{
		MaxRetries:           s.maxRetries,
		ShouldRetry:          s.shouldRetry,
		Delay:                s.delay,
		PreventRetryWithBody: s.preventRetryWithBody,
		AttemptTimeout:       s.attemptTimeout,
		MaxDelay:             s.maxDelay,
		BodyBufferLimit:      s.bodyBufferLimit,
	}
}

// BaseTransport exposes the transport that sends each attempt.
func BaseTransport(t *Transport) http.RoundTripper { return t.baseTransport() }

// SetHedgeGate makes t ask allow, instead of the retry budget, before every
// attempt of a hedged request after the first.
func SetHedgeGate(t *Transport, allow func(req *http.Request) bool) { t.hedgeGate = allow }
