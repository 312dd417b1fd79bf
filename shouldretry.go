package retryhttp

import (
	"net/http"
	"strings"
)

// ShouldRetryFn decides, after an attempt, whether the request should be
// sent again. Unless retries are off (WithMaxRetries(0)), it is called
// after every attempt but one answered 101 Switching Protocols, the last
// one included (a true there marks the error with ErrRetriesExhausted);
// whether the request's body can be sent again is checked after it. The
// transport, not this function, enforces the retry limit and the deadline.
// It must be safe for concurrent use.
type ShouldRetryFn func(attempt Attempt) bool

// defaultIdempotentMethods are the methods RFC 9110 §9.2.2 defines as
// idempotent (the safe methods GET, HEAD, OPTIONS and TRACE, plus PUT and
// DELETE).
var defaultIdempotentMethods = []string{
	http.MethodGet, http.MethodHead, http.MethodOptions,
	http.MethodTrace, http.MethodPut, http.MethodDelete,
}

// defaultRetryableStatusCodes are retried for requests guessed idempotent:
// the upstream of a gateway failed (502), or the server is unavailable (503).
var defaultRetryableStatusCodes = []int{http.StatusBadGateway, http.StatusServiceUnavailable}

// CustomizedShouldRetryFnOptions configures CustomizedShouldRetryFn.
type CustomizedShouldRetryFnOptions struct {
	// IdempotentMethods replaces the methods guessed idempotent: GET, HEAD,
	// OPTIONS, TRACE, PUT and DELETE by default. Methods are case-sensitive
	// (RFC 9110 §9.1). A nil slice means the default; an empty non-nil
	// slice means no method is guessed idempotent by its name (a request
	// carrying an Idempotency-Key still is).
	IdempotentMethods []string

	// RetryableStatusCodes REPLACES the status codes retried for requests
	// guessed idempotent: 502 and 503 by default. []int{504} retries 504
	// and no longer 502 or 503; to add to the defaults, use
	// AdditionalStatusCodes. A nil slice means the default; an empty
	// non-nil slice means none. 429, and any status of 400 or above
	// carrying Retry-After, are retried whatever this list.
	RetryableStatusCodes []int

	// AdditionalStatusCodes are retried for requests guessed idempotent, on
	// top of RetryableStatusCodes (or its default). Statuses below 400 are
	// never retried, whatever this list.
	AdditionalStatusCodes []int

	// RetryIf, when not nil, is asked about an attempt that the rules
	// above do not retry, when the request is guessed idempotent. The
	// rules that always win are checked first and RetryIf cannot override
	// them: a caller's context that is done, a 1xx, 2xx or 3xx response
	// (whatever its headers), and a response carrying the cross-hop signal
	// (RetrySignalHeader: no-retry). RetryIf must not read or close the
	// response body, and must be safe for concurrent use. docs/compose.md
	// explains why a body-based check is not offered.
	RetryIf func(Attempt) bool
}

// DefaultShouldRetryFn is the decision the transport uses unless told
// otherwise. It returns false if the caller's context is done. Otherwise it
// returns true for:
//   - an error that proves the request never left the client: a DNS error, a
//     refused connection or any other failure to dial (unless a layer below
//     the transport had sent the request before it failed to dial again:
//     then only when the request is guessed idempotent);
//   - a timeout (IsTimeoutErr), or a connection lost before any response (a
//     reset, an unexpected EOF, a write to a closed connection, an HTTP/2
//     stream reset or GOAWAY), when the request is guessed idempotent;
//   - a response with status 429, or with a status of 400 or above and a
//     Retry-After header;
//   - a response with status 502 or 503, when the request is guessed
//     idempotent.
//
// Anything else, including every 1xx, 2xx and 3xx response, is not retried,
// nor is a response carrying the cross-hop signal (RetrySignalHeader:
// no-retry; see Pushback), unless Attempt.RetrySignalIgnored says the
// transport ignores it.
// A request is guessed idempotent if its method is GET, HEAD, OPTIONS, TRACE,
// PUT or DELETE, or if it carries a non-empty Idempotency-Key or
// X-Idempotency-Key header set by the caller. A key the transport injected
// counts only when the attempt says the server honours keys
// (Attempt.IdempotencyKeyHonored, from IdempotencyKeys.Honored).
// docs/default.md states the rules in full.
func DefaultShouldRetryFn(attempt Attempt) bool {
	return defaultRetryPolicy.shouldRetry(attempt)
}

var defaultRetryPolicy = retryPolicy{
	idempotentMethods: defaultIdempotentMethods,
	statusCodes:       defaultRetryableStatusCodes,
}

// CustomizedShouldRetryFn returns a ShouldRetryFn that follows the rules of
// DefaultShouldRetryFn with the lists of idempotent methods and retryable
// status codes replaced by those of opts, and the additions of opts (extra
// statuses, a RetryIf condition) made under the rules that always win. The
// slices are copied.
//
// The transport cannot tell the function returned from any other: passed to
// WithShouldRetryFn or SetShouldRetryFn, it decides retries as described,
// but the transport's own guess of idempotency before sending (which
// requests WithHedging hedges, whose writes are watched) follows the
// default methods, as for any function of the caller's. Use
// WithCustomizedShouldRetryFn (for a Transport, NewPolicy or SetOptions)
// for that guess to follow opts.IdempotentMethods too.
func CustomizedShouldRetryFn(opts CustomizedShouldRetryFnOptions) ShouldRetryFn {
	return newRetryPolicy(opts).fn()
}

