package retryhttp

import (
	"fmt"
	"net/http"
	"strconv"
)

// WithErrorOnGiveUp, when true, makes RoundTrip return an error instead of a
// response when the transport gives up retrying a response it would have
// retried: the retries were used up, the retry budget refused one more, the
// wait the server asked for was longer than the maximum delay, or it would
// have ended past the context's deadline. The error is a *GiveUpError
// ("retryhttp: giving up after 4 attempts: last status 503 Service
// Unavailable"); the response is drained, closed and not returned. Errors,
// responses the policy does not retry (a 404, a 500 by default), requests
// with retries off (WithMaxRetries(0)) or whose body cannot be sent again,
// and a response returned because the destination's circuit opened are
// returned as without this option. A
// request sent once is given up on too when its retry was not sent (a
// Retry-After longer than WithMaxDelay, say).
//
// It is off by default: the last response, which the caller can read, is
// usually worth more than an error. It is meant for code moving from
// github.com/hashicorp/go-retryablehttp, whose call sites expect an error
// when retries give up.
func WithErrorOnGiveUp(enabled bool) Option {
	return option(func(s *settings) { s.errorOnGiveUp = enabled })
}

// GiveUpError is the error RoundTrip returns, with WithErrorOnGiveUp(true),
// when it gave up retrying a response. It wraps ErrRetryBudgetExhausted when
// the retry budget refused the next retry, and ErrRetriesExhausted otherwise
// (a delay too long or past the deadline included), so that errors.Is
// matches them; errors.As reaches it through the
// *url.Error of an http.Client.
type GiveUpError struct {
	// Attempts is the number of attempts sent.
	Attempts int

	// StatusCode is the status of the last response, 503 say.
	StatusCode int

	// Reason says why the transport gave up: StopRetriesExhausted,
	// StopBudgetRefused, StopDelayTooLong or StopDeadline.
	Reason StopReason
}

// Error reads "retryhttp: giving up after N attempts: last status 503
// Service Unavailable", with the reason in parentheses after the count when
// it is not that the retries were used up.
func (e *GiveUpError) Error() string {
	status := strconv.Itoa(e.StatusCode)
	if text := http.StatusText(e.StatusCode); text != "" {
		status += " " + text
	}
	why := ""
	if e.Reason != StopRetriesExhausted {
		why = " (" + e.Reason.String() + ")"
	}
	attempts := "attempts"
	if e.Attempts == 1 {
		attempts = "attempt"
	}
	return fmt.Sprintf("retryhttp: giving up after %d %s%s: last status %s", e.Attempts, attempts, why, status)
}

// Unwrap returns ErrRetryBudgetExhausted or ErrRetriesExhausted.
func (e *GiveUpError) Unwrap() error {
	if e.Reason == StopBudgetRefused {
		return ErrRetryBudgetExhausted
	}
	return ErrRetriesExhausted
}

// giveUp turns a response the transport gave up retrying into a
// *GiveUpError, letting go of the response; other outcomes are returned as
// they are.
func giveUp(e ending, res *http.Response, err error) (*http.Response, error) {
	if res == nil || err != nil || e.why == StopCircuitOpen || !e.why.GaveUp() {
		return res, err
	}
	discard(res)
	return nil, &GiveUpError{Attempts: e.attempts, StatusCode: res.StatusCode, Reason: e.why}
}
