package retryhttp

import (
	"context"
	"net/http"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/breaker"
	"github.com/seed2409de8f/retryhttp/internal/budget"
	"github.com/seed2409de8f/retryhttp/internal/respbody"
)

// Parking waits on the Transport's clock (clock.go), and reads the host's
// state on the budget's (RetryBudgetOptions.Clock): both are the real
// clock unless a test sets them.

// awaitRetry gets the retry of attempt a under way, once the policy chose
// it and its delay d. Without a budget, it reports the retry, lets go of
// a's response and waits d. With one, the retry takes a token of the
// destination's host when it is sent, after its delay (takeAtSend): the
// bucket bounds the retries sent, not those waiting. A retry that finds no
// token is parked: it keeps a's response, waits what remains of d, then
// queues for a slot of the host's window until the host answers again,
// within the bounds of RetryBudget; acct.waited is the request's time
// parked so far. It returns the retry's lease, or why to stop and the
// error to return with a's response: the response is returned as it is, or
// the error joined with the sentinel of the reason.
func (t *Transport) awaitRetry(ctx context.Context, s *settings, a Attempt, d time.Duration, pause bool, acct *retryAccount) (lease, StopReason, error) {
	b := s.budget
	if b == nil {
		return t.proceed(ctx, s, acct, lease{}, a, d, d)
	}
	core := b.core
	h := core.Host(a.Req)
	if pause && core.Pauses() {
		if until, ok := t.laneBound(ctx, s, h, d); ok {
			return t.awaitPause(ctx, s, a, d, h, until, acct)
		}
		// The lane would not release it in time: it needs a token, as
		// any retry.
	}
	// A retry sent at once keeps nothing: no wait needs its response.
	kept := d == 0 || respbody.Keep(a.Res)
	l, taken, waited, err := t.takeAtSend(ctx, s, acct, h, a, d, kept)
	wait := d // what remains of the delay
	if waited {
		wait = 0
	}
	switch {
	case err != nil:
		discard(a.Res)
		return lease{}, StopCanceled, err
	case taken:
		return t.proceed(ctx, s, acct, l, a, d, wait)
	}
	if d == 0 { // it may park: then it keeps its response
		kept = respbody.Keep(a.Res)
	}
	until, ok := t.parkable(ctx, s, h, wait, acct.waited, kept)
	switch {
	case !ok && h.Withdraw():
		return t.proceed(ctx, s, acct, acct.owe(core, h, a), a, d, wait)
	case !ok:
		return lease{}, StopBudgetRefused, markGiveUp(StopBudgetRefused, a.Count, a.Err)
	}
	if t.breakers.isOpen(a.Req) {
		return lease{}, StopCircuitOpen, markGiveUp(StopCircuitOpen, a.Count, a.Err)
	}
	if err := t.wait(ctx, wait); err != nil {
		discard(a.Res)
		return lease{}, StopCanceled, err
	}
	if !h.Parked() && h.Withdraw() { // successes may have refilled the bucket meanwhile
		return t.proceed(ctx, s, acct, acct.owe(core, h, a), a, d, 0)
	}
	start := t.clock().Now()
	l, why := t.park(ctx, core, h, a, budget.NewWaiter(t.breakers.owner()), until)
	acct.waited += t.clock().Now().Sub(start)
	switch {
	case why == 0 && !l.Held(): // released with a token
		return t.proceed(ctx, s, acct, acct.owe(core, h, a), a, d, 0)
	case why == 0:
		return t.proceed(ctx, s, acct, l, a, d, 0)
	case why == StopCanceled:
		discard(a.Res)
		return lease{}, why, ctx.Err()
	}
	return lease{}, why, markGiveUp(why, a.Count, a.Err) // budget refused, circuit open
}

