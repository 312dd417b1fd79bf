package retryhttp

import (
	"net/http"
	"strings"
)

// headerFacts are what the transport looks up in a request's headers:
// AttemptHeader (crosshop.go) and the two usual names of an idempotency key
// (idempotency.go), each under any case of its name, as lookupHeader finds
// them (the canonical spelling first), found in one pass over the map
// rather than one per name: a lookup that misses walks the whole map.
type headerFacts struct {
	scanned         bool // the header was scanned; else nothing below is known
	attempt         bool // AttemptHeader is present
	hasKey, hasXKey bool // Idempotency-Key, X-Idempotency-Key are present
	key, xKey       bool // and their first values are not empty
}

// scanHeader returns the facts of h. The names under their canonical
// spelling are looked up first; only a header with other names as well is
// walked, for the names under other spellings.
func scanHeader(h http.Header) headerFacts {
	f := headerFacts{scanned: true}
	if len(h) == 0 {
		return f
	}
	found := 0
	if _, ok := h[AttemptHeader]; ok {
		f.attempt = true
		found++
	}
	if v, ok := h[DefaultIdempotencyKeyHeader]; ok {
		f.hasKey, f.key = true, len(v) > 0 && v[0] != ""
		found++
	}
	if v, ok := h["X-Idempotency-Key"]; ok {
		f.hasXKey, f.xKey = true, len(v) > 0 && v[0] != ""
		found++
	}
	if found == len(h) {
		return f
	}
	for k, v := range h {
		switch len(k) {
		case len(AttemptHeader):
			f.attempt = f.attempt || strings.EqualFold(k, AttemptHeader)
		case len(DefaultIdempotencyKeyHeader):
			if !f.hasKey && strings.EqualFold(k, DefaultIdempotencyKeyHeader) {
				f.key, f.hasKey = len(v) > 0 && v[0] != "", true
			}
		case len("X-Idempotency-Key"):
			if !f.hasXKey && strings.EqualFold(k, "X-Idempotency-Key") {
				f.xKey, f.hasXKey = len(v) > 0 && v[0] != "", true
			}
		}
	}
	return f
}

// carriesKey is carriesKey(h, name) for the h that f was scanned from.
func (f *headerFacts) carriesKey(h http.Header, name string) bool {
	if f.hasKey || f.hasXKey {
		return true
	}
	if name == DefaultIdempotencyKeyHeader || name == "X-Idempotency-Key" {
		return false
	}
	_, ok := lookupHeader(h, http.CanonicalHeaderKey(name))
	return ok
}

// hasIdempotencyKey is hasIdempotencyKey(h) for the h that f was scanned
// from.
func (f *headerFacts) hasIdempotencyKey() bool {
	return f.key || f.xKey
}
