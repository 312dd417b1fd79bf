package retryhttp

import (
	"errors"
	"net/http"
	"time"
)

// StopReason says why the transport stopped sending attempts of a request:
// the outcome it returned was final, or retrying it was not possible or not
// allowed.
type StopReason uint8

const (
	// StopSuccess: the last attempt brought a response with a status below
	// 400, which is never retried.
	StopSuccess StopReason = iota + 1

	// StopNotRetryable: the last attempt failed in a way the ShouldRetryFn
	// does not retry, or retries are off (WithMaxRetries(0)).
	StopNotRetryable

	// StopRetriesExhausted: the last attempt was retryable, but the retry
	// limit was reached.
	StopRetriesExhausted

	// StopBudgetRefused: the destination's retry budget refused the retry:
	// at once (no token, and it could not be parked), after its delay (the
	// token it saw was taken meanwhile), or after it waited, parked or in
	// the pause lane, until a bound (RetryBudget).
	StopBudgetRefused

	// StopCircuitOpen: the destination's circuit breaker is open; nothing
	// was sent.
	StopCircuitOpen

	// StopDelayTooLong: the wait before the retry (a Retry-After, say) was
	// longer than the maximum delay (WithMaxDelay).
	StopDelayTooLong

	// StopDeadline: the wait before the retry would have ended after the
	// request context's deadline.
	StopDeadline

	// StopCanceled: the caller's context was cancelled or reached its
	// deadline.
	StopCanceled

	// StopError: the transport could not prepare an attempt (a body
	// could not be replayed by its GetBody, no idempotency key could be
	// made, or the PrepareRetry hook failed: WithPrepareRetry), or the
	// caller's request body failed while an attempt read it and the base
	// transport returned that error (ErrBufferingBody).
	StopError

	// StopBodyNotReplayable: the ShouldRetryFn would have retried the last
	// attempt, but the request's body could not be sent again: it has no
	// GetBody and outgrew the body buffer limit or failed while being
	// read, buffering is off (WithBodyBufferLimit(0)), or
	// WithPreventRetryWithBody is set. An error is joined with
	// ErrBodyNotReplayable.
	StopBodyNotReplayable

	// StopQuotaWait: the request's advertised quota was spent, and its
	// window turns after the maximum delay (WithMaxDelay) or the context's
	// deadline; the attempt was not sent, and the error is a
	// *QuotaWaitError (WithQuotaPacing).
	StopQuotaWait
)

var stopReasonNames = [...]string{
	StopSuccess:          "success",
	StopNotRetryable:     "not retryable",
	StopRetriesExhausted: "retries exhausted",
	StopBudgetRefused:    "budget refused",
	StopCircuitOpen:      "circuit open",
	StopDelayTooLong:     "delay too long",
	StopDeadline:         "deadline too close",
	StopCanceled:         "canceled",
	StopError:            "error",

	StopBodyNotReplayable: "body not replayable",
	StopQuotaWait:         "quota wait too long",
}

// String returns the reason in words, such as "retries exhausted".
func (r StopReason) String() string {
	if int(r) < len(stopReasonNames) && stopReasonNames[r] != "" {
		return stopReasonNames[r]
	}
	return "unknown"
}

// GaveUp reports whether the request failed because retrying was cut short
// by the transport's defences or limits (retries exhausted, budget refused,
// circuit open, a delay too long, a deadline too close, or a quota whose
// window turns too late), rather than
// succeeding or failing in a way that is never retried.
func (r StopReason) GaveUp() bool {
	switch r {
	case StopRetriesExhausted, StopBudgetRefused, StopCircuitOpen, StopDelayTooLong, StopDeadline, StopQuotaWait:
		return true
	}
	return false
}

// ending is how one logical request ended: why, after how many attempts.
type ending struct {
	why      StopReason
	attempts int
}

// settled is the reason for an outcome the ShouldRetryFn did not retry,
// of an attempt that sent req.
func settled(req *http.Request, res *http.Response, err error) StopReason {
	switch {
	case err == nil && res != nil && answered(res.StatusCode):
		return StopSuccess
	case callerGone(req):
		return StopCanceled
	case err != nil && errors.Is(err, ErrBufferingBody):
		return StopError // the caller's body failed, not the attempt
	}
	return StopNotRetryable
}

// callerGone reports whether the caller of req gave up on it: its context
// is done, or past its deadline, or its Cancel channel is closed. The last
// two matter an instant before the context says so: http.Client.Timeout,
// for a transport it does not know (this one), both sets a deadline on the
// context and closes Request.Cancel from a timer of its own, and either may
// end an attempt first.
func callerGone(req *http.Request) bool {
	if req == nil {
		return false
	}
	ctx := req.Context()
	if ctx.Err() != nil {
		return true
	}
	if deadline, ok := ctx.Deadline(); ok && !time.Now().Before(deadline) {
		return true
	}
	//lint:ignore SA1019 http.Client.Timeout still sets it.
	if cancel := req.Cancel; cancel != nil {
		select {
		case <-cancel:
			return true
		default:
		}
	}
	return false
}
