package retryhttp

import (
	"net/http"
	"strings"
)

// headerFacts are what the transport looks up in a request's headers:
// AttemptHeader (crosshop.go) and the two usual names of an idempotency key
// (idempotency.go), each under any case of its name, as lookupHeader finds
// them (the canonical spelling first), and an outer layer's attempt
// (layers.go), under its canonical name only, as the layer sets it. They
// are found in one pass over the map, once per request (RoundTrip), rather
// than one lookup per name: a lookup that misses walks the whole map.
type headerFacts struct {
	attempt         bool // AttemptHeader is present
	hasKey, hasXKey bool // Idempotency-Key, X-Idempotency-Key are present
	key, xKey       bool // and their first values are not empty
	outerRetry      bool // an outer layer says the request is its retry (layers.go)
}

// scanHeader returns the facts of h, in one walk of the map, whose entries
// are told apart by the length of their names first: three lookups would
// hash each name, and a map with any other header (a POST's Content-Type)
// would be walked anyway, for the names under other spellings. A name
// under its canonical spelling wins over the same name otherwise spelled,
// as with lookupHeader.
func scanHeader(h http.Header) (f headerFacts) {
	if len(h) == 0 {
		return f // not even the start of a walk
	}
	for k, v := range h {
		switch len(k) {
		case len(AttemptHeader):
			f.attempt = f.attempt || k == AttemptHeader || strings.EqualFold(k, AttemptHeader)
		case len(DefaultIdempotencyKeyHeader): // and len(outerRequestHeader)
			if k == outerRequestHeader {
				f.outerRetry = outerRetry(v)
			} else if k == DefaultIdempotencyKeyHeader || !f.hasKey && strings.EqualFold(k, DefaultIdempotencyKeyHeader) {
				f.key, f.hasKey = len(v) > 0 && v[0] != "", true
			}
		case len("X-Idempotency-Key"):
			if k == "X-Idempotency-Key" || !f.hasXKey && strings.EqualFold(k, "X-Idempotency-Key") {
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
