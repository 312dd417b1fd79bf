package retryhttp

import (
	"context"
	"time"
)

// Clock is where a Transport reads the time and how it waits between
// attempts (WithClock). The retryhttptest package has a fake one whose
// waits return at once, so that tests of a retry configuration take
// milliseconds.
type Clock interface {
	// Now returns the current time. The transport compares it with the
	// context's deadline before each wait.
	Now() time.Time

	// Sleep waits for d (at once if d is zero or negative), or until ctx is
	// done, whichever comes first, and returns ctx.Err() in the second case,
	// nil in the first.
	Sleep(ctx context.Context, d time.Duration) error
}

// WithClock makes the transport read the time from c and wait between
// attempts with c.Sleep. It governs exactly three things: the wait before
// each retry, the check that it would end before the context's deadline,
// and the time of the circuit breaker (WithCircuitBreaker: its open
// timeout and its window). It does not govern the per-attempt timeout, the
// hedge delay, the retry budget, or the Retry-After dates read by
// DefaultDelayFn, which use the real clock. The default, used also for nil,
// is the real clock (time.Now and a timer).
func WithClock(c Clock) Option {
	return func(t *Transport) {
		if c == nil {
			t.now, t.sleep = nil, nil
			return
		}
		t.now, t.sleep = c.Now, c.Sleep
	}
}

// The transport's time. Every read of the time and every timer of a request
// goes through the Transport's clock: the real one (realClock), or one a
// test sets (t.clk, export_test.go), that tests advance by hand: the waits
// between attempts, the per-attempt timeout, the hedge delay, the latency
// of attempts, and parking's bounds and polls. The retry budget reads the
// time through a seam of its own (newRetryBudget), for a test to give it
// the same clock. A Clock given with WithClock takes over what WithClock
// says, the waits and the deadline check before them, and the circuit
// breaker's time, and nothing else.
//
// Three stay on the real clock, by design: callerGone (stop.go) compares
// the context's deadline with the time an instant before the context's own
// timer, which runs on the real clock, fires; the bound on draining a
// discarded body without an attempt timeout (body.go discard) bounds real
// I/O on a real connection; and DefaultDelayFn, a function of the Attempt
// alone, reads Retry-After dates against the real clock (delay.go). The
// circuit breaker (breaker.go) reads WithClock's Clock if one was given,
// else the Transport's clock, as pastDeadline does.

// clock is a source of time and timers.
type clock interface {
	Now() time.Time
	// NewTimer returns a timer that sends the time on the channel once d
	// has passed.
	NewTimer(d time.Duration) (<-chan time.Time, clockTimer)
	// AfterFunc returns a timer that calls f in its own goroutine once d
	// has passed.
	AfterFunc(d time.Duration, f func()) clockTimer
}

// clockTimer is a timer of a clock: *time.Timer's Stop and Reset.
type clockTimer interface {
	Stop() bool
	Reset(d time.Duration) bool
}

// realClock is the clock of the time package.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) (<-chan time.Time, clockTimer) {
	t := time.NewTimer(d)
	return t.C, t
}

func (realClock) AfterFunc(d time.Duration, f func()) clockTimer { return time.AfterFunc(d, f) }

// clockNow is t.clock().Now(), without the interface call on the real
// clock.
func (t *Transport) clockNow() time.Time {
	if t.clk != nil {
		return t.clk.Now()
	}
	return time.Now()
}

// attemptTimer times one attempt for the budget (settle). When both the
// transport and the budget run on the real clock, it reads the budget's
// clock, monotonic only, at the start and at the end, and the end is also
// the time settle records; otherwise it reads the transport's clock, and
// settle reads the budget's. Without a budget there is nothing to time.
type attemptTimer struct {
	start time.Time // the transport's clock, unless mono
	at    int64     // the budget's clock, if mono
	mono  bool
}

// startAttempt starts timing an attempt that settles with b.
func (t *Transport) startAttempt(b *RetryBudget) attemptTimer {
	switch {
	case b == nil:
		return attemptTimer{}
	case t.clk == nil && b.real:
		return attemptTimer{at: b.since(), mono: true}
	}
	return attemptTimer{start: t.clockNow()}
}

// outcome returns the attemptOutcome of the attempt timed by w, which
// settles with b, with its latency and, when known, its end.
func (w attemptTimer) outcome(t *Transport, b *RetryBudget, o attemptOutcome) attemptOutcome {
	w.end(t, b, &o)
	return o
}

// end is outcome, completing o in place.
func (w *attemptTimer) end(t *Transport, b *RetryBudget, o *attemptOutcome) {
	switch {
	case b == nil:
	case w.mono:
		o.at, o.atKnown = b.since(), true
		o.latency = time.Duration(o.at - w.at)
	default:
		o.latency = t.clockNow().Sub(w.start)
	}
}

// clock returns t's clock: the real one unless a test set another.
func (t *Transport) clock() clock {
	if t.clk != nil {
		return t.clk
	}
	return realClock{}
}