// takeAtSend takes the token of the retry of a when it is sent, after its
// delay d: if h has a token now and no retry parked, it waits d, then
// withdraws one, so that the bucket bounds the retries sent and not those
// that wait. It reports the retry's lease, whether it took a token, and
// whether it waited d (then without a token: others took them meanwhile,
// and the retry goes on as one that found none, its delay waited). A delay
// longer than MaxWait, or a response that could not be kept to return
// after the wait (kept false), takes its token before the wait: no retry
// waits longer than MaxWait only to be refused, and none is refused after
// its response was let go. So does the retry of a response that asked the
// client to back off (asksBackOff): its token is spent whatever the retry
// brings, and the bucket rations such retries as they are decided. It
// returns the context's error if the caller gave up during the wait.
func (t *Transport) takeAtSend(ctx context.Context, s *settings, acct *retryAccount, h *budget.Host, a Attempt, d time.Duration,
	kept bool) (l lease, taken, waited bool, err error) {
	b := s.budget.core
	switch {
	case h.Parked() || !h.HasToken():
		return lease{}, false, false, nil
	case d > b.MaxWait() || !kept || asksBackOff(a.Res):
		if !h.Withdraw() {
			return lease{}, false, false, nil
		}
		return acct.owe(b, h, a), true, false, nil
	}
	t.reportRetry(s, acct, a, d)
	if err := t.wait(ctx, d); err != nil {
		return lease{}, false, true, err
	}
	if h.Parked() || !h.Withdraw() {
		return lease{}, false, true, nil
	}
	return acct.owe(b, h, a), true, true, nil
}

// retryAccount is what one request has spent of its destination's budget
// so far: its time parked, over all its retries, and the tokens its retries
// took after failures that did not ask the client to back off, which a
// success gives back (settle).
type retryAccount struct {
	waited   time.Duration
	owed     int
	reported int // the count of the attempt whose retry was reported
}

// owe records that the retry of a took a token of h, and returns the
// retry's lease, which carries the tokens the request owes. They go back
// to the bucket if the retry succeeds without queueing at the host
// (settle). A token is not owed back when a's response asked the client to
// back off (429, or Retry-After): a server that says so is short of room,
// and retrying it is not free whatever it answers next. A success of a
// (settled already: a policy may retry some of them) cleared the debt.
func (acct *retryAccount) owe(b *budget.Budget, h *budget.Host, a Attempt) lease {
	if success(a.Res) {
		acct.owed = 0
	}
	if !asksBackOff(a.Res) {
		acct.owed++
	}
	return b.TokenLease(h, acct.owed)
}

// asksBackOff reports whether res asked the client to back off: a 429, or
// a Retry-After. A server that says so is short of room: retrying it is not
// free whatever it answers next.
func asksBackOff(res *http.Response) bool {
	return res != nil && (res.StatusCode == http.StatusTooManyRequests || res.Header.Get("Retry-After") != "")
}

// proceed reports the retry of a after delay d (unless takeAtSend did),
// lets go of its response and waits wait (d, or nothing when it was waited
// already). It returns l, or StopCanceled, giving l's slot back, if the
// caller gave up meanwhile.
func (t *Transport) proceed(ctx context.Context, s *settings, acct *retryAccount, l lease, a Attempt, d, wait time.Duration) (lease, StopReason, error) {
	t.reportRetry(s, acct, a, d)
	discard(a.Res)
	if err := t.wait(ctx, wait); err != nil {
		l.End(outNeutral, 0, 0)
		return lease{}, StopCanceled, err
	}
	return l, 0, nil
}

// reportRetry reports the retry of a after delay d, once: a retry that
// takes its token when it is sent is reported before its wait, as it is
// decided, and not again when it goes.
func (t *Transport) reportRetry(s *settings, acct *retryAccount, a Attempt, d time.Duration) {
	if acct.reported == a.Count {
		return
	}
	acct.reported = a.Count
	t.obs.reportRetry(a, s.maxRetries, d, false)
}

