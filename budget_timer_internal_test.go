package retryhttp

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestAttemptTimerFallsBack checks that with both clocks real an attempt's
// end is read once, on the budget's clock, and shared with settle; that a
// budget or a transport on a test's clock is never handed a reading of the
// other clock: settle then reads the budget's own clock; and that without
// a budget nothing is timed.
func TestAttemptTimerFallsBack(t *testing.T) {
	onTestClock := NewRetryBudget(RetryBudgetOptions{Clock: newStepClock(time.Unix(1000, 0))})
	real := NewRetryBudget(RetryBudgetOptions{})
	tr := New()

	w := tr.startAttempt(onTestClock)
	o := attemptOutcome{First: true}
	w.end(tr, onTestClock, &o)
	assert.False(t, o.AtKnown, "a budget on a test clock reads it itself")
	assert.GreaterOrEqual(t, o.Latency, time.Duration(0))

	before := real.core.Now()
	w = tr.startAttempt(real)
	o = attemptOutcome{First: true}
	w.end(tr, real, &o)
	assert.True(t, o.AtKnown, "both real: the end is shared")
	assert.GreaterOrEqual(t, o.Latency, time.Duration(0))
	assert.GreaterOrEqual(t, o.At, before)
	assert.LessOrEqual(t, o.At, real.core.Now())

	WithClock(realClock{})(tr) // a clock set with WithClock, even the real one, is not shared
	w = tr.startAttempt(real)
	o = attemptOutcome{}
	w.end(tr, real, &o)
	assert.False(t, o.AtKnown)

	w = tr.startAttempt(nil)
	o = attemptOutcome{}
	w.end(tr, nil, &o)
	assert.False(t, o.AtKnown)
	assert.Zero(t, o.Latency, "no budget: nothing timed")
}
