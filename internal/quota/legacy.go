package quota

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/retryafter"
)

// readLegacy reads the three-header forms: prefix "Ratelimit-" (the IETF
// drafts up to -06) or "X-Ratelimit-" (Envoy, GitHub and many others):
// -Remaining (required), -Limit (a count, or draft-03's list `10, 10;w=1`)
// and -Reset (seconds to wait, or a Unix time in seconds when at least
// epochThreshold; a fraction is allowed). X-RateLimit-Resource names the
// quota (GitHub). routed marks the vendor form.
func readLegacy(h http.Header, prefix string, now time.Time, routed bool) []Observation {
	r, ok := count(first(h, prefix+"Remaining"))
	if !ok {
		return nil
	}
	o := Observation{Remaining: r, Routed: routed}
	if routed {
		if name := first(h, "X-Ratelimit-Resource"); validName(name) {
			o.Policy = name
		}
	}
	if limit := h[prefix+"Limit"]; len(limit) > 0 {
		if n, ok := count(limit[0]); ok {
			o.Limit = n
		} else if ms, ok := parseList(limit); ok && len(ms) > 0 && ms[0].v.kind == sfInteger && ms[0].v.n >= 0 {
			o.Limit = min(ms[0].v.n, maxCount)
			for i := range ms {
				if w, ok := ms[i].intParam("w"); ok && ms[i].v.n == ms[0].v.n && time.Duration(w) <= maxReset/time.Second {
					o.Window = time.Duration(w) * time.Second
					break
				}
			}
		}
	}
	if d, ok := resetIn(first(h, prefix+"Reset"), now); ok {
		o.Reset, o.HasReset = d, true
	}
	return []Observation{o}
}

// readLLM reads the LLM APIs' request quota: x-ratelimit-remaining-requests,
// x-ratelimit-limit-requests, and x-ratelimit-reset-requests, a Go-like
// duration ("6m0s", "1s", "20ms", "1h2m3.5s"). The token quotas beside
// them count tokens, not requests, and are not read.
func readLLM(h http.Header) []Observation {
	r, ok := count(first(h, "X-Ratelimit-Remaining-Requests"))
	if !ok {
		return nil
	}
	o := Observation{Policy: "requests", Remaining: r, Routed: true}
	if n, ok := count(first(h, "X-Ratelimit-Limit-Requests")); ok {
		o.Limit = n
	}
	if d, ok := retryafter.GoDuration(first(h, "X-Ratelimit-Reset-Requests")); ok && d <= maxReset {
		o.Reset, o.HasReset, o.Fine = d, true, true
	}
	return []Observation{o}
}

// first returns the first value of the header key (canonical), trimmed.
func first(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return strings.TrimSpace(v[0])
	}
	return ""
}

// count parses a non-negative decimal count, saturating at maxCount.
func count(v string) (int64, bool) {
	if !isDigits(v) {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n > maxCount {
		n = maxCount // too many digits: saturate
	}
	return n, true
}

// resetIn reads a legacy reset: seconds to wait ("5", "1.5"), or a Unix
// time in seconds when at least epochThreshold ("1700000000", or with a
// fraction). A time at or before now gives a reset of zero; one past
// maxReset, as any malformed value, none.
func resetIn(v string, now time.Time) (time.Duration, bool) {
	whole, frac, dotted := strings.Cut(v, ".")
	if !isDigits(whole) || (dotted && !isDigits(frac)) || len(whole) > 15 {
		return 0, false
	}
	secs, _ := strconv.ParseInt(whole, 10, 64) // at most 15 digits: no error
	var nanos int64
	for i := 0; i < 9; i++ {
		nanos *= 10
		if i < len(frac) {
			nanos += int64(frac[i] - '0')
		}
	}
	var d time.Duration
	if secs >= epochThreshold {
		d = time.Unix(secs, nanos).Sub(now)
		d = max(d, 0)
	} else {
		d = time.Duration(secs)*time.Second + time.Duration(nanos)
	}
	if d > maxReset {
		return 0, false
	}
	return d, true
}

// validName reports whether a vendor's quota name is short printable
// ASCII: it becomes a key of the pacing state and a log attribute.
func validName(s string) bool {
	if s == "" || len(s) > maxName {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
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
