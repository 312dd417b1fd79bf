package retryhttp

import (
	"net/http"
	"time"
)

// Test seams for the features of issue 15 (rate-limit headers, prepare-retry,
// composed policies, give-up errors, the clock).

// ParseRateLimitReset exposes parseRateLimitReset.
func ParseRateLimitReset(res *http.Response, now time.Time) (time.Duration, bool) {
	return parseRateLimitReset(res, func() time.Time { return now })
}
