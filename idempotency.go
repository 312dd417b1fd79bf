package retryhttp

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

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
// honours keys; see WithIdempotencyKeysHonored. Nor does it for net/http: a
// key not known to be honoured is stored in the header map under its
// lower-case name ("idempotency-key"), which net/http's own replay of
// requests carrying a key does not see, so that a POST is never re-sent
// below the transport on its account (docs/idempotency.md). Servers read the
// same header: names are case-insensitive. Read the key of a request as sent
// with IdempotencyKey, not Header.Get.
func WithIdempotencyKeys(enabled bool) Option {
	return option(withIdempotencyKeys(enabled))
}

// SetIdempotencyKeys returns a context that turns the injection of
// idempotency keys on or off for requests sent with it, whatever the
// transport's setting.
func SetIdempotencyKeys(ctx context.Context, enabled bool) context.Context {
	return withOverride(ctx, "idempotencyKeys", withIdempotencyKeys(enabled))
}

func withIdempotencyKeys(enabled bool) patch {
	return func(s *settings) { s.idempotencyKeys = enabled }
}

// WithIdempotencyKeyHeader sets the name of the header that carries injected
// keys, for servers that expect X-Idempotency-Key, say. The empty string means
// the default, DefaultIdempotencyKeyHeader. A name that is not a valid header
// field name makes requests that would get a key fail with the base
// transport's error. Whatever the name, a request that already carries
// Idempotency-Key or X-Idempotency-Key (even empty) gets no other key.
func WithIdempotencyKeyHeader(name string) Option {
	if name == "" {
		name = DefaultIdempotencyKeyHeader
	}
	return option(func(s *settings) { s.idempotencyKeyHeader = name })
}

// WithIdempotencyKeysHonored tells the transport whether the servers it calls
// honour idempotency keys (they recognise a replayed key and answer it
// without acting twice). When true, a request carrying a key the transport
// injected counts as idempotent, so DefaultShouldRetryFn retries its
// timeouts, resets, 502s and 503s. The default is false: injected keys are
// sent, but retries of non-idempotent requests stay limited to failures that
// prove the request was not processed.
func WithIdempotencyKeysHonored(honored bool) Option {
	return option(withIdempotencyKeysHonored(honored))
}

// SetIdempotencyKeysHonored returns a context that makes requests sent with
// it behave as WithIdempotencyKeysHonored(honored) says, whatever the
// transport's setting.
func SetIdempotencyKeysHonored(ctx context.Context, honored bool) context.Context {
	return withOverride(ctx, "idempotencyKeysHonored", withIdempotencyKeysHonored(honored))
}

func withIdempotencyKeysHonored(honored bool) patch {
	return func(s *settings) { s.idempotencyKeysHonored = honored }
}

// idempotency is what the transport knows of one request's idempotency,
// computed once per request (roundTrip) and passed down: to the Attempts
// the policies see, to the choice of hedging (hedges) and to the watch of
// writes (watchWrites).
type idempotency struct {
	injected bool // the transport injected the request's key (withIdempotencyKey)
	guessed  bool // guessed idempotent by the default rules (guessIdempotent)
}

// keyed returns the request to send for req, with a key if it needs one
// (withIdempotencyKey), and that request's idempotency.
func (s *settings) keyed(req *http.Request) (*http.Request, idempotency, error) {
	var f headerFacts
	return s.keyedScanned(req, &f)
}

// keyedScanned is keyed, leaving in f what it found in req's headers, if
// it looked (headerscan.go): each header is then looked up once per
// request.
func (s *settings) keyedScanned(req *http.Request, f *headerFacts) (*http.Request, idempotency, error) {
	return s.keyedFor(req, f, false)
}

