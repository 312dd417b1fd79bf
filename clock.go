package retryhttp

import "time"

// Clock is where a Transport reads the time and arms its timers
// (WithClock). The retryhttptest package has a fake one whose time moves
// when a test says, or jumps to the end of every wait, so that tests of
// retries, hedging, attempt timeouts, parking and circuit breakers take
// milliseconds. Its methods must be safe for concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time

	// NewTimer returns a timer that sends the time on the returned
	// channel once d has passed (at once for d <= 0), as time.NewTimer
	// does. The transport waits on such a timer before a retry, for the
	// hedge delay while attempts are in flight, and while a retry is
	// parked.
	NewTimer(d time.Duration) (<-chan time.Time, Timer)

	// AfterFunc returns a timer that calls f in its own goroutine once d
	// has passed, as time.AfterFunc does. The transport arms one for each
	// attempt's timeout (WithAttemptTimeout) and for the first hedge.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a timer of a Clock, with the Stop and Reset of *time.Timer:
// Stop reports whether it stopped the timer before it fired, Reset arms it
// again to fire after d and reports whether it was armed.
type Timer interface {
	Stop() bool
	Reset(d time.Duration) bool
}

// clockTimer is the name park.go knows Timer by.
type clockTimer = Timer

// WithClock makes the transport read the time and arm its timers on c: the
// wait before each retry, the check that it would end before the
// context's deadline, the per-attempt timeout, the hedge delay, the bounds
// and polls of a parked retry, the latency of attempts reported to the
// retry budget, and the time of the circuit breaker (its open timeout and
// its window), whatever the order of the options. The default, used also
// for nil, is the real clock (time.Now and the time package's timers).
//
// The retry budget's own accounting (its hosts' recent outcomes, the pace
// of parked retries, a host's MaxWait without a success) runs on the
// budget's clock, RetryBudgetOptions.Clock, since a RetryBudget may be
// shared by Transports on different clocks: a test on a fake clock gives
// both the same one. (A retry waiting in a host's pause lane, whose
// transport's clock is not the budget's, is released as the host answers,
// without the lane's pace in time: it cannot wait for a time on another
// clock.) Two stay on the real clock, by design: the
// Retry-After dates read by DefaultDelayFn, a function of the Attempt
// alone; and the bound on reading a response body that is discarded, or
// kept in memory for a parked retry, which bounds real I/O on a real
// connection. A caller's
// context deadline is compared with c's time before each wait, but the
// context's own timer runs on the real clock.
func WithClock(c Clock) Option {
	return func(t *Transport) {
		t.clk = c
		t.breakers.setClock(c)
	}
}

// realClock is the clock of the time package.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) (<-chan time.Time, Timer) {
	t := time.NewTimer(d)
	return t.C, t
}

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// clock returns t's clock: the real one unless WithClock set another.
func (t *Transport) clock() Clock {
	if t.clk != nil {
		return t.clk
	}
	return realClock{}
}
