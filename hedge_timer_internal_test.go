package retryhttp

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/hostmap"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A hedged request times its attempts as the retry loop does (clock.go,
// attemptTimer): on real clocks from the budget's monotonic reading, whose
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

	before := b.clock()
	hedgedGET(t, tr, srv.URL)
	after := b.clock()

	h, ok := b.hosts.Get(hostmap.KeyOf(httptest.NewRequest(http.MethodGet, srv.URL, nil)))
	require.True(t, ok)
	lastOK := h.stats.lastOK.Load() // kept if less than a millisecond old
	assert.GreaterOrEqual(t, lastOK, before-int64(time.Millisecond))
	assert.LessOrEqual(t, lastOK, after)
	okN, failN, _, minLat := h.stats.recent(after)
	assert.GreaterOrEqual(t, okN, int64(1), "the hedged first attempt counts as a first attempt")
	assert.Zero(t, failN)
	assert.Positive(t, minLat, "its latency is measured")
	assert.LessOrEqual(t, minLat, time.Duration(after-before))
}

func TestHedgedAttemptTimedOnTheTransportClock(t *testing.T) {
	clock := newStepClock(time.Unix(1_000_000, 0))
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		clock.Advance(250 * time.Millisecond) // the attempt's time, on the test's clock
	}))
	t.Cleanup(srv.Close)
	b := NewRetryBudgetOn(RetryBudgetOptions{}, clock)
	tr := New(WithTransport(srv.Client().Transport), WithRetryBudget(b), WithHedging(time.Minute, 1),
		WithClock(clock))
	hedgedGET(t, tr, srv.URL)

	h, ok := b.hosts.Get(hostmap.KeyOf(httptest.NewRequest(http.MethodGet, srv.URL, nil)))
	require.True(t, ok)
	okN, _, _, minLat := h.stats.recent(b.clock())
	assert.Equal(t, int64(1), okN)
	assert.Equal(t, 250*time.Millisecond, minLat, "the latency is read on the Transport's clock")
	now := b.clock() // the end is read on the budget's clock, at the attempt's end
	assert.LessOrEqual(t, h.stats.lastOK.Load(), now)
	assert.Greater(t, h.stats.lastOK.Load(), now-int64(time.Millisecond))
}
