package retryhttp

import (
	"context"
	"net/http"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/breaker"
	"github.com/seed2409de8f/retryhttp/internal/budget"
)

// Parking waits on the Transport's clock (clock.go), and reads the host's
// state on the budget's (RetryBudgetOptions.Clock): both are the real
// clock unless a test sets them.

// park parks w, the retry of a, and waits until its budget releases it (a
// nil reason and its lease), until, the caller's cancellation, or an open
// circuit, whichever comes first. The waiter says how long it may sleep
// (budget.Waiter.Check): the first in its queue wakes up on its own, to
// look at the gate or the lane's pace, the others when they are rung.
func (t *Transport) park(ctx context.Context, s *settings, a Attempt, w *budget.Waiter, until time.Time) (lease, StopReason) {
	if !t.breakers.park(a.Req, s.budget.inner(), w.Enqueue) {
		return lease{}, StopBudgetRefused
	}
	c := t.clock()
	start := c.Now()
	var timer clockTimer
	var fire <-chan time.Time
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	drop := func(st budget.Stand, why StopReason) (lease, StopReason) {
		t.obs.reportPark(ParkEvent{Kind: ParkDropped, Attempt: a, Waited: c.Now().Sub(start), Reason: why}, st)
		return lease{}, why
	}
	for first := true; ; first = false {
		st := w.Check()
		if first {
			t.obs.reportPark(ParkEvent{Kind: ParkParked, Attempt: a}, st)
		}
		switch st.State {
		case budget.WaitReleased:
			t.obs.reportPark(ParkEvent{Kind: ParkReleased, Attempt: a, Waited: c.Now().Sub(start)}, st)
			return st.Lease, 0
		case budget.WaitFailed:
			return drop(st, StopCircuitOpen)
		}
		sleep := min(until.Sub(c.Now()), st.Sleep) // the request's bound, or the host's
		if sleep <= 0 {
			if st = w.Leave(); st.State == budget.WaitReleased {
				continue // released as it gave up: take the slot
			}
			return drop(st, StopBudgetRefused)
		}
		if timer == nil {
			fire, timer = c.NewTimer(sleep)
		} else {
			timer.Reset(sleep)
		}
		select {
		case <-w.Rung():
		case <-fire:
		case <-ctx.Done():
			st := w.Leave()
			if st.State == budget.WaitReleased {
				st.Lease.End(outNeutral, 0, 0)
			}
			why := StopCanceled
			if deadline, ok := ctx.Deadline(); ok && ctx.Err() == context.DeadlineExceeded && !until.Before(deadline) {
				// Its bound was the deadline itself (no attempt
				// timeout): it reached it, as a bound, whichever of
				// the two timers fired first.
				why = StopBudgetRefused
			}
			return drop(st, why)
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
