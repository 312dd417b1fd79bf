package retryhttp

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSuccessInlineSameAnswer checks success, decided inline below 400,
// against its definition (failure.go) over every status class.
func TestSuccessInlineSameAnswer(t *testing.T) {
	assert.False(t, success(nil))
	for _, code := range []int{-1, 0, 100, 101, 200, 204, 301, 304, 399, 400, 404, 429, 499, 500, 503, 599, 600} {
		for _, retryAfter := range []string{"", "1"} {
			res := &http.Response{StatusCode: code, Header: http.Header{}}
			if retryAfter != "" {
				res.Header.Set("Retry-After", retryAfter)
			}
			want := !failedStatus(code) && (answered(code) || retryAfter == "")
			assert.Equal(t, want, success(res), "%d, Retry-After %q", code, retryAfter)
		}
	}
}

// TestSendSettledTimesOnSharedClocks checks that with both clocks real an
// attempt's end is read once, on the budget's clock, and shared with
// settle; that a budget or a transport on a test's clock is never handed a
// reading of the other clock: settle then reads the budget's own clock;
// and that without a budget nothing is timed, unless adaptive hedging
// wants the latency.
func TestSendSettledTimesOnSharedClocks(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(srv.Close)
	onTestClock := NewRetryBudget(RetryBudgetOptions{Clock: newStepClock(time.Unix(1000, 0))})
	real := NewRetryBudget(RetryBudgetOptions{})
	tr := New(WithTransport(srv.Client().Transport))
	var quantile float64 // adaptive hedging's, if on
	send := func(b *RetryBudget) attemptOutcome {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		s := *tr.base()
		s.budget, s.attemptTimeout, s.hedgeQuantile = b, time.Minute, quantile
		o := attemptOutcome{First: true}
		res, err := tr.sendSettled(req, &s, &o, nil)
		require.NoError(t, err)
		require.NoError(t, res.Body.Close())
		assert.Equal(t, http.StatusOK, res.StatusCode)
		return o
	}

	o := send(onTestClock)
	assert.False(t, o.AtKnown, "a budget on a test clock reads it itself")
	assert.Positive(t, o.Latency)
	assert.Equal(t, time.Minute, o.Timeout)

	before, _ := real.inner().Now()
	o = send(real)
	assert.True(t, o.AtKnown, "both real: the end is shared")
	assert.Positive(t, o.Latency)
	assert.GreaterOrEqual(t, o.At, before+int64(o.Latency))
	now, _ := real.inner().Now()
	assert.LessOrEqual(t, o.At, now)

	WithClock(realClock{})(tr) // a clock set with WithClock, even the real one, is not shared
	o = send(real)
	assert.False(t, o.AtKnown)
	assert.Positive(t, o.Latency)

	o = send(nil)
	assert.False(t, o.AtKnown)
	assert.Zero(t, o.Latency, "no budget: nothing timed")
	assert.Zero(t, o.Timeout)

	quantile = 0.9
	o = send(nil)
	assert.False(t, o.AtKnown)
	assert.Positive(t, o.Latency, "no budget, but adaptive hedging learns from the latency")
}
