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