// parkable reports whether a retry, after d, may be parked on h, and until
// when: parking is on, the host had a success within MaxWait, the bounds
// leave time to wait after d, and the response it retries, if any, was
// kept (kept: its body read into memory).
func (t *Transport) parkable(ctx context.Context, s *settings, h *budget.Host, d, waited time.Duration, kept bool) (time.Time, bool) {
	b := s.budget.core
	if !b.Parks(h) {
		return time.Time{}, false
	}
	now := t.clock().Now()
	until := now.Add(d + b.MaxWait() - waited)
	if deadline, ok := ctx.Deadline(); ok && deadline.Add(-s.attemptTimeout).Before(until) {
		until = deadline.Add(-s.attemptTimeout)
	}
	if !until.After(now.Add(d)) {
		return time.Time{}, false
	}
	return until, kept
}

// park queues the retry of a on h and waits until the window releases it
// (a nil reason and a held lease), until, the caller's cancellation, or an
// open circuit, whichever comes first. Only the first retry in the queue
// wakes up on its own, every budget.PollInterval, to look at the gate (the host's
// recent first attempts change with time alone); the others sleep until
// their bound, or until a change of state wakes them.
func (t *Transport) park(ctx context.Context, b *budget.Budget, h *budget.Host, a Attempt, w *budget.Waiter, until time.Time) (lease, StopReason) {
	if !t.breakers.park(a.Req, b, func() bool { return b.Enqueue(h, w) }) {
		return lease{}, StopBudgetRefused
	}
	c := t.clock()
	start := c.Now()
	t.obs.reportPark(ParkEvent{Kind: ParkParked, Attempt: a}, h)

	var timer clockTimer
	var fire <-chan time.Time
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		state, wake, l := b.Check(h, w)
		switch state {
		case budget.WaitReleased:
			t.obs.reportPark(ParkEvent{Kind: ParkReleased, Attempt: a, Waited: c.Now().Sub(start)}, h)
			return l, 0
		case budget.WaitFailed:
			t.obs.reportPark(ParkEvent{Kind: ParkDropped, Attempt: a, Waited: c.Now().Sub(start), Reason: StopCircuitOpen}, h)
			return lease{}, StopCircuitOpen
		}
		// The bound of the request, or the host's: no success for MaxWait.
		sleep := min(until.Sub(c.Now()), b.Alive(h, w))
		if sleep <= 0 {
			if _, released := b.Leave(h, w); released {
				continue // released as it gave up: take the slot
			}
			t.obs.reportPark(ParkEvent{Kind: ParkDropped, Attempt: a, Waited: c.Now().Sub(start), Reason: StopBudgetRefused}, h)
			return lease{}, StopBudgetRefused
		}
		if wake > 0 {
			sleep = min(sleep, wake)
		}
		if timer == nil {
			fire, timer = c.NewTimer(sleep)
		} else {
			timer.Reset(sleep)
		}
		select {
		case <-w.Rung():
		case <-fire:
			b.Poke(h)
		case <-ctx.Done():
			if l, ok := b.Leave(h, w); ok {
				l.End(outNeutral, 0, 0)
			}
			why := StopCanceled
			if deadline, ok := ctx.Deadline(); ok && ctx.Err() == context.DeadlineExceeded && !until.Before(deadline) {
				// Its bound was the deadline itself (no attempt
				// timeout): it reached it, as a bound, whichever of
				// the two timers fired first.
				why = StopBudgetRefused
			}
			t.obs.reportPark(ParkEvent{Kind: ParkDropped, Attempt: a, Waited: c.Now().Sub(start), Reason: why}, h)
			return lease{}, why
		}
	}
}

// park calls enqueue, which parks a retry of req in budget in, under the
// circuit of req's destination (breaker.Set.Park), so that the retry fails
// at once when the circuit opens. Without breakers, it only calls enqueue.
func (b *breakers) park(req *http.Request, in *budget.Budget, enqueue func() bool) bool {
	if b == nil {
		return enqueue()
	}
	return b.set.Park(req, in, enqueue)
}

// owner returns the circuits whose opening fails a parked retry of this
// Transport: nil without breakers.
func (b *breakers) owner() *breaker.Set {
	if b == nil {
		return nil
	}
	return b.set
}

// A retry budget is where the retries of circuits park.
var _ breaker.Parking = (*budget.Budget)(nil)
