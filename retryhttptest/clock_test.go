package retryhttptest_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestClockJumpsToTheEndOfWaits: a NewClock's waits end at once, the time
// at their end, and are recorded; a negative one moves nothing.
func TestClockJumpsToTheEndOfWaits(t *testing.T) {
	c := retryhttptest.NewClock(start)
	fire, _ := c.NewTimer(time.Second)
	assert.Equal(t, start.Add(time.Second), <-fire)
	fire, _ = c.NewTimer(-time.Second)
	assert.Equal(t, start.Add(time.Second), <-fire)
	c.Advance(time.Minute)
	assert.Equal(t, start.Add(time.Minute+time.Second), c.Now())
	assert.Equal(t, []time.Duration{time.Second, -time.Second}, c.Sleeps())
	assert.Equal(t, time.Second, c.Slept())
	assert.Zero(t, c.Timers())
}

// TestManualClockFiresInOrder: a NewManualClock's timers fire when Advance
// passes them, in the order of their times, AfterFunc's before Advance
// returns; a stopped timer never fires, and Stop drops a tick not received.
func TestManualClockFiresInOrder(t *testing.T) {
	c := retryhttptest.NewManualClock(start)
	var order []int
	c.AfterFunc(3*time.Second, func() { order = append(order, 3) })
	c.AfterFunc(time.Second, func() { order = append(order, 1) })
	stopped := c.AfterFunc(2*time.Second, func() { order = append(order, 2) })
	fire, timer := c.NewTimer(2 * time.Second)
	require.Equal(t, 4, c.Timers())
	assert.True(t, stopped.Stop(), "armed")
	assert.False(t, stopped.Stop(), "stopped already")

	c.Advance(1500 * time.Millisecond)
	assert.Equal(t, []int{1}, order)
	select {
	case <-fire:
		t.Fatal("fired early")
	default:
	}
	c.Advance(2 * time.Second)
	assert.Equal(t, []int{1, 3}, order)
	assert.Equal(t, start.Add(2*time.Second), <-fire, "the tick carries the timer's time")
	assert.Equal(t, start.Add(3500*time.Millisecond), c.Now())

	assert.False(t, timer.Reset(time.Second), "fired: not armed")
	c.Advance(time.Second)
	assert.False(t, timer.Reset(time.Second), "fired, tick not received: armed again, tick dropped")
	select {
	case <-fire:
		t.Fatal("Reset left a tick")
	default:
	}
	c.Advance(time.Second)
	assert.False(t, timer.Stop(), "fired")
	select {
	case <-fire:
		t.Fatal("Stop left a tick")
	default:
	}
	assert.Zero(t, c.Timers())
}

// TestClockZeroWaitFiresAtOnce: on a manual clock too, a timer of zero
// fires at once, without the time moving.
func TestClockZeroWaitFiresAtOnce(t *testing.T) {
	c := retryhttptest.NewManualClock(start)
	var ran atomic.Bool
	c.AfterFunc(0, func() { ran.Store(true) })
	assert.True(t, ran.Load())
	fire, _ := c.NewTimer(0)
	assert.Equal(t, start, <-fire)
	assert.Equal(t, start, c.Now())
}
