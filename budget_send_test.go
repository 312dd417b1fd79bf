package retryhttp_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/seed2409de8f/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBudgetTokenTakenWhenSent: a retry takes its token when it is sent,
// after its delay, so that the bucket bounds the retries sent and not those
// that wait. If the token is gone when its delay ends, the retry is refused
// with the response it had, body and all. A delay longer than MaxWait, or a
// response too long to keep, takes its token before the wait: no retry
// waits that long to be refused, and none is refused after its response was
// let go. The retry of a response that asked for a pause takes none: it
// waits in its host's pause lane, and is sent even when the bucket was
// spent meanwhile (pause.go).
func TestBudgetTokenTakenWhenSent(t *testing.T) {
	tests := []struct {
		name         string
		delay        time.Duration
		bodyLen      int
		retryAfter   string  // on the failed responses
		spend        bool    // another retry takes the tokens during the wait
		wantTokens   float64 // in the bucket as the wait starts
		wantAttempts int64   // of the failing request
		wantStop     retryhttp.StopReason
	}{
		{name: "taken when sent", delay: 10 * time.Millisecond, bodyLen: 4,
			wantTokens: 1, wantAttempts: 2, wantStop: retryhttp.StopRetriesExhausted},
		{name: "gone when sent: refused with its response", delay: 10 * time.Millisecond, bodyLen: 4, spend: true,
			wantTokens: 1, wantAttempts: 1, wantStop: retryhttp.StopBudgetRefused},
		{name: "a delay above MaxWait takes it up front", delay: 2 * time.Second, bodyLen: 4, spend: true,
			wantTokens: 0, wantAttempts: 2, wantStop: retryhttp.StopRetriesExhausted},
		{name: "a body too long to keep takes it up front", delay: 10 * time.Millisecond, bodyLen: 5000, spend: true,
			wantTokens: 0, wantAttempts: 2, wantStop: retryhttp.StopRetriesExhausted},
		{name: "a response asking for a pause takes none: it waits in the pause lane", delay: 10 * time.Millisecond, bodyLen: 4,
			retryAfter: "1", spend: true, wantTokens: 1, wantAttempts: 2, wantStop: retryhttp.StopRetriesExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := strings.Repeat("x", tt.bodyLen)
			var failing atomic.Int64
			srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/ok" {
					failing.Add(1)
					if tt.retryAfter != "" {
						w.Header().Set("Retry-After", tt.retryAfter)
					}
					w.WriteHeader(http.StatusServiceUnavailable)
				}
				_, _ = w.Write([]byte(body))
			})
			b := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Capacity: 1, MaxWait: time.Second})
			tokens := -1.0
			clock := testkit.OnWait{Clock: retryhttptest.NewClock(time.Now()), Fn: func() {
				if tokens < 0 {
					tokens = budgetTokens(b, srv.URL)
					if tt.spend {
						BudgetSpend(b, srv.URL)
					}
				}
			}}
			var stop retryhttp.StopReason
			c := testkit.NewClient(t, retryhttp.WithRetryBudget(b), retryhttp.WithClock(clock), retryhttp.WithMaxRetries(1),
				retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return tt.delay }),
				retryhttp.WithHooks(retryhttp.Hooks{OnRetryDecision: func(d retryhttp.Decision) {
					if !d.Retry {
						stop = d.Reason
					}
				}}))
			require.Equal(t, http.StatusOK, testkit.Get(t, c, srv.URL+"/ok")) // the host answers: no outage

			res, err := c.Get(srv.URL)
			require.NoError(t, err)
			got := testkit.ReadAll(t, res)
			assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
			assert.Equal(t, len(body), len(got), "the response returned as it was")
			assert.Equal(t, body, got)
			assert.Equal(t, tt.wantTokens, tokens, "tokens as the wait starts")
			assert.Equal(t, tt.wantAttempts, failing.Load())
			assert.Equal(t, tt.wantStop, stop)
		})
	}
}