// keyedFor is keyedScanned for a request whose writes may be watched
// (watchWrites), if watchable: a request copy that gets a key then has
// room for the watch, in the same allocation.
func (s *settings) keyedFor(req *http.Request, f *headerFacts, watchable bool) (*http.Request, idempotency, error) {
	// The usual case first: with a policy of this package that guesses by
	// the default methods (settings.ownPolicy), an idempotent method needs
	// no key and is guessed idempotent whatever its headers. A GET is
	// told inline.
	if s.ownPolicy && req.Method == http.MethodGet {
		return req, idempotency{guessed: true}, nil
	}
	return s.keyedOther(req, f, watchable)
}

// keyedOther is keyedFor for any request but a GET under a policy of this
// package.
func (s *settings) keyedOther(req *http.Request, f *headerFacts, watchable bool) (*http.Request, idempotency, error) {
	idempotentMethod := defaultIdempotentMethod(req.Method)
	if s.ownPolicy && idempotentMethod {
		return req, idempotency{guessed: true}, nil
	}
	*f = scanHeader(req.Header)
	// An injected key makes the request guessed idempotent, and so never
	// watched, by the default rules when keys are honoured.
	room := watchable && !(s.ownPolicy && s.idempotencyKeysHonored)
	req, injected, err := s.withIdempotencyKey(req, idempotentMethod, f, room)
	if err != nil {
		return req, idempotency{}, err
	}
	guessed := false
	if s.ownPolicy { // the default rules (guessIdempotent), without a call through reflect
		guessed = idempotentMethod || injected && s.idempotencyKeysHonored || !injected && f.hasIdempotencyKey()
	} else {
		guessed = s.guessIdempotent(req, injected)
	}
	return req, idempotency{injected: injected, guessed: guessed}, nil
}

