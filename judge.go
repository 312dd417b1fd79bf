package retryhttp

import "net/http"

// The judgement of one attempt, shared by the retry loop (transport.go) and
// the hedged path (hedge.go): what an attempt's outcome means for its
// request (judge), and how the error of a request given up on is marked
// (markGiveUp). What each path then does differs: the loop waits and asks
// the budget (park.go), the hedged path launches at once or waits for the
// attempts still in flight.

// newAttempt is the Attempt of one attempt's outcome: attempt n of a request
// that runs with s and whose idempotency is idem, sent as req.
func (t *Transport) newAttempt(s *settings, idem idempotency, n int, req *http.Request, res *http.Response, err error) Attempt {
	return Attempt{
		Count: n, Req: req, Res: res, Err: err,
		IdempotencyKeyInjected: idem.injected,
		IdempotencyKeyHonored:  s.idempotencyKeysHonored,
		RetrySignalIgnored:     !s.retrySignal,
	}
}

// judge says what the outcome of attempt a means for its request, of which
// sent attempts have been sent (a's included), and whose body is body. It
// returns 0 when another attempt is worth sending: the policy wants a
// retried, the body can be sent again and the retry limit allows one more.
// Otherwise the outcome is final, and it returns why: StopRetriesExhausted
// when the policy wanted a retry but the limit is reached, or the reason an
// outcome that is not retried settled the request (settled).
//
// It decides neither the wait nor the budget: those belong to the path that
// sends the next attempt.
func (s *settings) judge(a *Attempt, body *replay, sent int) StopReason {
	// 1. An upgraded connection: nothing to retry. Nor is any other
	// answer (failure.go) for this package's policies: they need not be
	// asked.
	if a.Res != nil && (a.Res.StatusCode == http.StatusSwitchingProtocols || s.rules != nil && a.Err == nil && answered(a.Res.StatusCode)) {
		return StopSuccess
	}
	// 2. No retries configured, or the policy does not retry the outcome;
	// or it would, but the request's body cannot be sent again.
	if s.maxRetries == 0 || !s.shouldRetry(*a) {
		return settled(a.Req, a.Res, a.Err)
	}
	if !body.replayable() {
		return StopBodyNotReplayable // a retry was wanted, but the body cannot be sent again
	}
	// 3. Worth another attempt, but out of retries.
	if sent > s.maxRetries {
		return StopRetriesExhausted
	}
	return 0
}

// markGiveUp returns err, the error of the last attempt of a request given
// up on for why after attempts attempts, joined with the sentinel of why:
// ErrRetriesExhausted, ErrRetryBudgetExhausted, ErrCircuitOpen or
// ErrBodyNotReplayable. For any other reason it returns err as it is; a nil
// err stays nil whatever the reason: the last response is returned as it
// is.
func markGiveUp(why StopReason, attempts int, err error) error {
	if err == nil {
		return nil
	}
	switch why {
	case StopRetriesExhausted:
		return errExhausted(attempts, err)
	case StopBudgetRefused:
		return errBudgetRefused(err)
	case StopCircuitOpen:
		return errCircuitRefused(err)
	case StopBodyNotReplayable:
		return joinErr(ErrBodyNotReplayable, err)
	}
	return err
}