// WithCustomizedShouldRetryFn sets the ShouldRetryFn to
// CustomizedShouldRetryFn(opts), and makes the transport's own guess of a
// request's idempotency (which requests are hedged, whose writes are
// watched) follow the same rules, opts.IdempotentMethods included.
func WithCustomizedShouldRetryFn(opts CustomizedShouldRetryFnOptions) Option {
	return option(withRetryPolicy(newRetryPolicy(opts)))
}

// newRetryPolicy returns the rules of CustomizedShouldRetryFn(opts).
func newRetryPolicy(opts CustomizedShouldRetryFnOptions) retryPolicy {
	p := defaultRetryPolicy
	if opts.IdempotentMethods != nil {
		p.idempotentMethods = append([]string(nil), opts.IdempotentMethods...)
	}
	if opts.RetryableStatusCodes != nil {
		p.statusCodes = append([]int(nil), opts.RetryableStatusCodes...)
	}
	return p.compose(opts.AdditionalStatusCodes, opts.RetryIf) // compose.go
}

// fn returns p's decision as a ShouldRetryFn.
func (p retryPolicy) fn() ShouldRetryFn {
	if p.retryIf == nil {
		return p.shouldRetry
	}
	return p.shouldRetryOrIf
}

// retryPolicy holds the two lists that CustomizedShouldRetryFn can replace,
// and the condition it can add.
type retryPolicy struct {
	idempotentMethods []string
	statusCodes       []int
	retryIf           func(Attempt) bool // compose.go; nil: none
}

func (p retryPolicy) shouldRetry(a Attempt) bool {
	// 1xx, 2xx and 3xx are answers, whatever their headers say: the usual
	// case, decided first.
	if answeredAttempt(a) {
		return false
	}
	// The caller gave up: nobody is waiting for a retry.
	if callerGone(a.Req) {
		return false
	}
	if a.Err != nil {
		return p.shouldRetryErr(a)
	}
	if a.Res == nil {
		return false
	}
	return p.shouldRetryRes(a)
}

func (p retryPolicy) shouldRetryErr(a Attempt) bool {
	// The request never reached a server: always safe to send again;
	// unless a layer below had sent it before it failed to connect again.
	if IsDNSErr(a.Err) || isDialErr(a.Err) {
		return !writtenFirst(a.Err) || p.idempotent(a)
	}
	// The request may have reached the server: only if sending it twice is
	// harmless.
	if IsTimeoutErr(a.Err) || isConnLost(a.Err) {
		return p.idempotent(a)
	}
	return false
}

func (p retryPolicy) shouldRetryRes(a Attempt) bool {
	code := a.Res.StatusCode
	// 1xx, 2xx and 3xx are answers, whatever their headers say.
	if answered(code) {
		return false
	}
	// A server behind this one already retried, or gave up: pass it on.
	if !a.RetrySignalIgnored && HasRetrySignal(a.Res.Header) {
		return false
	}
	// The server asked to be called again later.
	if code == http.StatusTooManyRequests || a.Res.Header.Get("Retry-After") != "" {
		return true
	}
	for _, c := range p.statusCodes {
		if c == code {
			return p.idempotent(a)
		}
	}
	return false
}

// answeredAttempt reports whether a brought an answer (failure.go), which no
// policy of this package retries, whatever its headers say.
func answeredAttempt(a Attempt) bool {
	return a.Err == nil && a.Res != nil && answered(a.Res.StatusCode)
}

// idempotent reports whether sending the attempt's request twice is guessed
// harmless: its method is idempotent (checked first: no header lookups for
// a GET), or it carries an idempotency key that the caller set, or one the
// transport injected for a server known to honour keys.
func (p retryPolicy) idempotent(a Attempt) bool {
	if a.Req == nil {
		return false
	}
	if p.idempotentMethod(a.Req.Method) {
		return true
	}
	f := scanHeader(a.Req.Header)
	return keyGuess(&f, a.IdempotencyKeyInjected, a.IdempotencyKeyHonored)
}

// keyGuess is the part of the idempotency guess that keys decide, for a
// request whose method is not guessed idempotent and whose headers have
// the facts f: a key the transport injected counts if the server honours
// keys (injected, honored), a non-empty key the caller set always.
func keyGuess(f *headerFacts, injected, honored bool) bool {
	if injected {
		return honored
	}
	return f.hasIdempotencyKey()
}

// idempotentMethod reports whether method is in the policy's list.
func (p *retryPolicy) idempotentMethod(method string) bool {
	if method == "" {
		method = http.MethodGet // net/http's meaning of an empty method
	}
	for _, m := range p.idempotentMethods {
		if m == method {
			return true
		}
	}
	return false
}

// lookupHeader returns the values of the header canonical, which must be in
// canonical form, also when the caller set it in the map under another case
// (h["idempotency-key"] = ...), which Header.Get does not see.
func lookupHeader(h http.Header, canonical string) ([]string, bool) {
	if len(h) == 0 {
		return nil, false
	}
	if v, ok := h[canonical]; ok {
		return v, true
	}
	for k, v := range h {
		if len(k) == len(canonical) && strings.EqualFold(k, canonical) {
			return v, true
		}
	}
	return nil, false
}
