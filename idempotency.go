package retryhttp

import (
	"crypto/rand"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/google/uuid"
)

// IdempotencyKeys configures the idempotency keys that the transport
// injects (WithIdempotencyKeys). Its zero value is the default: keys are
// injected, under DefaultIdempotencyKeyHeader, and not assumed honoured.
//
// When keys are on, a request whose method is not idempotent (POST, PATCH,
// and every method other than GET, HEAD, OPTIONS, TRACE, PUT and DELETE) and
// that carries no Idempotency-Key or X-Idempotency-Key header (in any case,
// even empty) is sent with a header holding a fresh random UUID, the same on
// every attempt of that request (for a request from the AWS SDK for Go v2,
// the UUID of its amz-sdk-invocation-id header, the same on every attempt
// of the SDK's call: docs/integrations.md). The caller's request is not
// modified: the key goes on a copy.
//
// An injected key does not by itself make the request count as idempotent
// for the retry decision, since the transport cannot know whether the server
// honours keys: Honored says so. Nor does it for net/http: a key not known
// to be honoured is stored in the header map under its lower-case name
// ("idempotency-key"), which net/http's own replay of requests carrying a
// key does not see, so that a POST is never re-sent below the transport on
// its account (docs/idempotency.md). Servers read the same header: names
// are case-insensitive. Read the key of a request as sent with
// IdempotencyKey, not Header.Get.
type IdempotencyKeys struct {
	// Disabled turns the injection of keys off. A key the caller set is
	// still sent, and still counts (see Honored).
	Disabled bool

	// Header is the name of the header that carries injected keys, for
	// servers that expect X-Idempotency-Key, say. Empty means
	// DefaultIdempotencyKeyHeader. A name that is not a valid header field
	// name makes requests that would get a key fail with the base
	// transport's error. Whatever the name, a request that already carries
	// Idempotency-Key, X-Idempotency-Key or Header gets no other key.
	Header string

	// Honored tells the transport that the servers it calls honour
	// idempotency keys: they recognise a replayed key and answer it without
	// acting twice. A request carrying a key the transport injected then
	// counts as idempotent, so DefaultShouldRetryFn retries its timeouts,
	// resets, 502s and 503s. When false, injected keys are sent, but
	// retries of non-idempotent requests stay limited to failures that
	// prove the request was not processed. A key the caller set makes the
	// request count as idempotent either way: the caller knows its server.
	Honored bool
}

// WithIdempotencyKeys configures the idempotency keys that the transport
// injects into non-idempotent requests (see IdempotencyKeys). Without it,
// keys are injected under DefaultIdempotencyKeyHeader and not assumed
// honoured, as with the zero IdempotencyKeys. Each call sets the three
// settings at once: a later WithIdempotencyKeys replaces an earlier one
// whole.
func WithIdempotencyKeys(keys IdempotencyKeys) Option {
	header := keys.Header
	if header == "" {
		header = DefaultIdempotencyKeyHeader
	}
	return option(func(s *settings) {
		s.idempotencyKeys = !keys.Disabled
		s.idempotencyKeyHeader = header
		s.idempotencyKeysHonored = keys.Honored
	})
}

// idempotency is what the transport knows of one request's idempotency,
// computed once per request (roundTrip) and passed down: to the Attempts
// the policies see, to the choice of hedging (hedges) and to the watch of
// writes (watchWrites).
type idempotency struct {
	injected bool // the transport injected the request's key (withIdempotencyKey)
	guessed  bool // guessed idempotent by the request's policy (retryPolicy.idempotent)
}

