package retryhttp

import (
	"context"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/budget"
)

// awaitRetry gets the retry of attempt a under way, once the policy chose
// it and its delay d; pause: a's response asked for one (pause.go); paced:
// it is a 429 whose quota the transport paces to (quotaTurnCap). Without
// a budget, it reports the retry, lets go of a's response and waits d. With
// one, the budget decides (budget.Admit: docs/storms.md's table) and the
// loop does as it says: send after a wait, wait then ask again, park, or
// give up. claim is the request's account with the budget, made on its
// first retry. It returns the retry's lease, or why to stop and the error
// to return with a's response: the response as it is, or the error joined
// with the sentinel of the reason.
func (t *Transport) awaitRetry(ctx context.Context, s *settings, a Attempt, d time.Duration, pause, paced bool, claim **budget.Retry) (lease, StopReason, error) {
	if s.budget == nil {
		return t.proceed(ctx, s, lease{}, a, d, d, true)
	}
	reported := false // at the start of its delay
	r := t.claim(s, claim)
	r.Req, r.Res, r.Pause, r.Paced, r.Reused, r.Delay = a.Req, a.Res, pause, paced, success(a.Res), d
	for {
		r.Bound = t.bound(ctx, s)
		v := s.budget.inner().Admit(r)
		switch v.Do {
		case budget.Send:
			return t.proceed(ctx, s, v.Lease, a, d, v.After, !reported)
		case budget.Refuse:
			return lease{}, StopBudgetRefused, markGiveUp(StopBudgetRefused, a.Count, a.Err)
		case budget.Wait: // its delay: the retry is under way
			if !reported {
				t.obs.reportRetry(a, s.maxRetries, d, false)
				reported = true
			}
		case budget.Park:
			if t.breakers.isOpen(a.Req) {
				return lease{}, StopCircuitOpen, markGiveUp(StopCircuitOpen, a.Count, a.Err)
			}
		}
		if v.Waiter == nil { // wait, then ask again
			if err := t.wait(ctx, v.After); err != nil {
				discard(a.Res)
				return lease{}, StopCanceled, err
			}
			continue
		}
		start := t.clock().Now()
		l, why := t.park(ctx, s, a, v.Waiter, start.Add(v.Until))
		r.Parked += t.clock().Now().Sub(start)
		switch why {
		case 0:
			return t.proceed(ctx, s, l, a, d, 0, !reported)
		case StopCanceled:
			discard(a.Res)
			return lease{}, why, ctx.Err()
		}
		return lease{}, why, markGiveUp(why, a.Count, a.Err) // budget refused, circuit open
	}
}

// proceed reports the retry of a after delay d (if report: it was not
// reported when its delay began), lets go of its response and waits wait.
// It returns l, or StopCanceled, giving l's slot back, if the caller gave
// up meanwhile.
func (t *Transport) proceed(ctx context.Context, s *settings, l lease, a Attempt, d, wait time.Duration, report bool) (lease, StopReason, error) {
	if report {
		t.obs.reportRetry(a, s.maxRetries, d, false)
	}
	discard(a.Res)
	if err := t.wait(ctx, wait); err != nil {
		l.End(outNeutral, 0, 0)
		return lease{}, StopCanceled, err
	}
	return l, 0, nil
}

// claim returns the request's account with s's budget, made on first use
// (a request that needs none allocates none).
func (t *Transport) claim(s *settings, claim **budget.Retry) *budget.Retry {
	if *claim == nil {
		*claim = &budget.Retry{MaxDelay: s.maxDelay, Hold: s.holdDuringPause, Owner: t.breakers.owner(), Clock: t.clk}
	}
	return *claim
}

// bound returns how long from now a retry may wait before it is sent: until
// the caller's deadline less one attempt timeout (budget.NoBound: no
// deadline).
func (t *Transport) bound(ctx context.Context, s *settings) time.Duration {
	deadline, ok := ctx.Deadline()
	if !ok {
		return budget.NoBound
	}
	return deadline.Sub(t.clock().Now()) - s.attemptTimeout
}
