package retryhttp

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestScanHeaderSameAsLookups checks that the one pass over a request's
// headers (scanHeader) finds what the lookups it replaces find: the
// attempt header, the caller's key under either name (carriesKey), a
// non-empty key (hasIdempotencyKey), under any case of the names.
func TestScanHeaderSameAsLookups(t *testing.T) {
	headers := []http.Header{
		nil,
		{},
		{"Content-Type": {"text/plain"}},
		{"Idempotency-Key": {"k"}},
		{"Idempotency-Key": {""}},
		{"Idempotency-Key": nil},
		{"idempotency-key": {"k"}},
		{"x-idempotency-key": {""}},
		{"X-Idempotency-Key": {"k"}, "Content-Type": {"a"}},
		{"Retry-Attempt": {"1"}},
		{"retry-attempt": {"3"}, "Idempotency-Key": {"k"}},
		{"Retry-Attempts": {"1"}, "Idempotency-Keys": {"k"}, "X-Idempotency-Keys": {"k"}},
		{"Idempotency-Key": {"k"}, "idempotency-key": {""}}, // the canonical spelling wins
		{"My-Key": {"k"}},
		{"my-key": {"k"}},
	}
	for _, h := range headers {
		f := scanHeader(h)
		assert.True(t, f.scanned)
		_, attempt := lookupHeader(h, AttemptHeader)
		assert.Equal(t, attempt, f.attempt, "attempt header in %v", h)
		assert.Equal(t, hasIdempotencyKey(h), f.hasIdempotencyKey(), "key in %v", h)
		for _, name := range []string{DefaultIdempotencyKeyHeader, "X-Idempotency-Key", "My-Key", "my-key"} {
			assert.Equal(t, carriesKey(h, name), f.carriesKey(h, name), "key %q in %v", name, h)
		}
	}
}

// TestKeyedScannedSameGuess checks that the guess keyed makes by the default
// rules for a policy of this package, without asking the policy, is the one
// the policy gives when asked (guessIdempotent), for every method, key and
// setting, with a key injected or not.
func TestKeyedScannedSameGuess(t *testing.T) {
	methods := []string{"", http.MethodGet, http.MethodPut, http.MethodPost, http.MethodPatch, "post"}
	headers := []http.Header{nil, {"Idempotency-Key": {"k"}}, {"x-idempotency-key": {""}}, {"Retry-Attempt": {"2"}}}
	for _, m := range methods {
		for _, h := range headers {
			for _, honored := range []bool{false, true} {
				for _, keys := range []bool{false, true} {
					req, _ := http.NewRequest(http.MethodPost, "http://a.test/", nil)
					req.Method, req.Header = m, h
					s := defaultSettings()
					s.idempotencyKeysHonored, s.idempotencyKeys = honored, keys
					var f headerFacts
					sent, idem, err := s.keyedScanned(req, &f)
					assert.NoError(t, err)
					assert.Equal(t, s.guessIdempotent(sent, idem.injected), idem.guessed, "method %q, header %v, honoured %v", m, h, honored)
					if f.scanned {
						_, attempt := lookupHeader(h, AttemptHeader)
						assert.Equal(t, attempt, f.attempt)
					}
				}
			}
		}
	}
}

// TestDefaultIdempotentMethodSameAsList checks the switch of the default
// idempotent methods against the default policy's list.
func TestDefaultIdempotentMethodSameAsList(t *testing.T) {
	for _, m := range []string{"", "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE", "POST", "PATCH", "CONNECT", "get", "put", "Get"} {
		assert.Equal(t, defaultRetryPolicy.idempotentMethod(m), defaultIdempotentMethod(m), "method %q", m)
	}
	for _, m := range defaultIdempotentMethods {
		assert.True(t, defaultIdempotentMethod(m), m)
	}
}
