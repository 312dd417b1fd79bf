package retryafter

import (
	"net/http"
	"strings"
	"time"
)

// GoDuration parses a non-negative duration as Go's time.Duration.String
// writes it, the form of the LLM APIs' x-ratelimit-reset-requests and
// -tokens: "6m0s", "1s", "20ms", "1m30.5s", "0". It accepts what
// time.ParseDuration accepts but a sign; a value too large to represent
// saturates at the longest time.Duration instead of being refused. It
// reports false for anything else: empty, a sign, a missing or unknown
// unit, a bare number other than "0".
func GoDuration(v string) (time.Duration, bool) {
	if !goDurationSyntax(v) {
		return 0, false
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return maxDuration, true // well formed: it can only have overflowed
	}
	return d, true
}

// goDurationSyntax reports whether v is "0" or a sequence of unsigned
// decimal numbers (digits, with an optional fraction) each followed by a
// unit: ns, us, µs (U+00B5 or U+03BC), ms, s, m, h.
func goDurationSyntax(v string) bool {
	if v == "0" {
		return true
	}
	if v == "" {
		return false
	}
	for v != "" {
		i := 0
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
		}
		whole := i > 0
		if i < len(v) && v[i] == '.' {
			i++
			j := i
			for i < len(v) && v[i] >= '0' && v[i] <= '9' {
				i++
			}
			if !whole && i == j {
				return false // "." alone
			}
		} else if !whole {
			return false
		}
		v = v[i:]
		unit := len(v)
		for k, c := range v {
			if c == '.' || (c >= '0' && c <= '9') {
				unit = k
				break
			}
		}
		switch v[:unit] {
		case "ns", "us", "µs", "μs", "ms", "s", "m", "h":
		default:
			return false
		}
		v = v[unit:]
	}
	return true
}

// llmReset reads the LLM APIs' reset fields, x-ratelimit-reset-requests
// and x-ratelimit-reset-tokens (Go-like durations), each with its
// x-ratelimit-remaining-… count: the longest reset of the resources whose
// remaining count is "0"; on a 429 where none of them gives one, the
// longest reset stated. Values GoDuration refuses are skipped.
func llmReset(h http.Header, throttled bool) (time.Duration, bool) {
	var spent, longest time.Duration
	hasSpent, hasAny := false, false
	for _, r := range [...]string{"Requests", "Tokens"} {
		d, ok := GoDuration(strings.TrimSpace(h.Get("X-Ratelimit-Reset-" + r)))
		if !ok {
			continue
		}
		longest, hasAny = max(longest, d), true
		if strings.TrimSpace(h.Get("X-Ratelimit-Remaining-"+r)) == "0" {
			spent, hasSpent = max(spent, d), true
		}
	}
	switch {
	case hasSpent:
		return spent, true
	case throttled && hasAny:
		return longest, true
	}
	return 0, false
}
