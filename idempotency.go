package retryhttp

import (
	"context"
	"fmt"
	"net/http"

	"github.com/google/uuid"
)

// DefaultIdempotencyKeyHeader is the header that carries the idempotency keys
// the transport injects, unless WithIdempotencyKeyHeader names another. It is
// the field defined by the IETF draft "The Idempotency-Key HTTP Header Field".
const DefaultIdempotencyKeyHeader = "Idempotency-Key"

// WithIdempotencyKeys turns the injection of idempotency keys on or off; it is
// on by default. When on, a request whose method is not idempotent (POST,
// PATCH, and every method other than GET, HEAD, OPTIONS, TRACE, PUT and
// DELETE) and that carries no Idempotency-Key or X-Idempotency-Key header is
// sent with a header holding a fresh random UUID, the same on every attempt of
// that request. The caller's request is not modified: the key goes on a copy.
//
// An injected key does not by itself make the request count as idempotent for
// the retry decision, since the transport cannot know whether the server
// honours keys; see WithIdempotencyKeysHonored.
func WithIdempotencyKeys(enabled bool) Option {
	return func(t *Transport) { t.noIdempotencyKeys = !enabled }
}

// SetIdempotencyKeys returns a context that turns the injection of
// idempotency keys on or off for requests sent with it, whatever the
// transport's setting.
func SetIdempotencyKeys(ctx context.Context, enabled bool) context.Context {
	return withOverride(ctx, func(o *overrides) {
		o.idempotencyKeys = enabled
		o.set |= setIdempotencyKeys
	})
}

// WithIdempotencyKeyHeader sets the name of the header that carries injected
// keys, for servers that expect X-Idempotency-Key, say. The empty string means
// the default, DefaultIdempotencyKeyHeader. A name that is not a valid header
// field name makes requests that would get a key fail with the base
// transport's error. Whatever the name, a request that already carries
// Idempotency-Key or X-Idempotency-Key (even empty) gets no other key.
func WithIdempotencyKeyHeader(name string) Option {
	return func(t *Transport) { t.idempotencyKeyHeader = name }
}

// WithIdempotencyKeysHonored tells the transport whether the servers it calls
// honour idempotency keys (they recognise a replayed key and answer it
// without acting twice). When true, a request carrying a key the transport
// injected counts as idempotent, so DefaultShouldRetryFn retries its
// timeouts, resets, 502s and 503s. The default is false: injected keys are
// sent, but retries of non-idempotent requests stay limited to failures that
// prove the request was not processed.
func WithIdempotencyKeysHonored(honored bool) Option {
	return func(t *Transport) { t.idempotencyKeysHonored = honored }
}

// SetIdempotencyKeysHonored returns a context that makes requests sent with
// it behave as WithIdempotencyKeysHonored(honored) says, whatever the
// transport's setting.
func SetIdempotencyKeysHonored(ctx context.Context, honored bool) context.Context {
	return withOverride(ctx, func(o *overrides) {
		o.idempotencyKeysHonored = honored
		o.set |= setIdempotencyKeysHonored
	})
}

// withIdempotencyKey returns the request to send for req: req itself, or, if
// it needs a key, a shallow copy of it with its own headers and a fresh key.
// It reports whether it injected a key.
func (s *settings) withIdempotencyKey(req *http.Request) (*http.Request, bool, error) {
	if !s.idempotencyKeys || defaultRetryPolicy.idempotentMethod(req.Method) ||
		carriesKey(req.Header, s.idempotencyKeyHeader) {
		return req, false, nil
	}
	key, err := uuid.NewRandom() // crypto/rand
	if err != nil {
		return req, false, fmt.Errorf("retryhttp: generating an idempotency key: %w", err)
	}
	r := *req
	r.Header = req.Header.Clone()
	if r.Header == nil {
		r.Header = make(http.Header, 1)
	}
	r.Header.Set(s.idempotencyKeyHeader, key.String())
	return &r, true, nil
}

// carriesKey reports whether the caller put a key on h, under either usual
// name or under name, in any case; an empty or nil value counts (net/http
// reads a nil Idempotency-Key as "replayable, send no header").
func carriesKey(h http.Header, name string) bool {
	for _, n := range [...]string{"Idempotency-Key", "X-Idempotency-Key", http.CanonicalHeaderKey(name)} {
		if _, ok := lookupHeader(h, n); ok {
			return true
		}
	}
	return false
}
