package retryhttptest

import (
	"context"
	"sync"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

// Clock is a fake retryhttp.Clock: Sleep returns at once, moving the
// clock's time forward by the wait and recording it. Pass it to
// retryhttp.WithClock. A Clock is safe for concurrent use; its zero value
// starts at the zero time.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

var _ retryhttp.Clock = (*Clock)(nil)

// NewClock returns a Clock whose time starts at start. Start it at
// time.Now() when the requests carry a deadline: the transport compares the
// clock's time with the context's deadline, which is in real time, so that
// the waits the clock skips still count against the deadline.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Sleep records d and moves the clock forward by d (nothing for zero or
// negative), without waiting. If ctx is already done it returns ctx.Err()
// and records nothing, as a real wait would end at once.
func (c *Clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	if d > 0 {
		c.now = c.now.Add(d)
	}
	return nil
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Sleeps returns a copy of the waits asked of the clock, in order.
func (c *Clock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// Slept returns the sum of the positive waits asked of the clock.
func (c *Clock) Slept() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var sum time.Duration
	for _, d := range c.sleeps {
		sum += max(d, 0)
	}
	return sum
}
