package retryafter

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Rate-limit reset headers, read by retryhttp's DefaultDelayFn when a
// response has no valid Retry-After. docs/ratelimit.md states the rules and
// the reasons.

// EpochThreshold separates the two meanings of X-RateLimit-Reset and
// RateLimit-Reset: a value of at least 10^9 is a Unix time in seconds (10^9
// is September 2001), a smaller one a number of seconds to wait (10^9
// seconds is 31 years: no server means that).
const EpochThreshold = 1_000_000_000

// RateLimitReset returns the wait that the rate-limit headers of res
// announce, trying in order:
//
//  1. RateLimit (draft-ietf-httpapi-ratelimit-headers): the largest t of the
//     policies with no quota left (r=0), or, without t, that policy's window
//     w from RateLimit-Policy;
//  2. RateLimit-Reset, then X-RateLimit-Reset, then X-Rate-Limit-Reset:
//     delta seconds, or a Unix time when at least EpochThreshold. These are
//     read only on a 429 or when the matching Remaining header is 0, since
//     many servers send them on every response;
//  3. the LLM APIs' x-ratelimit-reset-requests and x-ratelimit-reset-tokens
//     (Go-like durations, GoDuration): the longest reset of the resources
//     whose x-ratelimit-remaining-… is 0, or, on a 429 where none is, the
//     longest reset stated.
//
// It reports false when none gives a usable wait: missing, malformed, or a
// Unix time at or before now (a skewed clock, or a delta misread as a time:
// "retry at once" is not trusted from a guess).
func RateLimitReset(res *http.Response, now func() time.Time) (time.Duration, bool) {
	h := res.Header
	if d, ok := parseRateLimitField(h); ok {
		return d, true
	}
	if d, ok := parseDraft07(h); ok {
		return d, true
	}
	throttled := res.StatusCode == http.StatusTooManyRequests
	for _, name := range [...]string{"RateLimit", "X-RateLimit", "X-Rate-Limit"} {
		if !throttled && strings.TrimSpace(h.Get(name+"-Remaining")) != "0" {
			continue
		}
		v := strings.TrimSpace(h.Get(name + "-Reset"))
		if v == "" {
			continue
		}
		secs, frac, ok := parseSeconds(v)
		if !ok {
			continue
		}
		if secs < EpochThreshold {
			return toDuration(secs, frac), true
		}
		at := time.Unix(int64(min(secs, 1<<62)), int64(frac))
		if d := at.Sub(now()); d > 0 {
			return d, true
		}
	}
	return llmReset(h, throttled)
}

// parseSeconds parses a non-negative decimal number of seconds with at most
// one dot: "5", "1.5", "1700000000.123". The integer part saturates instead
// of overflowing; frac is in nanoseconds (digits past the ninth are
// dropped).
func parseSeconds(v string) (secs uint64, frac uint32, ok bool) {
	whole, fraction, dotted := strings.Cut(v, ".")
	if !isDigits(whole) || (dotted && !isDigits(fraction)) {
		return 0, 0, false
	}
	secs, err := strconv.ParseUint(whole, 10, 64)
	if err != nil {
		secs = 1<<64 - 1 // too many digits: saturate
	}
	for i := 0; i < 9; i++ {
		frac *= 10
		if i < len(fraction) {
			frac += uint32(fraction[i] - '0')
		}
	}
	return secs, frac, true
}

// toDuration returns secs seconds and frac nanoseconds, saturating at
// maxDuration.
func toDuration(secs uint64, frac uint32) time.Duration {
	if secs >= uint64(maxDuration/time.Second) {
		return maxDuration
	}
	return time.Duration(secs)*time.Second + time.Duration(frac)
}

