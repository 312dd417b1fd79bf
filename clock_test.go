package retryhttp_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/seed2409de8f/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWithClock checks that the transport waits through the clock it is
// given, and through the real clock again after WithClock(nil).
func TestWithClock(t *testing.T) {
	oneMs := retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return time.Millisecond })
	tests := []struct {
		name      string
		nilAfter  bool
		wantFaked int
	}{
		{"fake clock", false, 2},
		{"nil restores the real clock", true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testkit.NewCountingServer(t, testkit.StatusThen(http.StatusServiceUnavailable, 2))
			clock := retryhttptest.NewClock(time.Unix(0, 0))
			opts := []retryhttp.Option{oneMs, testkit.UnlimitedBudget, retryhttp.WithClock(clock)}
			if tt.nilAfter {
				opts = append(opts, retryhttp.WithClock(nil))
			}
			res, err := (&http.Client{Transport: testkit.NewTransport(t, opts...)}).Get(srv.URL)
			require.NoError(t, err)
			res.Body.Close()
			assert.Equal(t, http.StatusOK, res.StatusCode)
			assert.Len(t, clock.Sleeps(), tt.wantFaked)
			assert.EqualValues(t, 3, srv.Attempts.Load())
		})
	}
}

// TestClockGovernsParking: with a fake clock, a retry without a token parks
// on that clock, its polls among the clock's waits, until MaxWait passes
// without a success (MaxWait is the budget's, on the real clock); NoParking
// makes the same request end at once.
func TestClockGovernsParking(t *testing.T) {
	for _, noParking := range []bool{false, true} {
		srv := retryhttptest.NewServer(t, retryhttptest.Status(http.StatusServiceUnavailable))
		clock := retryhttptest.NewClock(time.Now())
		// MaxWait is below the gate's quiet time for a probe: nothing is
		// ever released.
		b := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Capacity: 1, MaxWait: 100 * time.Millisecond, NoParking: noParking})
		var ev testkit.ParkEvents
		tr := retryhttp.New(retryhttp.WithClock(clock), retryhttp.WithRetryBudget(b), ev.Option())
		t.Cleanup(tr.CloseIdleConnections)
		res, err := (&http.Client{Transport: tr}).Get(srv.URL)
		require.NoError(t, err)
		res.Body.Close()
		assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
		assert.Equal(t, 2, srv.Requests(), "the first attempt and the retry of the only token")
		if noParking {
			assert.Zero(t, ev.Count(retryhttp.ParkParked), "NoParking: refused at once")
			assert.Len(t, clock.Sleeps(), 1, "the delay of the one retry")
			continue
		}
		require.Len(t, ev.Dropped, 1)
		assert.Equal(t, retryhttp.StopBudgetRefused, ev.Dropped[0].Reason)
		assert.Greater(t, ev.Dropped[0].Waited, time.Duration(0), "parked")
		assert.Greater(t, len(clock.Sleeps()), 2, "the delays of both retries and the parked retry's polls went through the fake clock")
	}
}

// TestFakeTimeGovernsTimers: with a clock that moves only when the test
// says (retryhttptest.NewManualClock), an hour's hedge delay and an hour's
// attempt timeout pass when the test advances the clock, not before.
func TestFakeTimeGovernsTimers(t *testing.T) {
	tests := []struct {
		name string
		opt  retryhttp.Option
		want string // the body of the winning attempt
	}{
		{"hedge delay", retryhttp.WithHedging(time.Hour, 1), "attempt 2"},
		{"attempt timeout", retryhttp.WithAttemptTimeout(time.Hour), "attempt 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs := newHedgeServer(t, slowFirst)
			clock := retryhttptest.NewManualClock(time.Now())
			c, _ := newHedgeClient(t, tt.opt, retryhttp.WithClock(clock), testkit.UnlimitedBudget)
			type result struct {
				body string
				err  error
			}
			done := make(chan result, 1)
			go func() {
				res, err := c.Get(hs.URL)
				if err != nil {
					done <- result{err: err}
					return
				}
				done <- result{body: testkit.ReadAll(t, res)}
			}()
			require.Equal(t, 1, <-hs.arrived)
			require.Eventually(t, func() bool { return clock.Timers() > 0 }, 10*time.Second, time.Millisecond, "the timer armed")
			select {
			case r := <-done:
				t.Fatalf("ended before the clock moved: %v", r)
			case <-time.After(50 * time.Millisecond):
			}
			clock.Advance(time.Hour)
			r := <-done
			require.NoError(t, r.err)
			assert.Equal(t, tt.want, r.body)
			assert.Equal(t, 2, <-hs.arrived)
		})
	}
}
