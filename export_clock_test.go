package retryhttp

import (
	"sync"
	"time"
)

// stepClock is a Clock for the package's internal tests, which cannot use
// retryhttptest's: its time moves only with Advance, and its timers never
// fire; but, if jump, a wait (NewTimer) ends at once, moving the time to
// its end.
type stepClock struct {
	mu   sync.Mutex
	now  time.Time
	jump bool
}

func newStepClock(start time.Time) *stepClock { return &stepClock{now: start} }

// withNoWaits puts t on a clock whose waits end at once.
func withNoWaits(t *Transport) { WithClock(&stepClock{now: time.Now(), jump: true})(t) }

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves c's time forward by d.
func (c *stepClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *stepClock) NewTimer(d time.Duration) (<-chan time.Time, Timer) {
	if !c.jump {
		return nil, idleTimer{}
	}
	c.Advance(d)
	fired := make(chan time.Time, 1)
	fired <- c.Now()
	return fired, idleTimer{}
}

func (c *stepClock) AfterFunc(time.Duration, func()) Timer { return idleTimer{} }

// idleTimer is a timer that never fires: Stop always finds it armed.
type idleTimer struct{}

func (idleTimer) Stop() bool               { return true }
func (idleTimer) Reset(time.Duration) bool { return true }