// keyed returns the request to send for req, with a key if it needs one
// (withIdempotencyKey), and that request's idempotency, as the rules of
// the request's policy guess it (settings.guessRules). f holds the facts of
// req's headers (headerscan.go).
func (s *settings) keyed(req *http.Request, f *headerFacts) (*http.Request, idempotency, error) {
	rules := s.guessRules()
	byMethod := rules.idempotentMethod(req.Method)
	// Keys go to the methods that are not idempotent by the default list,
	// whatever the rules' list (WithIdempotencyKeys).
	byDefault := byMethod
	if rules != &defaultRetryPolicy {
		byDefault = defaultRetryPolicy.idempotentMethod(req.Method)
	}
	needsKey := s.idempotencyKeys && !byDefault
	if byMethod && !needsKey {
		return req, idempotency{guessed: true}, nil // a GET, say: no header to look at
	}
	injected := false
	if needsKey && !f.carriesKey(req.Header, s.idempotencyKeyHeader) {
		var err error
		if req, err = s.withIdempotencyKey(req); err != nil {
			return req, idempotency{}, err
		}
		injected = true
	}
	guessed := byMethod || keyGuess(f, injected, s.idempotencyKeysHonored)
	return req, idempotency{injected: injected, guessed: guessed}, nil
}

// withIdempotencyKey returns a shallow copy of req with its own headers and
// a fresh key.
func (s *settings) withIdempotencyKey(req *http.Request) (*http.Request, error) {
	key, err := keyFor(req) // layers.go: an outer layer's call ID, or a fresh key
	if err != nil {
		return req, fmt.Errorf("retryhttp: generating an idempotency key: %w", err)
	}
	r := new(http.Request)
	*r = *req
	r.Header = cloneHeaderPlus(req.Header, "")
	name := http.CanonicalHeaderKey(s.idempotencyKeyHeader)
	if !s.idempotencyKeysHonored {
		// Not under the canonical name: net/http replays a request that
		// carries Idempotency-Key or X-Idempotency-Key, exactly so spelled
		// in the map, on a new connection when a reused one dies after
		// sending it; a key the server may not honour must not license
		// that. Header names are case-insensitive (RFC 9110 §5.1); HTTP/2
		// sends them in lower case anyway.
		name = strings.ToLower(name)
	}
	r.Header[name] = []string{key.String()}
	return r, nil
}

// newKey returns a fresh random (version 4) UUID. Its bytes come from
// crypto/rand, read in batches (keyRand) rather than by a system call per
// key.
func newKey() (uuid.UUID, error) {
	var u uuid.UUID
	if err := keyRand.read(&u); err != nil {
		return u, err
	}
	u[6] = (u[6] & 0x0f) | 0x40 // version 4
	u[8] = (u[8] & 0x3f) | 0x80 // variant RFC 4122
	return u, nil
}

// keyRand is the batch of random bytes that keys are cut from.
var keyRand randBatch

// randBatch hands out bytes from crypto/rand, read 512 at a time. Each byte
// is handed out once. It is safe for concurrent use.
type randBatch struct {
	mu   sync.Mutex
	buf  [512]byte
	left int // bytes at the end of buf not handed out yet
}

// read fills u with bytes never handed out before.
func (b *randBatch) read(u *uuid.UUID) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.left < len(u) {
		if _, err := rand.Read(b.buf[:]); err != nil {
			return err
		}
		b.left = len(b.buf)
	}
	b.left -= copy(u[:], b.buf[len(b.buf)-b.left:])
	return nil
}

// IdempotencyKey returns the idempotency key that req carries under
// Idempotency-Key or X-Idempotency-Key, in any case of the header's name,
// or "" if it carries none: the caller's key, or, on the request as sent (an
// Attempt's Req), the key the transport injected, unless
// IdempotencyKeys.Header names another header (read that one). Header.Get
// does not find an injected key not known to be honoured, which is stored
// under the lower-case name (see IdempotencyKeys).
func IdempotencyKey(req *http.Request) string {
	if req == nil {
		return ""
	}
	for _, name := range [...]string{"Idempotency-Key", "X-Idempotency-Key"} {
		if v, ok := lookupHeader(req.Header, name); ok && len(v) > 0 && v[0] != "" {
			return v[0]
		}
	}
	return ""
}
