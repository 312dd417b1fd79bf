package retryhttp

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A hedged request times its attempts as the retry loop does (transport.go,
// sendSettled): on real clocks from the budget's monotonic reading, whose
// end settle records; on a test's clock from the Transport's. These tests
// check what the budget then records of a hedged first attempt.

// hedgedGET sends a GET through tr, whose hedge never fires, and checks
// that it was answered 200.
func hedgedGET(t *testing.T, tr *Transport, url string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	require.NoError(t, err)
	res, err := tr.RoundTrip(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, res.Body)
	require.NoError(t, res.Body.Close())
	assert.Equal(t, http.StatusOK, res.StatusCode)
}

func TestHedgedAttemptTimedOnRealClocks(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(srv.Close)
	b := budgetWithOneToken(srv.URL, RetryBudgetOptions{MaxWait: 300 * time.Millisecond})
	tr := New(WithTransport(srv.Client().Transport), WithRetryBudget(b), WithHedging(time.Minute, 1))
	time.Sleep(400 * time.Millisecond) // more than MaxWait: without a success since, the host is dead

	hedgedGET(t, tr, srv.URL)
	assert.InDelta(t, 1.1, HostOf(b, mustRequest(srv.URL)).Tokens, 1e-9, "the hedged attempt's success is settled")
	outage(b, srv.URL)
	assert.True(t, parks(b, srv.URL),
		"its end is recorded on the budget's clock as the latest success: not dead")
}

// TestHedgedAttemptTimedOnTheTransportClock: the hedged first attempt's
// latency is read on the Transport's clock, and it counts as one first
// attempt: a window unused for MaxWait starts again at its cap, twice the
// host's rate of first attempts (one in the last 750-800ms, the span of its
// statistics: internal/budget/pacer.go, statSlots) times their lowest
// latency, and at least 20.
func TestHedgedAttemptTimedOnTheTransportClock(t *testing.T) {
	clock := newStepClock(time.Unix(1_000_000, 0))
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		clock.Advance(time.Minute) // the attempt's time, on the test's clock
	}))
	t.Cleanup(srv.Close)
	b := NewRetryBudget(RetryBudgetOptions{Clock: clock, MaxWait: time.Millisecond})
	tr := New(WithTransport(srv.Client().Transport), WithRetryBudget(b), WithHedging(time.Minute, 1),
		WithClock(clock))
	hedgedGET(t, tr, srv.URL)

	clock.Advance(2 * time.Millisecond) // more than MaxWait
	// A step of the host's pacing: a hedge that finds no token asks for a
	// slot.
	for WithdrawFor(b, mustRequest(srv.URL)) {
	}
	l, _ := b.takeNow(mustRequest(srv.URL))
	l.End(outNeutral, 0, 0)
	window := float64(HostOf(b, mustRequest(srv.URL)).Window)
	// 2 × (1 / 750-800ms) × 60s
	assert.GreaterOrEqual(t, window, 150.0, "one first attempt of a minute, on the Transport's clock")
	assert.LessOrEqual(t, window, 160.0)
}
