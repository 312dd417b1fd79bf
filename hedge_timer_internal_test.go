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
	b := NewRetryBudget(RetryBudgetOptions{})
	tr := New(WithTransport(srv.Client().Transport), WithRetryBudget(b), WithHedging(time.Minute, 1))
	hedgedGET(t, tr, srv.URL) // the host's state, made

	before := b.core.Now()
	hedgedGET(t, tr, srv.URL)
	h, ok := b.core.Inspect(httptest.NewRequest(http.MethodGet, srv.URL, nil))
	after := b.core.Now()
	require.True(t, ok)
	// The latest success is kept if less than a millisecond old.
	assert.GreaterOrEqual(t, h.LastOK, before-int64(time.Millisecond))
	assert.LessOrEqual(t, h.LastOK, after)
	assert.GreaterOrEqual(t, h.OK, int64(1), "the hedged first attempt counts as a first attempt")
	assert.Zero(t, h.Failed)
	assert.Positive(t, h.MinLatency, "its latency is measured")
	assert.LessOrEqual(t, h.MinLatency, time.Duration(after-before))
}

func TestHedgedAttemptTimedOnTheTransportClock(t *testing.T) {
	clock := newStepClock(time.Unix(1_000_000, 0))
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		clock.Advance(250 * time.Millisecond) // the attempt's time, on the test's clock
	}))
	t.Cleanup(srv.Close)
	b := NewRetryBudget(RetryBudgetOptions{Clock: clock})
	tr := New(WithTransport(srv.Client().Transport), WithRetryBudget(b), WithHedging(time.Minute, 1),
		WithClock(clock))
	hedgedGET(t, tr, srv.URL)

	h, ok := b.core.Inspect(httptest.NewRequest(http.MethodGet, srv.URL, nil))
	require.True(t, ok)
	assert.Equal(t, int64(1), h.OK)
	assert.Equal(t, 250*time.Millisecond, h.MinLatency, "the latency is read on the Transport's clock")
	now := b.core.Now() // the end is read on the budget's clock, at the attempt's end
	assert.LessOrEqual(t, h.LastOK, now)
	assert.Greater(t, h.LastOK, now-int64(time.Millisecond))
}
