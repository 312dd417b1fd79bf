package retryhttp_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/destinations"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/seed2409de8f/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStatedPauseIsAFloor: with a retry budget (the default), no retry
// leaves before the pause its 429 stated, whichever DelayFn chose the wait:
// each way of naming the default delay, and a DelayFn of one's own that
// says 0. A loopback server answers every odd request 429 with
// Retry-After: 1 and every even one 200; the requests are sent one after
// the other, so each 429 is followed by its retry. The transport and its
// budget share a fake clock that jumps to the end of every wait, and the
// server reads the time on it: each retry must arrive at least 1s after
// its 429. Without the floor, the default's jitter (±1/3) sends about half
// of the retries early, so 16 requests find one with near certainty.
func TestStatedPauseIsAFloor(t *testing.T) {
	const requests = 16
	defaults, err := destinations.Parse([]byte(`{"defaults": {"backoff": {}}}`))
	require.NoError(t, err)
	table, err := destinations.New(defaults)
	require.NoError(t, err)
	tests := []struct {
		name string
		opts []retryhttp.Option
		ctx  func(context.Context) context.Context
	}{
		{name: "WithDelayFn(DefaultDelayFn)", opts: []retryhttp.Option{retryhttp.WithDelayFn(retryhttp.DefaultDelayFn)}},
		{name: "CustomizedDelayFn, default fields", opts: []retryhttp.Option{
			retryhttp.WithDelayFn(retryhttp.CustomizedDelayFn(retryhttp.CustomizedDelayFnOptions{}))}},
		{name: "SetDelayFn(ctx, DefaultDelayFn)", ctx: func(ctx context.Context) context.Context {
			return retryhttp.SetDelayFn(ctx, retryhttp.DefaultDelayFn)
		}},
		{name: "destination file, default backoff", opts: []retryhttp.Option{retryhttp.WithPolicyFunc(table.Policy)}},
		{name: "a DelayFn of one's own", opts: []retryhttp.Option{
			retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 })}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := retryhttptest.NewClock(time.Now())
			budget := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Clock: clock})
			var mu sync.Mutex
			var limited time.Time // when the latest 429 was written
			var early []time.Duration
			srv := testkit.NewCountingServer(t, func(n int64, w http.ResponseWriter, _ *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				now := clock.Now()
				if n%2 == 1 {
					limited = now
					w.Header().Set("Retry-After", "1")
					w.WriteHeader(http.StatusTooManyRequests)
					return
				}
				if waited := now.Sub(limited); waited < time.Second {
					early = append(early, waited)
				}
			})
			opts := append([]retryhttp.Option{retryhttp.WithClock(clock), retryhttp.WithRetryBudget(budget)}, tt.opts...)
			c := &http.Client{Transport: testkit.NewTransport(t, opts...)}
			for range requests {
				ctx := context.Background()
				if tt.ctx != nil {
					ctx = tt.ctx(ctx)
				}
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
				require.NoError(t, err)
				res, err := c.Do(req)
				require.NoError(t, err)
				res.Body.Close()
				require.Equal(t, http.StatusOK, res.StatusCode)
			}
			assert.EqualValues(t, 2*requests, srv.Attempts.Load(), "one retry per request")
			mu.Lock()
			defer mu.Unlock()
			assert.Empty(t, early, "retries sent this long after a 429 that said Retry-After: 1")
		})
	}
}

// TestStatedPauseBeyondItsBounds: a stated pause that the transport cannot
// wait, longer than WithMaxDelay or past the caller's deadline, ends the
// request with its 429 and no retry, even when the DelayFn says 0.
func TestStatedPauseBeyondItsBounds(t *testing.T) {
	tests := []struct {
		name       string
		retryAfter string
		timeout    time.Duration // of the caller's context; 0: none
	}{
		{"beyond the maximum delay", "3600", 0},
		{"past the deadline", "10", 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Retry-After", tt.retryAfter)
				w.WriteHeader(http.StatusTooManyRequests)
			})
			clock := retryhttptest.NewClock(time.Now())
			c := testkit.NewClient(t, retryhttp.WithClock(clock))
			ctx := context.Background()
			if tt.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.timeout)
				defer cancel()
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			require.NoError(t, err)
			res, err := c.Do(req)
			require.NoError(t, err)
			res.Body.Close()
			assert.Equal(t, http.StatusTooManyRequests, res.StatusCode)
			assert.EqualValues(t, 1, srv.Attempts.Load(), "no retry")
			assert.Empty(t, clock.Sleeps(), "no wait")
		})
	}
}