// defaultIdempotentMethod is defaultRetryPolicy.idempotentMethod(method),
// by a switch rather than a walk of the list.
func defaultIdempotentMethod(method string) bool {
	switch method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// withIdempotencyKey returns the request to send for req: req itself, or, if
// it needs a key, a shallow copy of it with its own headers and a fresh key.
// It reports whether it injected a key. idempotentMethod says whether req's
// method is one of the default idempotent methods; f holds the facts of
// req's headers. room asks for a copy with room for the write watch.
func (s *settings) withIdempotencyKey(req *http.Request, idempotentMethod bool, f *headerFacts, room bool) (*http.Request, bool, error) {
	if !s.idempotencyKeys || idempotentMethod || f.carriesKey(req.Header, s.idempotencyKeyHeader) {
		return req, false, nil
	}
	key, err := keyFor(req) // layers.go: an outer layer's call ID, or a fresh key
	if err != nil {
		return req, false, fmt.Errorf("retryhttp: generating an idempotency key: %w", err)
	}
	// One allocation for the copy, the key's value slice and text, and,
	// if asked, the write watch; the header map has room for the key.
	var r *keyedRequest
	if room {
		w := &watchedKeyedRequest{keyedRequest: keyedRequest{Request: *req}}
		r = &w.keyedRequest
		r.watch = &w.watch
	} else {
		r = &keyedRequest{Request: *req}
	}
	formatKey(&r.text, &key)
	// The value's bytes live in r, never written again: no allocation of
	// their own, and alive as long as the request copy is.
	r.value[0] = unsafe.String(&r.text[0], len(r.text))
	r.Header = cloneHeaderPlus(req.Header, "")
	if s.idempotencyKeysHonored {
		r.Header[canonicalKeyName(s.idempotencyKeyHeader)] = r.value[:]
	} else {
		// Not under the canonical name: net/http replays a request that
		// carries Idempotency-Key or X-Idempotency-Key, exactly so spelled
		// in the map, on a new connection when a reused one dies after
		// sending it; a key the server may not honour must not license
		// that. Header names are case-insensitive (RFC 9110 §5.1); HTTP/2
		// sends them in lower case anyway.
		r.Header[lowerKeyName(s.idempotencyKeyHeader)] = r.value[:]
	}
	return &r.Request, true, nil
}

// keyedRequest is a request copy that carries an injected key, the key's
// value slice and the value's bytes, in one allocation.
type keyedRequest struct {
	http.Request
	value [1]string
	text  [36]byte
	watch *writeWatch // the room for the write watch (watchedKeyedRequest), or nil
}

// watchedKeyedRequest is a keyedRequest with room for the watch of its
// writes, in one allocation: for requests whose writes may be watched
// (keyedFor), so that a request sent through *http.Transport, never
// watched, does not carry the room.
type watchedKeyedRequest struct {
	keyedRequest
	watch writeWatch
}

// keyedOf returns the keyedRequest whose Request req is: req must be the
// request that withIdempotencyKey returned with a key it injected.
func keyedOf(req *http.Request) *keyedRequest {
	return (*keyedRequest)(unsafe.Pointer(req)) // Request is its first field
}

// canonicalKeyName is http.CanonicalHeaderKey(name), without its cost for
// the default name.
func canonicalKeyName(name string) string {
	if name == DefaultIdempotencyKeyHeader {
		return name
	}
	return http.CanonicalHeaderKey(name)
}

// lowerKeyName is strings.ToLower(name), without its allocation for the
// default name.
func lowerKeyName(name string) string {
	if name == DefaultIdempotencyKeyHeader {
		return "idempotency-key"
	}
	return strings.ToLower(name)
}

// newKey returns a fresh random (version 4) UUID. Its bytes come from
// crypto/rand, read in batches (keyRand): a system call per key would cost
// more than the rest of key injection.
func newKey() (uuid.UUID, error) {
	var u uuid.UUID
	if err := keyRand.read(&u); err != nil {
		return u, err
	}
	u[6] = (u[6] & 0x0f) | 0x40 // version 4
	u[8] = (u[8] & 0x3f) | 0x80 // variant RFC 4122
	return u, nil
}

// keyString is key.String(), the canonical form of a UUID
// (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx), in one pass.
func keyString(key *uuid.UUID) string {
	var buf [36]byte
	formatKey(&buf, key)
	return string(buf[:])
}

// formatKey writes the canonical form of key to buf, each byte at its
// place: no loop, no branch, no bounds check.
func formatKey(buf *[36]byte, key *uuid.UUID) {
	putHex(buf, 0, key[0])
	putHex(buf, 2, key[1])
	putHex(buf, 4, key[2])
	putHex(buf, 6, key[3])
	buf[8] = '-'
	putHex(buf, 9, key[4])
	putHex(buf, 11, key[5])
	buf[13] = '-'
	putHex(buf, 14, key[6])
	putHex(buf, 16, key[7])
	buf[18] = '-'
	putHex(buf, 19, key[8])
	putHex(buf, 21, key[9])
	buf[23] = '-'
	putHex(buf, 24, key[10])
	putHex(buf, 26, key[11])
	putHex(buf, 28, key[12])
	putHex(buf, 30, key[13])
	putHex(buf, 32, key[14])
	putHex(buf, 34, key[15])
}

// putHex writes b in two lower-case hexadecimal digits at buf[j:j+2].
func putHex(buf *[36]byte, j int, b byte) {
	const digits = "0123456789abcdef"
	buf[j], buf[j+1] = digits[b>>4], digits[b&0x0f]
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
	b.mu.Lock() // unlocked on each return: a deferred call costs more than this body
	if b.left < len(u) {
		if _, err := rand.Read(b.buf[:]); err != nil {
			b.mu.Unlock()
			return err
		}
		b.left = len(b.buf)
	}
	b.left -= copy(u[:], b.buf[len(b.buf)-b.left:])
	b.mu.Unlock()
	return nil
}

// guessIdempotent reports whether sending req twice is guessed harmless by
// the request's policy: its method is idempotent (by the method list of a
// CustomizedShouldRetryFn, or else the default list), or it carries the
// caller's key, or one the transport injected for servers known to honour
// keys. injected says whether req's key was injected. The retry loop's
// policy decides by the same guess after each attempt; so hedging and the
// write watch follow it.
func (s *settings) guessIdempotent(req *http.Request, injected bool) bool {
	a := Attempt{
		Req:                    req,
		IdempotencyKeyInjected: injected,
		IdempotencyKeyHonored:  s.idempotencyKeysHonored,
	}
	if customizedPolicy(s.shouldRetry) {
		a.Err = errGuessProbe
		return s.shouldRetry(a)
	}
	return defaultRetryPolicy.idempotent(a)
}

// errGuessProbe is the error of the Attempt with which the transport asks
// a policy made by CustomizedShouldRetryFn for its idempotency guess
// (guessIdempotent). Only this package makes it, and only such policies
// are asked: a policy that is handed it answers the guess.
var errGuessProbe = errors.New("retryhttp: idempotency guess")

// The code of the functions CustomizedShouldRetryFn returns (compose.go):
// method values of a retryPolicy, told apart from any other function by
// their code pointer.
var (
	policyCode   = reflect.ValueOf(defaultRetryPolicy.shouldRetry).Pointer()
	policyIfCode = reflect.ValueOf(defaultRetryPolicy.shouldRetryOrIf).Pointer()
)

// customizedPolicy reports whether fn was made by CustomizedShouldRetryFn,
// and may be asked for its guess with errGuessProbe.
func customizedPolicy(fn ShouldRetryFn) bool {
	code := reflect.ValueOf(fn).Pointer()
	return code == policyCode || code == policyIfCode
}

// A dial error proves that a request never left the client only if nothing
// below the transport sent it first. net/http, and any base transport, may
// replay a request by itself on a new connection after a reused one died
// with the request written, and then return only the replay's error: a
// refused connection, say, while the server acted on the first send. So
// attempts of requests that only such proof would let the transport retry
// (those not guessed idempotent) are watched: if their request was written
// to a connection, a dial or DNS error that ends them is marked
// (errWrittenFirst), and DefaultShouldRetryFn treats it as a failure after
// the request may have reached the server.

// baseReplaysOnlyUnsent reports whether the base transport is known to
// replay a request not guessed idempotent only when it did not send it: a
// *http.Transport replays a request after writing it only if the request
// is a GET, HEAD, OPTIONS or TRACE, or carries a key under its canonical
// name, which injected keys are not given (withIdempotencyKey), and a
// caller's key makes the request guessed idempotent. Other base transports
// are watched.
func (t *Transport) baseReplaysOnlyUnsent() bool {
	_, ok := t.baseTransport().(*http.Transport)
	return ok
}

// writeWatch records whether the current attempt's request headers were
// written to a connection, by any send of that attempt. It is also the
// context of the watched request: it answers httptrace's lookup of the
// client trace with its own trace, and every other lookup, Done, Deadline
// and Err from the request's context, which it embeds. So the watch, its
// trace and the context that carries the trace are one allocation, where
// httptrace.WithClientTrace would add a context of its own.
type writeWatch struct {
	context.Context // the request's context, or that context with the caller's trace composed with ours
	trace           httptrace.ClientTrace
	wrote           atomic.Bool
	closure         wroteClosure // of trace.WroteHeaders (watchfunc.go)
}

// Value returns the watch's trace for httptrace's key, and otherwise what
// the request's context holds.
func (w *writeWatch) Value(key any) any {
	if key == clientTraceKey && key != nil {
		return &w.trace
	}
	return w.Context.Value(key)
}

// String names the watch as the context package names its contexts: the
// parent's name, then what the watch adds.
func (w *writeWatch) String() string {
	parent := fmt.Sprintf("%T", w.Context)
	if s, ok := w.Context.(fmt.Stringer); ok {
		parent = s.String()
	}
	return parent + ".WithValue(retryhttp write watch)"
}

// clientTraceKey is the key under which httptrace.ContextClientTrace looks
// its trace up in a context, as asked of a context that records it
// (keySpy), or nil if it asked none.
var clientTraceKey = func() any {
	var spy keySpy
	httptrace.ContextClientTrace(&spy)
	return spy.key
}()

// keySpy is a context that records the key it is last asked for.
type keySpy struct {
	context.Context
	key any
}

func (s *keySpy) Value(key any) any {
	s.key = key
	return nil
}

// watchedRequest is a copy of a request with the watch of its writes, in
// one allocation.
type watchedRequest struct {
	http.Request
	watch writeWatch
}

// watchWrites returns req with a context that reports its writes to the
// returned watch; the caller's own ClientTrace, if any, still runs. It is
// called once per request: every attempt's request is req or a copy of it
// (replay), and carries its context; the watch is reset before each
// attempt (reset). own says that req is the transport's copy with an
// injected key (keyedRequest), which then carries the context itself,
// and the watch too if it has room for it; otherwise the copy of req
// lives with the watch.
func watchWrites(req *http.Request, own bool) (*http.Request, *writeWatch) {
	var w *writeWatch
	r := req
	if own {
		if w = keyedOf(req).watch; w == nil {
			w = &writeWatch{}
		}
	} else {
		c := &watchedRequest{Request: *req}
		w, r = &c.watch, &c.Request
	}
	w.setWroteHeaders()
	w.Context = req.Context()
	if clientTraceKey == nil || httptrace.ContextClientTrace(w.Context) != nil {
		// The caller's trace is composed with ours by httptrace, and
		// the key, if unknown, looked up in its context.
		w.Context = httptrace.WithClientTrace(w.Context, &w.trace)
	}
	*r = *r.WithContext(w)
	return r, w
}

// reset forgets the writes of the previous attempt, if w is not nil.
func (w *writeWatch) reset() {
	if w != nil {
		w.wrote.Store(false)
	}
}

// mark returns err, marked if the request had been written before it.
func (w *writeWatch) mark(err error) error {
	if w == nil || err == nil {
		return err // inline: nothing watched, or nothing to mark
	}
	return w.marked(err)
}

// marked is mark of a watched attempt's error.
func (w *writeWatch) marked(err error) error {
	if !w.wrote.Load() || !(IsDNSErr(err) || isDialErr(err)) {
		return err
	}
	return errWrittenFirst{err}
}

// errWrittenFirst is a dial or DNS error met after the attempt's request
// had been written to a connection: by a replay below the transport, so the
// request may have been processed. It unwraps to the error.
type errWrittenFirst struct{ error }

func (e errWrittenFirst) Error() string {
	return "retryhttp: request sent, then resent by a lower layer, which failed (the request may have been processed): " + e.error.Error()
}

func (e errWrittenFirst) Unwrap() error { return e.error }

// writtenFirst reports whether err is marked by errWrittenFirst.
func writtenFirst(err error) bool {
	var w errWrittenFirst
	return errors.As(err, &w)
}

// carriesKey reports whether the caller put a key on h, under either usual
// name or under name, in any case; an empty or nil value counts (net/http
// reads a nil Idempotency-Key as "replayable, send no header").
func carriesKey(h http.Header, name string) bool {
	for _, n := range [...]string{"Idempotency-Key", "X-Idempotency-Key"} {
		if _, ok := lookupHeader(h, n); ok {
			return true
		}
	}
	if name == DefaultIdempotencyKeyHeader || name == "X-Idempotency-Key" {
		return false // looked up already
	}
	_, ok := lookupHeader(h, http.CanonicalHeaderKey(name))
	return ok
}

// IdempotencyKey returns the idempotency key that req carries under
// Idempotency-Key or X-Idempotency-Key, in any case of the header's name,
// or "" if it carries none: the caller's key, or, on the request as sent (an
// Attempt's Req), the key the transport injected. Header.Get does not find an
// injected key, which is stored under the lower-case name (see
// WithIdempotencyKeys).
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
