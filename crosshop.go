package retryhttp

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/seed2409de8f/retryhttp/internal/hop"
)

// Cross-hop retries. In a chain of services that all retry, every hop
// retries the same failure, and the retries multiply. The headers below let
// only the hop directly above a failure retry it: that hop tells its callers
// "I already retried; don't retry me", and they pass the failure up instead
// of sending it again. docs/storms.md gives the arithmetic, the adoption
// path and the trust model.

// The headers the transport writes and reads: the cross-hop signal, the
// attempt number, the deadline and the idempotency key.
const (
	// RetrySignalHeader is the response header that carries the cross-hop
	// signal. A response whose RetrySignalHeader holds the token
	// RetrySignalNoRetry (compared without regard to case, among
	// comma-separated tokens) is not retried by DefaultShouldRetryFn nor by
	// the functions of CustomizedShouldRetryFn, whatever its status and its
	// Retry-After. Other values are ignored. inbound.Pushback adds it; a
	// handler may also set it itself, on a failure that no caller should
	// retry. inbound.LoadShedder's 503s do not carry it (the caller directly
	// above may retry a shed request: docs/shedding.md), but for a caller
	// whose deadline left no time (docs/deadlines.md).
	RetrySignalHeader = "Retry-Pushback"

	// RetrySignalNoRetry is the value of RetrySignalHeader that means "the
	// server, or a server behind it, already retried this failure, or
	// gave up on it: do not retry it".
	RetrySignalNoRetry = "no-retry"

	// AttemptHeader is the request header that carries the attempt number
	// of a retry or a hedge: "2" on the second attempt of a request, "3" on
	// the third, and so on. First attempts do not carry it (so they cost
	// nothing): its absence means attempt 1. See AttemptFromRequest and
	// WithAttemptHeader.
	AttemptHeader = "Retry-Attempt"

	// DeadlineHeader is the request header that carries the time the caller
	// still waits for the response of an attempt, in whole milliseconds, as
	// a decimal integer ("250"). The name follows the Request-Timeout header
	// of the expired IETF draft draft-thomson-hybi-http-timeout (the time a
	// client will await a response), in Envoy's unit
	// (x-envoy-expected-rq-timeout-ms): seconds are too coarse within a data
	// centre. See WithDeadlineHeader.
	DeadlineHeader = "Request-Timeout-Ms"

	// DefaultIdempotencyKeyHeader is the header that carries the idempotency
	// keys the transport injects, unless IdempotencyKeys.Header names
	// another. It is the field defined by the IETF draft "The
	// Idempotency-Key HTTP Header Field". See WithIdempotencyKeys.
	DefaultIdempotencyKeyHeader = "Idempotency-Key"
)

// WithRetrySignal turns the cross-hop signal on or off for this transport;
// it is on by default. When on, DefaultShouldRetryFn does not retry a
// response carrying RetrySignalHeader: no-retry, and a request sent from a
// handler wrapped with inbound.Pushback reports to it how it ended. When
// off, the transport ignores the signal: such responses are retried like
// any other, and the handler's inbound.Pushback learns nothing from this
// transport.
func WithRetrySignal(enabled bool) Option {
	return option(func(s *settings) { s.retrySignal = enabled })
}

// WithAttemptHeader turns the attempt header (AttemptHeader) on or off; it
// is on by default. When on, every attempt after the first, retry or hedge,
// carries its number in AttemptHeader, and a first attempt never carries
// it: a request that arrives with one (copied by a proxy from its own
// inbound request, say) is sent without it. The header goes on a copy of
// the request: the caller's is never modified. When off, requests are sent
// with the headers their caller gave them.
func WithAttemptHeader(enabled bool) Option {
	return option(func(s *settings) { s.attemptHeader = enabled })
}

// AttemptFromRequest returns the attempt number that r carries in
// AttemptHeader, as sent by a Transport (for logs, say): 1 if r carries
// none, or one that is not a positive integer. The caller chooses the
// header's value, so the number is only as trustworthy as the caller; this
// package decides nothing from it.
func AttemptFromRequest(r *http.Request) int {
	v := r.Header.Get(AttemptHeader)
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// HasRetrySignal reports whether h carries RetrySignalHeader, under any case
// of its name, with the token RetrySignalNoRetry. It does not allocate.
func HasRetrySignal(h http.Header) bool {
	vs, _ := lookupHeader(h, RetrySignalHeader) // a handler may set it as h["retry-pushback"]
	for _, v := range vs {
		for v != "" {
			var token string
			token, v, _ = strings.Cut(v, ",")
			if strings.EqualFold(strings.TrimSpace(token), RetrySignalNoRetry) {
				return true
			}
		}
	}
	return false
}

// pushback tells the inbound.Pushback of req's inbound request, if any,
// that req, which ran with s, ended as end says, with res. Only give-ups and
// signalled failures are reported, so a request that succeeds looks up
// nothing: it ended with a status below 400 (StopSuccess), neither a
// give-up nor a failed status, and is not looked at past this inlined
// check.
func (s *settings) pushback(req *http.Request, end ending, res *http.Response) {
	if s.retrySignal && end.why != StopSuccess {
		s.pushbackEnded(req, end, res)
	}
}

// pushbackEnded is pushback for a request that did not succeed.
func (s *settings) pushbackEnded(req *http.Request, end ending, res *http.Response) {
	signalled := res != nil && failedStatus(res.StatusCode) && HasRetrySignal(res.Header)
	if !signalled && !end.why.GaveUp() {
		return
	}
	if o := hop.OutcomeFrom(req.Context()); o != nil {
		o.MarkGaveUp()
	}
}
