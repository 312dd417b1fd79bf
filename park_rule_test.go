package retryhttp_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBudgetRetriesThatPayAreFree: a request whose retry succeeds gets back
// the token its retry took, so a host whose first attempts all fail and
// whose retries all succeed keeps a full bucket; unless the failure asked
// the client to back off (Retry-After), or the success queued at the host
// (it took far longer than the host's fastest answers).
func TestBudgetRetriesThatPayAreFree(t *testing.T) {
	tests := []struct {
		name       string
		retryAfter string        // on the failed first attempts
		slow       time.Duration // the successful retry's latency
		wantOK     int           // of 5 requests, each failing its first attempt
	}{
		{name: "retries that pay", wantOK: 5},
		{name: "Retry-After", retryAfter: "0", wantOK: 1},
		{name: "queued", slow: 200 * time.Millisecond, wantOK: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
				switch {
				case r.URL.Path == "/ok": // the host's fastest answers
				case retryhttp.AttemptFromRequest(r) == 1:
					if tt.retryAfter != "" {
						w.Header().Set("Retry-After", tt.retryAfter)
					}
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				default:
					time.Sleep(tt.slow)
				}
				_, _ = io.WriteString(w, "ok")
			})
			// One token; a success deposits a hundredth.
			b := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Capacity: 1, Ratio: 0.01})
			var ev testkit.ParkEvents
			c := testkit.NewClient(t, retryhttp.WithRetryBudget(b), ev.Option())
			for range 20 {
				require.Equal(t, http.StatusOK, testkit.Get(t, c, srv.URL+"/ok"))
			}
			ok := 0
			for range 5 {
				if testkit.Get(t, c, srv.URL) == http.StatusOK {
					ok++
				}
			}
			assert.Equal(t, tt.wantOK, ok)
			assert.Zero(t, ev.Count(retryhttp.ParkParked), "a host that answers is not in an outage: nothing parks")
		})
	}
}

// TestParkedOnlyInAnOutage: a retry without a token is refused at once on a
// host that answers some requests, and parks once the host's latest
// attempts all failed (OutageStreak of them in a row).
func TestParkedOnlyInAnOutage(t *testing.T) {
	srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ok" {
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	b := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Capacity: 1, MaxWait: 200 * time.Millisecond})
	var ev testkit.ParkEvents
	c := testkit.NewClient(t, retryhttp.WithRetryBudget(b), ev.Option())
	require.Equal(t, http.StatusOK, testkit.Get(t, c, srv.URL+"/ok"))

	// The first attempt and the retry with the token fail: two in a row,
	// not an outage. The next retry is refused at once.
	start := time.Now()
	assert.Equal(t, http.StatusServiceUnavailable, testkit.Get(t, c, srv.URL))
	assert.Less(t, time.Since(start), 100*time.Millisecond, "refused at once, not parked")
	assert.Zero(t, ev.Count(retryhttp.ParkParked))

	// Failures in a row: an outage. A retry without a token parks, and
	// gives up after MaxWait.
	noRetry := testkit.NewClient(t, retryhttp.WithRetryBudget(b), retryhttp.WithMaxRetries(0))
	for range testkit.OutageStreak {
		testkit.Get(t, noRetry, srv.URL)
	}
	assert.Equal(t, http.StatusServiceUnavailable, testkit.Get(t, c, srv.URL))
	assert.Equal(t, 1, ev.Count(retryhttp.ParkParked))
	require.Len(t, ev.Dropped, 1)
	assert.Equal(t, retryhttp.StopBudgetRefused, ev.Dropped[0].Reason)
}