// parseRateLimitField reads the IETF RateLimit field, a structured-field
// List of policies such as `"default";r=0;t=10`: the wait is the largest t
// among the policies with r=0. A policy with r=0 and no t falls back to its
// window, the w parameter of the policy of the same name in
// RateLimit-Policy. Members it cannot parse are skipped.
func parseRateLimitField(h http.Header) (time.Duration, bool) {
	var windows map[string]string
	best, found := time.Duration(0), false
	for _, line := range h.Values("RateLimit") {
		for _, m := range splitSFList(line) {
			name, params, ok := parseSFItem(m)
			if !ok || params["r"] != "0" {
				continue
			}
			t, hasT := params["t"]
			if !hasT {
				if windows == nil {
					windows = policyWindows(h)
				}
				if t, hasT = windows[name]; !hasT {
					continue
				}
			}
			secs, frac, ok := parseSeconds(t)
			if !ok || frac != 0 { // sf-integer: no fraction
				continue
			}
			if d := toDuration(secs, 0); !found || d > best {
				best, found = d, true
			}
		}
	}
	return best, found
}

// parseDraft07 reads the RateLimit field of the draft's earlier versions
// (up to draft-07), a structured-field Dictionary such as `limit=50,
// remaining=0, reset=2`: the wait is reset, in seconds, when remaining is
// 0. Members that are not integers are skipped; a key given twice keeps
// its last value, as RFC 9651 says.
func parseDraft07(h http.Header) (time.Duration, bool) {
	remaining, reset := "", ""
	for _, line := range h.Values("RateLimit") {
		for _, m := range splitSFList(line) {
			k, v, ok := strings.Cut(m, "=")
			if !ok {
				continue
			}
			v, _, _ = strings.Cut(v, ";") // parameters: none defined
			switch strings.TrimSpace(k) {
			case "remaining":
				remaining = strings.TrimSpace(v)
			case "reset":
				reset = strings.TrimSpace(v)
			}
		}
	}
	if remaining != "0" || reset == "" {
		return 0, false
	}
	secs, frac, ok := parseSeconds(reset)
	if !ok || frac != 0 || strings.Contains(reset, ".") { // sf-integer: no fraction
		return 0, false
	}
	return toDuration(secs, 0), true
}

// policyWindows maps the names of the policies in RateLimit-Policy to their
// window (w).
func policyWindows(h http.Header) map[string]string {
	w := map[string]string{}
	for _, line := range h.Values("RateLimit-Policy") {
		for _, m := range splitSFList(line) {
			if name, params, ok := parseSFItem(m); ok {
				if v, ok := params["w"]; ok {
					w[name] = v
				}
			}
		}
	}
	return w
}

// splitSFList splits a structured-field List at the commas outside quoted
// strings (RFC 9651 §3.1), trimming spaces.
func splitSFList(v string) []string {
	var out []string
	start, quoted := 0, false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case quoted && c == '\\':
			i++ // the escaped character
		case c == '"':
			quoted = !quoted
		case c == ',' && !quoted:
			out = append(out, strings.TrimSpace(v[start:i]))
			start = i + 1
		}
	}
	return append(out, strings.TrimSpace(v[start:]))
}

// parseSFItem parses an Item whose bare item is a quoted string or a token
// (the policy name), followed by ";key=value" parameters with bare values
// (the draft's r, t, q and w are integers). A parameter without a value is
// kept with the value "?1", as RFC 9651 says.
func parseSFItem(m string) (name string, params map[string]string, ok bool) {
	rest := m
	if strings.HasPrefix(rest, `"`) {
		end := -1
		for i := 1; i < len(rest); i++ {
			if rest[i] == '\\' {
				i++
				continue
			}
			if rest[i] == '"' {
				end = i
				break
			}
		}
		if end < 0 {
			return "", nil, false
		}
		name, rest = strings.ReplaceAll(rest[1:end], `\`, ""), rest[end+1:]
	} else {
		i := strings.IndexByte(rest, ';')
		if i < 0 {
			i = len(rest)
		}
		name, rest = rest[:i], rest[i:]
	}
	if name == "" || (rest != "" && rest[0] != ';') {
		return "", nil, false
	}
	params = map[string]string{}
	for _, p := range strings.Split(rest, ";")[1:] {
		k, v, hasV := strings.Cut(strings.TrimSpace(p), "=")
		if !hasV {
			v = "?1"
		}
		params[k] = v
	}
	return name, params, true
}
