package retryhttp

import (
	"errors"
	"fmt"
	"time"
)

// The errors below are part of the package's contract: callers may match them
// with errors.Is. Errors returned by RoundTrip wrap them with %w (or join them
// with the underlying error), so errors.Is and errors.As reach both the
// sentinel and the error of the base transport (a *net.OpError, say).
var (
	// ErrRetriesExhausted is joined with the last attempt's error when that
	// error was retryable but no retries were left. With
	// WithErrorOnGiveUp, a *GiveUpError wraps it too.
	ErrRetriesExhausted = errors.New("retryhttp: retries exhausted")

	// ErrBufferingBody wraps the error met while reading a request body
	// that has no GetBody, which the transport streams to the first
	// attempt while keeping a copy for retries. The error reaches the base
	// transport that reads the body, and the attempt's outcome is what the
	// base transport makes of it. When it returns the error (net/http's
	// Transport does when it fails writing the request), the attempt failed
	// with it, possibly after part of the request was sent, and the request
	// is not retried (StopError). When it answers anyway (it swallowed the
	// error, or the response came first), its answer is the attempt's
	// outcome, judged as any other, with a body that cannot be sent again:
	// a 200 is returned as a success, and an answer the ShouldRetryFn
	// would retry ends the request (StopBodyNotReplayable).
	ErrBufferingBody = errors.New("retryhttp: error buffering request body")

	// ErrBodyNotReplayable is joined with the last attempt's error when
	// the transport would have retried the request but its body could not
	// be sent again: the body has no GetBody and outgrew the body buffer
	// limit (WithBodyBufferLimit) or failed while being read, buffering is
	// off, or WithPreventRetryWithBody is set. The request ended with
	// StopBodyNotReplayable; a last response is returned as it is, with no
	// error.
	ErrBodyNotReplayable = errors.New("retryhttp: request body cannot be replayed")

	// ErrSeekingBody wraps the error returned by a request's GetBody when a
	// retry needed a fresh copy of the body. The retry was not sent.
	ErrSeekingBody = errors.New("retryhttp: error getting a fresh request body")

	// ErrAttemptTimeout is returned (wrapped) when one attempt ran past the
	// per-attempt timeout set with WithAttemptTimeout or SetAttemptTimeout,
	// and it was not retried. It is a net.Error whose Timeout method reports
	// true, so IsTimeoutErr recognises it.
	ErrAttemptTimeout error = attemptTimeoutError{}

	// ErrRetryBudgetExhausted is joined with the last attempt's error when
	// that error was retryable but the destination's retry budget refused
	// the retry: at once (no token, and it could not be parked), or after
	// it waited, parked or in the host's pause lane, until a bound (see
	// RetryBudget). When the last
	// attempt brought a response instead, that response is returned as it
	// is, with no error (or, with WithErrorOnGiveUp, a *GiveUpError that
	// wraps this).
	ErrRetryBudgetExhausted = errors.New("retryhttp: retry budget exhausted")

	// ErrCircuitOpen is returned (wrapped, with the destination) when the
	// circuit breaker of the destination is open, or half-open with all its
	// probes in flight (see WithCircuitBreaker): the request was not sent.
	// It is also joined with the last attempt's error when the circuit
	// opened while that attempt's retry was parked (the last response, if
	// any, is returned as it is).
	ErrCircuitOpen = errors.New("retryhttp: circuit breaker open")

	// ErrPrepareRetry wraps the error returned by the function set with
	// WithPrepareRetry. The retry it was preparing was not sent, and no
	// further attempt is made; errors.Is and errors.As reach the hook's
	// error too.
	ErrPrepareRetry = errors.New("retryhttp: preparing a retry")
)

// attemptTimeoutError is the type of ErrAttemptTimeout. It implements
// net.Error so that code which checks for timeouts the usual way, with
// errors.As and Timeout(), treats an attempt timeout like any other.
type attemptTimeoutError struct{}

func (attemptTimeoutError) Error() string   { return "retryhttp: attempt timed out" }
func (attemptTimeoutError) Timeout() bool   { return true }
func (attemptTimeoutError) Temporary() bool { return true }

// errAttemptTimedOut is the error of an attempt cut by its own timeout.
func errAttemptTimedOut(d time.Duration) error {
	return timeoutWrap{fmt.Errorf("%w after %v", ErrAttemptTimeout, d)}
}

// errExhausted joins ErrRetriesExhausted with the last attempt's error.
func errExhausted(attempts int, err error) error {
	return timeoutWrap{fmt.Errorf("%w after %d attempts: %w", ErrRetriesExhausted, attempts, err)}
}

// errBudgetRefused joins ErrRetryBudgetExhausted with the last attempt's
// error, or returns nil when the attempt ended with a response.
func errBudgetRefused(err error) error {
	if err == nil {
		return nil
	}
	return joinErr(ErrRetryBudgetExhausted, err)
}

// errCircuitRefused joins ErrCircuitOpen with the last attempt's error, or
// returns nil when the attempt ended with a response.
func errCircuitRefused(err error) error {
	if err == nil {
		return nil
	}
	return joinErr(ErrCircuitOpen, err)
}

// timeoutWrap gives an error that wraps others a Timeout method reporting
// whether one of them is a timeout. An http.Client returns a *url.Error, whose
// Timeout method asks only the error directly inside it; without this, a
// timeout wrapped by this package would not look like one to IsTimeoutErr
// or to a net.Error check on the client's error.
type timeoutWrap struct{ error }

func (e timeoutWrap) Unwrap() error { return e.error }
func (e timeoutWrap) Timeout() bool { return IsTimeoutErr(e.error) }

// joinErr joins a sentinel with the error it qualifies, so that errors.Is
// and errors.As reach both; the message reads "sentinel: err".
func joinErr(sentinel, err error) error {
	return timeoutWrap{fmt.Errorf("%w: %w", sentinel, err)}
}

// errNilResponse is returned when a base transport breaks the RoundTripper
// contract by returning neither a response nor an error.
var errNilResponse = errors.New("retryhttp: base transport returned a nil response and a nil error")
