package retryhttp

import (
	"context"
	"net/http"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/budget"
	"github.com/seed2409de8f/retryhttp/internal/respbody"
	"github.com/seed2409de8f/retryhttp/internal/retryafter"
)

// pauseOf reports whether res asked the client for a pause, and the pause
// it stated (zero: none): a 429, or a failed response whose Retry-After or
// rate-limit reset header (docs/ratelimit.md) asks for a wait (a
// Retry-After of 0, or a date past, asks for none). A Retry-After date is
// read on t's clock.
func (t *Transport) pauseOf(res *http.Response) (stated time.Duration, ok bool) {
	if res == nil || success(res) {
		return 0, false
	}
	now := t.clock().Now
	if d, ok := retryafter.Parse(res.Header, now); ok && d > 0 {
		return d, true
	}
	if d, ok := retryafter.RateLimitReset(res, now); ok && d > 0 {
		return d, true
	}
	return 0, res.StatusCode == http.StatusTooManyRequests
}

// laneBound returns until when a retry after delay d may wait in h's pause
// lane: the caller's deadline less one attempt timeout, or the transport's
// maximum delay, whichever comes first; and whether the lane, at its pace
// (budget.LaneETA), would release it before then.
func (t *Transport) laneBound(ctx context.Context, s *settings, h *budget.Host, d time.Duration) (time.Time, bool) {
	now := t.clock().Now()
	until := now.Add(s.maxDelay)
	if deadline, ok := ctx.Deadline(); ok && deadline.Add(-s.attemptTimeout).Before(until) {
		until = deadline.Add(-s.attemptTimeout)
	}
	return until, !now.Add(max(d, s.budget.core.LaneETA(h))).After(until)
}

// awaitPause gets under way the retry of a, whose response asked for a
// pause, after its delay d (at least the pause stated: the loop saw to
// it), on h, within until (laneBound). Such a retry takes no token: it
// waits d, then waits in its host's pause lane (internal/budget's lane.go)
// until the pace the host accepts releases it. It is refused at once when
// the host's bucket is empty (the lane's retries that failed spent it),
// and it gives up, as a refused retry does, at until, or when the host has
// had no success for the budget's MaxWait and the pause it stated. (A
// retry the lane would not release before until is not brought here: it
// needs a token, as any retry does, awaitRetry.) A response whose body
// cannot be kept in memory (respbody.Keep) is let go, and its retry is
// sent after d without queueing: none is refused after its response was
// let go.
func (t *Transport) awaitPause(ctx context.Context, s *settings, a Attempt, d time.Duration, h *budget.Host, until time.Time,
	acct *retryAccount) (lease, StopReason, error) {
	core := s.budget.core
	if !h.HasToken() {
		return lease{}, StopBudgetRefused, markGiveUp(StopBudgetRefused, a.Count, a.Err)
	}
	if !respbody.Keep(a.Res) {
		return t.proceed(ctx, s, acct, lease{}, a, d, d)
	}
	t.reportRetry(s, acct, a, d)
	if err := t.wait(ctx, d); err != nil {
		discard(a.Res)
		return lease{}, StopCanceled, err
	}
	if t.breakers.isOpen(a.Req) {
		return lease{}, StopCircuitOpen, markGiveUp(StopCircuitOpen, a.Count, a.Err)
	}
	l, why := t.park(ctx, core, h, a, core.NewLaneWaiter(t.breakers.owner(), s.holdDuringPause, t.clk), until)
	switch why {
	case 0:
		discard(a.Res)
		return l, 0, nil
	case StopCanceled:
		discard(a.Res)
		return lease{}, why, ctx.Err()
	}
	return lease{}, why, markGiveUp(why, a.Count, a.Err)
}

// holdFirst holds the first attempt of req while the pause its host's
// server last stated runs (WithHoldDuringPause): it waits in the host's
// pause lane, as a retry there does, and returns the lease it is sent
// with. It returns no lease, and no error, when the host is not paused,
// the budget is off or does not pause, or the wait reached its bound (the
// request is then sent: it was not told to wait for it); the context's
// error if the caller gave up.
func (t *Transport) holdFirst(ctx context.Context, s *settings, req *http.Request) (lease, error) {
	if s.budget == nil || !s.budget.core.Pauses() {
		return lease{}, nil
	}
	core := s.budget.core
	h := core.Host(req)
	if !core.Held(h) {
		return lease{}, nil
	}
	until := t.clock().Now().Add(s.maxDelay)
	if deadline, ok := ctx.Deadline(); ok && deadline.Add(-s.attemptTimeout).Before(until) {
		until = deadline.Add(-s.attemptTimeout)
	}
	l, why := t.park(ctx, core, h, Attempt{Req: req}, core.NewLaneWaiter(t.breakers.owner(), true, t.clk), until)
	if why == StopCanceled {
		return lease{}, ctx.Err()
	}
	return l, nil
}
