package retryhttptest

import (
	"sort"
	"sync"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

// Clock is a fake retryhttp.Clock. Pass it to retryhttp.WithClock.
//
// Its time moves only when told: Advance moves it, firing the timers it
// passes in the order of their times. A Clock made with NewClock also jumps
// to the end of every wait the transport starts on it (a timer of
// NewTimer: the wait before a retry, the hedge delay, a parked retry's
// poll or bound), so that a request's waits take no real time; one made
// with NewManualClock moves only with Advance, for a test that checks what
// happens before a timer fires. Timers of AfterFunc (the per-attempt
// timeout, the first hedge) fire when the time passes them, and run before
// the call that moved the time returns; on a NewClock, the time also keeps
// up with real time for them: one that has waited d in real time moves the
// time to its end, so that an attempt timeout ends a hanging attempt
// without the test calling Advance.
//
// A Clock is safe for concurrent use. Its zero value is a manual clock at
// the zero time.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	auto   bool
	timers []*timer // armed, in no order
	sleeps []time.Duration
}

var _ retryhttp.Clock = (*Clock)(nil)

// NewClock returns a Clock whose time starts at start and jumps to the end
// of every wait started on it. Start it at time.Now() when the requests
// carry a deadline: the transport compares the clock's time with the
// context's deadline, which is in real time, so that the waits the clock
// skips still count against the deadline.
func NewClock(start time.Time) *Clock { return &Clock{now: start, auto: true} }

// NewManualClock returns a Clock whose time starts at start and moves only
// with Advance.
func NewManualClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d, firing the timers due on the way.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.advanceTo(c.now.Add(d))
}

// Timers returns the number of timers armed: a test waits for a request to
// wait before it advances the time.
func (c *Clock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// Sleeps returns a copy of the waits started on the clock, in order: the
// durations of its NewTimer timers, when armed or reset. They are the
// waits before retries, and, where they apply, the hedge delays after the
// first and the polls of parked retries.
func (c *Clock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// Slept returns the sum of the positive waits started on the clock.
func (c *Clock) Slept() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var sum time.Duration
	for _, d := range c.sleeps {
		sum += max(d, 0)
	}
	return sum
}

// NewTimer arms a timer whose channel receives the time after d.
func (c *Clock) NewTimer(d time.Duration) (<-chan time.Time, retryhttp.Timer) {
	t := &timer{c: c, ch: make(chan time.Time, 1)}
	t.Reset(d)
	return t.ch, t
}

// AfterFunc arms a timer that calls f after d: on the goroutine that moves
// the time past it, before that call returns, so that a test sees its
// effect (an attempt's context cancelled by its timeout) at once. f must
// not block.
func (c *Clock) AfterFunc(d time.Duration, f func()) retryhttp.Timer {
	t := &timer{c: c, f: f}
	t.Reset(d)
	return t
}

// advanceTo moves the time to at (if later), firing the timers due in the
// order of their times. It requires c.mu held, and releases it.
func (c *Clock) advanceTo(at time.Time) {
	var due []*timer
	kept := c.timers[:0]
	for _, t := range c.timers {
		if !t.at.After(at) {
			due = append(due, t)
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
	fired := make([]time.Time, len(due))
	for i, t := range due {
		fired[i] = t.at
	}
	c.mu.Unlock()
	for i, t := range due {
		t.fire(fired[i])
	}
}

// timer is a timer of a Clock.
type timer struct {
	c    *Clock
	at   time.Time      // when it fires, while armed (c.mu)
	ch   chan time.Time // NewTimer's
	f    func()         // AfterFunc's
	real *time.Timer    // AfterFunc's on a NewClock: moves the time to at after d of real time
}

// fire runs t, armed for at: calls its function, or sends at on its
// channel, replacing a tick not received, as a real timer's does.
func (t *timer) fire(at time.Time) {
	if t.f != nil {
		t.f()
		return
	}
	t.drain()
	select {
	case t.ch <- at:
	default: // another firing won the slot
	}
}

// drain drops a tick not received, as a real timer's Stop and Reset do.
func (t *timer) drain() {
	if t.ch == nil {
		return
	}
	select {
	case <-t.ch:
	default:
	}
}

// Stop disarms t and reports whether it was armed.
func (t *timer) Stop() bool {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	t.drain()
	t.stopReal()
	return t.remove()
}

// stopReal stops t's real timer, if any. It requires c.mu held.
func (t *timer) stopReal() {
	if t.real != nil {
		t.real.Stop()
		t.real = nil
	}
}

// keepUp moves the time to the end of t, armed for at, if it still is.
func (t *timer) keepUp(at time.Time) {
	c := t.c
	c.mu.Lock()
	if t.at.Equal(at) && t.armed() {
		c.advanceTo(at)
		return
	}
	c.mu.Unlock()
}

// armed reports whether t is among its clock's timers. It requires c.mu
// held.
func (t *timer) armed() bool {
	for _, x := range t.c.timers {
		if x == t {
			return true
		}
	}
	return false
}

// remove takes t out of its clock's timers. It requires c.mu held.
func (t *timer) remove() bool {
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
// On a clock made with NewClock, a NewTimer's timer fires at once, the time
// jumping to its end.
func (t *timer) Reset(d time.Duration) bool {
	c := t.c
	c.mu.Lock()
	armed := t.remove()
	t.drain()
	t.stopReal()
	at := c.now.Add(max(d, 0))
	t.at = at
	c.timers = append(c.timers, t)
	if t.f == nil {
		c.sleeps = append(c.sleeps, d)
	} else if c.auto && d > 0 {
		t.real = time.AfterFunc(d, func() { t.keepUp(at) })
	}
	switch {
	case c.auto && t.f == nil:
		c.advanceTo(t.at)
	case d <= 0:
		c.advanceTo(c.now)
	default:
		c.mu.Unlock()
	}
	return armed
}
