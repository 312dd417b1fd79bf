package retryhttp

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/budget"
	"github.com/seed2409de8f/retryhttp/internal/hostmap"
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

// holdFirst holds the first attempt of req while the pause its host's
// server last stated runs (WithHoldDuringPause): it waits in the host's
// pause lane, as a retry there does (budget.Admit), and returns the lease
// it is sent with. It returns no lease, and no error, when the host is not
// paused, the budget is off or does not pause, or the wait reached its
// bound (the request is then sent: it was not told to wait for it). It
// returns why the request ends unsent, with the error to return: the
// caller gave up (StopCanceled, the context's error), or the circuit of
// req's destination opened while it waited (StopCircuitOpen, an error
// wrapping ErrCircuitOpen). claim is the request's account with the
// budget (admit.go).
func (t *Transport) holdFirst(ctx context.Context, s *settings, req *http.Request, claim **budget.Retry) (lease, StopReason, error) {
	if s.budget == nil {
		return lease{}, 0, nil
	}
	r := t.claim(s, claim)
	r.Req, r.First, r.Bound = req, true, t.bound(ctx, s)
	v := s.budget.inner().Admit(r)
	r.First = false
	if v.Waiter == nil {
		return lease{}, 0, nil
	}
	l, why := t.park(ctx, s, Attempt{Req: req}, v.Waiter, t.clock().Now().Add(v.Until))
	switch why {
	case StopCanceled:
		return lease{}, why, ctx.Err()
	case StopCircuitOpen:
		return lease{}, why, fmt.Errorf("%w: %s", ErrCircuitOpen, hostmap.KeyOf(req).String())
	}
	return l, 0, nil
}
