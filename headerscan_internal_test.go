package retryhttp

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestScanHeaderFacts checks what the one pass over a request's headers
// (scanHeader) finds: the attempt header, the caller's key under either
// name or the configured one (carriesKey), a non-empty key
// (hasIdempotencyKey), under any case of the names, the canonical
// spelling winning.
func TestScanHeaderFacts(t *testing.T) {
	for _, tt := range []struct {
		h                     http.Header
		attempt, carries, key bool
		mine                  bool // carries a key under My-Key
	}{
		{nil, false, false, false, false},
		{http.Header{}, false, false, false, false},
		{http.Header{"Content-Type": {"text/plain"}}, false, false, false, false},
		{http.Header{"Idempotency-Key": {"k"}}, false, true, true, true},
		{http.Header{"Idempotency-Key": {""}}, false, true, false, true},
		{http.Header{"Idempotency-Key": nil}, false, true, false, true},
		{http.Header{"idempotency-key": {"k"}}, false, true, true, true},
		{http.Header{"x-idempotency-key": {""}}, false, true, false, true},
		{http.Header{"X-Idempotency-Key": {"k"}, "Content-Type": {"a"}}, false, true, true, true},
		{http.Header{"Retry-Attempt": {"1"}}, true, false, false, false},
		{http.Header{"retry-attempt": {"3"}, "Idempotency-Key": {"k"}}, true, true, true, true},
		{http.Header{"Retry-Attempts": {"1"}, "Idempotency-Keys": {"k"}, "X-Idempotency-Keys": {"k"}}, false, false, false, false},
		{http.Header{"Idempotency-Key": {"k"}, "idempotency-key": {""}}, false, true, true, true},
		{http.Header{"My-Key": {"k"}}, false, false, false, true},
		{http.Header{"my-key": {"k"}}, false, false, false, true},
		{http.Header{"Amz-Sdk-Request": {"attempt=2"}, "idempotency-key": {"k"}}, false, true, true, true},
	} {
		f := scanHeader(tt.h)
		assert.Equal(t, tt.attempt, f.attempt, "attempt header in %v", tt.h)
		assert.Equal(t, tt.key, f.hasIdempotencyKey(), "key in %v", tt.h)
		for _, name := range []string{DefaultIdempotencyKeyHeader, "X-Idempotency-Key"} {
			assert.Equal(t, tt.carries, f.carriesKey(tt.h, name), "key %q in %v", name, tt.h)
		}
		for _, name := range []string{"My-Key", "my-key"} {
			assert.Equal(t, tt.mine, f.carriesKey(tt.h, name), "key %q in %v", name, tt.h)
		}
	}
}

// TestKeyedScannedSameGuess checks that the guess keyed makes before the
// first attempt, from the facts of the caller's headers, is the one the
// policy's rules make of the request as sent (retryPolicy.idempotent), for
// every method, key and setting, with a key injected or not.
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
					f := scanHeader(req.Header)
					sent, idem, err := s.keyed(req, &f)
					assert.NoError(t, err)
					assert.Equal(t, s.guessRules().idempotent(Attempt{Req: sent, IdempotencyKeyInjected: idem.injected, IdempotencyKeyHonored: honored}), idem.guessed, "method %q, header %v, honoured %v", m, h, honored)
					_, attempt := lookupHeader(h, AttemptHeader)
					assert.Equal(t, attempt, f.attempt)
				}
			}
		}
	}
}
