// Package retryafter reads how long a server asks its clients to wait: the
// Retry-After header (RFC 9110), and the rate-limit reset headers (the IETF
// RateLimit fields and the X-RateLimit-Reset family). Package retryhttp's
// DefaultDelayFn is its user; docs/ratelimit.md states the rules. The
// functions are pure: the current time comes from the caller.
package retryafter

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxDuration is the longest time.Duration; waits saturate there instead
// of overflowing into negative values.
const maxDuration = time.Duration(math.MaxInt64)

// Parse reads the Retry-After header of h (RFC 9110 §10.2.3). Only
// the first value counts, as with Header.Get. It reports false when the header
// is missing or invalid: negative, fractional or not a number or a date.
func Parse(h http.Header, now func() time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		secs, err := strconv.ParseUint(v, 10, 64)
		if err != nil || secs > uint64(maxDuration/time.Second) {
			return maxDuration, true // too large to represent: saturate
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now()) // saturates instead of overflowing
	if d < 0 {
		d = 0
	}
	return d, true
}

// isDigits reports whether s is one or more ASCII digits.
func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return len(s) > 0
}
