package retryhttp

import (
	"math"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/backoff"
	"github.com/seed2409de8f/retryhttp/internal/retryafter"
)

// DelayFn returns how long to wait before the next attempt, given the
// attempt that just failed. A negative result means no wait. It must be safe
// for concurrent use.
//
// With a retry budget (the default), a pause the server stated is a floor,
// whatever the function returns: after a 429, or a failed response whose
// Retry-After or rate-limit reset header asks for a wait
// (docs/ratelimit.md), the transport waits at least that pause. A pause
// longer than WithMaxDelay, or one that would end past the caller's
// deadline, ends the retries instead (StopDelayTooLong, StopDeadline).
// Without a budget (WithRetryBudget(nil)) the function's wait is the wait.
// A hedged request's attempts wait for neither (WithHedging).
type DelayFn func(attempt Attempt) time.Duration

const (
	defaultDelayBase       = 250 * time.Millisecond
	defaultDelayCap        = 10 * time.Second
	defaultJitterMagnitude = 1.0 / 3

	// defaultThrottleBase is the backoff base for a 429 that says nothing
	// about when to come back: a server that is shedding load needs more
	// room than one that failed (AWS's SDKs use 1s for throttling errors).
	defaultThrottleBase = time.Second
)

// CustomizedDelayFnOptions configures CustomizedDelayFn. The zero value of
// every field means its default.
type CustomizedDelayFnOptions struct {
	// Base is the ceiling of the first backoff delay; each further retry
	// doubles it. Zero or negative means the default, 250ms.
	Base time.Duration

	// Cap bounds the ceiling of the backoff delay. Zero or negative means
	// the default, 10s. A Cap smaller than Base is raised to Base.
	Cap time.Duration

	// JitterMagnitude is the share of a Retry-After wait by which the delay
	// is moved, up or down, at random: with 1/3 (the default, used for
	// zero and NaN), a Retry-After of 3s gives a wait uniform in [2s, 4s).
	// A negative value means no jitter; values above 1 are treated as 1.
	// The same jitter moves a wait read from rate-limit reset headers.
	JitterMagnitude float64

	// ThrottleBase replaces Base for a 429 Too Many Requests that carries
	// neither Retry-After nor a rate-limit reset header: the server is
	// shedding load, so the first wait is drawn below 1s by default rather
	// than 250ms, doubling from there up to Cap (raised to ThrottleBase if
	// smaller). Zero or negative means the default, 1s.
	ThrottleBase time.Duration
}

// DefaultDelayFn is the delay the transport uses unless told otherwise.
//
// If the response carries a valid Retry-After header (a non-negative integer
// number of seconds, or an HTTP-date in any of the formats http.ParseTime
// accepts), the delay is that wait moved up or down by up to a third of
// it, uniformly at random; a date in the past means no wait. A Retry-After
// too large to represent saturates at the longest time.Duration (the
// transport's maximum delay then stops the retries instead of waiting).
// With a retry budget the transport waits at least the pause stated (see
// DelayFn): the jitter then lengthens the wait, never shortens it.
//
// Without a valid Retry-After, a rate-limit reset header gives the wait, in
// this order: the IETF RateLimit field (the policies with no quota left),
// RateLimit-Reset, X-RateLimit-Reset, X-Rate-Limit-Reset (a number below
// 10^9 is seconds to wait, a larger one a Unix time; the last three only on
// a 429 or with their Remaining header at 0), then the LLM APIs'
// x-ratelimit-reset-requests and -tokens ("6m0s": the spent resource's, or
// on a 429 the longest). The wait is jittered and saturates like a
// Retry-After; docs/ratelimit.md has the rules and why.
//
// Otherwise the delay is "full jitter" exponential backoff: uniform in
// [0, min(10s, 250ms·2^(n−1))) before retry n, or, for a 429 Too Many
// Requests, in [0, min(10s, 1s·2^(n−1))).
func DefaultDelayFn(attempt Attempt) time.Duration {
	return defaultDelayPolicy.delay(attempt, time.Now, rand.Float64())
}

var defaultDelayPolicy = delayPolicy{
	base:         defaultDelayBase,
	cap:          defaultDelayCap,
	jitter:       defaultJitterMagnitude,
	throttleBase: defaultThrottleBase,
}

// CustomizedDelayFn returns a DelayFn that follows the rules of
// DefaultDelayFn with the backoff base, cap and Retry-After jitter of opts.
// Invalid values are replaced as CustomizedDelayFnOptions documents; it
// never panics. As with any DelayFn, a pause the server stated is a floor
// (see DelayFn).
func CustomizedDelayFn(opts CustomizedDelayFnOptions) DelayFn {
	p := newDelayPolicy(opts)
	return func(attempt Attempt) time.Duration {
		return p.delay(attempt, time.Now, rand.Float64())
	}
}

// delayPolicy is the validated form of CustomizedDelayFnOptions.
type delayPolicy struct {
	base, cap    time.Duration
	jitter       float64 // in [0, 1]
	throttleBase time.Duration
}

func newDelayPolicy(o CustomizedDelayFnOptions) delayPolicy {
	p := defaultDelayPolicy
	if o.Base > 0 {
		p.base = o.Base
	}
	if o.Cap > 0 {
		p.cap = o.Cap
	}
	if p.cap < p.base {
		p.cap = p.base
	}
	if o.ThrottleBase > 0 {
		p.throttleBase = o.ThrottleBase
	}
	switch j := o.JitterMagnitude; {
	case j == 0 || math.IsNaN(j):
		// default
	case j < 0:
		p.jitter = 0
	case j > 1:
		p.jitter = 1
	default:
		p.jitter = j
	}
	return p
}

// delay is the pure form of a DelayFn: r is a uniform random number in
// [0, 1), and now is called only for a date or a Unix time in a header.
// The server's word comes first: Retry-After, then rate-limit reset headers
// (internal/retryafter); then backoff (internal/backoff), from a larger
// base for a 429.
func (p delayPolicy) delay(a Attempt, now func() time.Time, r float64) time.Duration {
	if a.Res == nil {
		return backoff.FullJitter(p.base, p.cap, a.Count, r)
	}
	if d, ok := retryafter.Parse(a.Res.Header, now); ok {
		return backoff.Jitter(d, p.jitter, r)
	}
	if d, ok := retryafter.RateLimitReset(a.Res, now); ok {
		return backoff.Jitter(d, p.jitter, r)
	}
	if a.Res.StatusCode == http.StatusTooManyRequests {
		return backoff.FullJitter(p.throttleBase, max(p.cap, p.throttleBase), a.Count, r)
	}
	return backoff.FullJitter(p.base, p.cap, a.Count, r)
}
