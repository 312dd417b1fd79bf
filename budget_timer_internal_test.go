package retryhttp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/hostmap"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAttemptTimerOnRealClocks checks the shared reading (attemptTimer):
// with both clocks real, an attempt's end is the time the budget records,
// within the readings taken around the request, and its latency is the
// first attempt's lowest latency, no longer than the request.
func TestAttemptTimerOnRealClocks(t *testing.T) {
	srv, _ := okServer(t)
	b := NewRetryBudget(RetryBudgetOptions{})
	tr := New(WithTransport(srv.Client().Transport), WithRetryBudget(b))
	getOK(t, tr, context.Background(), srv.URL) // the host's state, made

	before := b.clock()
	getOK(t, tr, context.Background(), srv.URL)
	after := b.clock()

	h, ok := b.hosts.Get(hostmap.KeyOf(httptest.NewRequest(http.MethodGet, srv.URL, nil)))
	require.True(t, ok)
	// record keeps a lastOK less than a millisecond old.
	lastOK := h.stats.lastOK.Load()
	assert.GreaterOrEqual(t, lastOK, before-int64(time.Millisecond))
	assert.LessOrEqual(t, lastOK, after)
	okN, _, _, minLat := h.stats.recent(after)
	assert.GreaterOrEqual(t, okN, int64(1), "the success is counted")
	assert.Positive(t, minLat, "the first attempts' latency is measured")
}

// TestAttemptTimerFallsBack checks that a budget or a transport on a test's
// clock is never handed a reading of the other clock: settle then reads
// the budget's own clock; and that without a budget nothing is timed.
func TestAttemptTimerFallsBack(t *testing.T) {
	fake := time.Unix(1000, 0)
	onTestClock := newRetryBudget(RetryBudgetOptions{}, func() time.Time { return fake })
	real := NewRetryBudget(RetryBudgetOptions{})
	tr := New()

	w := tr.startAttempt(onTestClock)
	o := attemptOutcome{first: true}
	w.end(tr, onTestClock, &o)
	assert.False(t, o.atKnown, "a budget on a test clock reads it itself")
	assert.GreaterOrEqual(t, o.latency, time.Duration(0))

	w = tr.startAttempt(real)
	o = attemptOutcome{first: true}
	w.end(tr, real, &o)
	assert.True(t, o.atKnown, "both real: the end is shared")
	assert.GreaterOrEqual(t, o.latency, time.Duration(0))
	assert.LessOrEqual(t, o.at, real.clock())

	WithClock(realClock{})(tr) // a clock set with WithClock, even the real one, is not shared
	w = tr.startAttempt(real)
	o = attemptOutcome{}
	w.end(tr, real, &o)
	assert.False(t, o.atKnown)

	w = tr.startAttempt(nil)
	o = attemptOutcome{}
	w.end(tr, nil, &o)
	assert.False(t, o.atKnown)
	assert.Zero(t, o.latency, "no budget: nothing timed")
}
