// Package backoff is the arithmetic of a wait before a retry: full-jitter
// exponential backoff, and jitter around a wait the server asked for. Its
// functions are pure: the random draw is an argument, so that callers and
// tests choose it. Package retryhttp's delay policy (delay.go) is its only
// user.
package backoff

import (
	"math"
	"time"
)

// MaxDuration is the longest time.Duration; waits saturate there instead
// of overflowing into negative values.
const MaxDuration = time.Duration(math.MaxInt64)

// Jitter moves d by up to magnitude·d, up or down: r = 0 gives the lowest
// value, r → 1 the highest. The result is never negative and saturates at
// MaxDuration.
func Jitter(d time.Duration, magnitude, r float64) time.Duration {
	f := float64(d) * (1 + magnitude*(2*r-1))
	switch {
	case f <= 0:
		return 0
	case f >= float64(MaxDuration):
		return MaxDuration
	}
	return time.Duration(f)
}

// FullJitter returns a uniform random delay in [0, min(ceil, base·2^(n−1)))
// for retry n (n < 1 counts as 1), without overflowing for any n; r is a
// uniform random number in [0, 1).
func FullJitter(base, ceil time.Duration, n int, r float64) time.Duration {
	if n < 1 {
		n = 1
	}
	limit := ceil
	if shift := n - 1; shift < 63 && base <= ceil>>shift {
		limit = base << shift
	}
	d := time.Duration(r * float64(limit))
	if d >= limit { // float rounding when r is within an ulp of 1
		d = limit - 1
	}
	if d < 0 {
		d = 0
	}
	return d
}
