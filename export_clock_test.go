package retryhttp

import (
	"sort"
	"sync"
	"time"
)

// FakeTime is a clock for tests (clock.go): its time moves only when told
// to (Advance), firing the timers it passes in order; or, made with
// NewAutoFakeTime, it also jumps to the end of every wait a request starts
// on it (a timer of NewTimer: the wait between attempts, the hedge delay,
// a parked retry's poll or bound), so that a test of parking's bounds
// takes microseconds instead of MaxWait. Timers of AfterFunc (the
// per-attempt timeout) fire only when the time passes them, and run before
// the call that moved the time returns. Safe for concurrent use.
type FakeTime struct {
	mu     sync.Mutex
	now    time.Time
	auto   bool
	timers []*fakeTimer // armed, in no order
}

// NewFakeTime returns a FakeTime at start, that moves only with Advance.
func NewFakeTime(start time.Time) *FakeTime { return &FakeTime{now: start} }

// NewAutoFakeTime returns a FakeTime at start that also jumps to the end of
// every wait started on it.
func NewAutoFakeTime(start time.Time) *FakeTime { return &FakeTime{now: start, auto: true} }

// WithFakeTime makes t read the time and arm its timers on c.
func WithFakeTime(c *FakeTime) Option { return func(t *Transport) { t.clk = c } }

// NewRetryBudgetOn returns a budget that reads the time from c.
func NewRetryBudgetOn(opts RetryBudgetOptions, c *FakeTime) *RetryBudget {
	return newRetryBudget(opts, c.Now)
}

// Now returns c's time.
func (c *FakeTime) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves c's time forward by d, firing the timers due on the way.
func (c *FakeTime) Advance(d time.Duration) {
	c.mu.Lock()
	c.advanceTo(c.now.Add(d))
}

// Timers returns the number of timers armed: a test waits for a request
// to wait before it advances the time.
func (c *FakeTime) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// advanceTo moves the time to at (if later), firing the timers due in the
// order of their times. It requires c.mu held, and releases it.
func (c *FakeTime) advanceTo(at time.Time) {
	type firing struct {
		t  *fakeTimer
		at time.Time
	}
	var due []firing
	kept := c.timers[:0]
	for _, t := range c.timers {
		if !t.at.After(at) {
			due = append(due, firing{t, t.at})
		} else {
			kept = append(kept, t)
		}
	}
	clear(c.timers[len(kept):])
	c.timers = kept
	sort.SliceStable(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	if at.After(c.now) {
		c.now = at
	}
	c.mu.Unlock()
	for _, d := range due {
		d.t.fire(d.at)
	}
}

// NewTimer arms a timer whose channel receives the time after d.
func (c *FakeTime) NewTimer(d time.Duration) (<-chan time.Time, clockTimer) {
	t := &fakeTimer{c: c, ch: make(chan time.Time, 1)}
	t.Reset(d)
	return t.ch, t
}

// AfterFunc arms a timer that calls f after d: on the goroutine that moves
// the time past it, before Advance returns, so that a test sees its effect
// (an attempt's context cancelled by its timeout) at once. f must not
// block.
func (c *FakeTime) AfterFunc(d time.Duration, f func()) clockTimer {
	t := &fakeTimer{c: c, f: f}
	t.Reset(d)
	return t
}

// fakeTimer is a timer of a FakeTime.
type fakeTimer struct {
	c  *FakeTime
	at time.Time
	ch chan time.Time // NewTimer's
	f  func()         // AfterFunc's
}

// fire runs t, armed for at: calls its function, or sends at on its
// channel, replacing a tick not received, as a real timer's does.
func (t *fakeTimer) fire(at time.Time) {
	if t.f != nil {
		t.f()
		return
	}
	select {
	case <-t.ch:
	default:
	}
	select {
	case t.ch <- at:
	default: // another firing won the slot
	}
}

// Stop disarms t and reports whether it was armed.
func (t *fakeTimer) Stop() bool {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return t.remove()
}

// remove takes t out of its clock's timers. Requires c.mu held.
func (t *fakeTimer) remove() bool {
	c := t.c
	for i, x := range c.timers {
		if x == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			return true
		}
	}
	return false
}

// Reset arms t again to fire after d, and reports whether it was armed.
// With an automatic clock, a NewTimer's timer fires at once, the time
// jumping to its end.
func (t *fakeTimer) Reset(d time.Duration) bool {
	c := t.c
	c.mu.Lock()
	armed := t.remove()
	if t.f == nil { // a real timer's Reset drops a tick not received
		select {
		case <-t.ch:
		default:
		}
	}
	t.at = c.now.Add(d)
	c.timers = append(c.timers, t)
	if c.auto && t.f == nil {
		c.advanceTo(t.at)
		return armed
	}
	if d <= 0 {
		c.advanceTo(c.now)
		return armed
	}
	c.mu.Unlock()
	return armed
}
