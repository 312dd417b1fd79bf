package retryhttp_test

import (
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/seed2409de8f/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A circuit's whole cycle, closed, open, half-open and closed again, with
// requests sent concurrently through one Transport to a real server, on
// the Transport's clock (WithClock) and on the real clock: the closed
// path's reading of the time (breaker.go, ageNow) must keep every rule.

// burst sends n GETs to url from workers goroutines at once and returns how
// many were answered 200 and how many the circuit refused.
func burst(t *testing.T, c *http.Client, url string, workers, n int) (ok, refused int64) {
	t.Helper()
	var oks, refusals atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n / workers {
				code, err := try(c, url)
				switch {
				case errors.Is(err, retryhttp.ErrCircuitOpen):
					refusals.Add(1)
				case assert.NoError(t, err) && code == http.StatusOK:
					oks.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return oks.Load(), refusals.Load()
}

func TestBreakerCycleConcurrentOnTheTransportClock(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	srv := switchServer(t, &failing)
	clock := retryhttptest.NewClock(time.Now())
	var changes transitions
	c := testkit.NewClient(t, retryhttp.WithMaxRetries(0), retryhttp.WithClock(clock),
		retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{
			MinRequests: 20, HalfOpenProbes: 3, OpenTimeout: 30 * time.Second,
			Window: time.Minute, OnStateChange: changes.record,
		}))

	// 1. Failures from 8 goroutines open the circuit once the window holds
	// 20 samples: at most the 7 other requests then in flight get through.
	ok, refused := burst(t, c, srv.URL, 8, 160)
	assert.Zero(t, ok)
	sent := srv.Attempts.Load()
	assert.GreaterOrEqual(t, sent, int64(20))
	assert.LessOrEqual(t, sent, int64(27))
	assert.Equal(t, 160-sent, refused, "the others are refused without being sent")
	assert.Equal(t, []string{"closed→open"}, changes.seen())

	// 2. Still open at OpenTimeout; half-open after it: probes succeed and
	// close the circuit, whatever the requests racing them.
	clock.Advance(30 * time.Second)
	_, refused = burst(t, c, srv.URL, 8, 16)
	assert.EqualValues(t, 16, refused)
	failing.Store(false)
	clock.Advance(time.Nanosecond)
	ok, _ = burst(t, c, srv.URL, 8, 160)
	assert.GreaterOrEqual(t, ok, int64(3))
	assert.Equal(t, []string{"closed→open", "open→half-open", "half-open→closed"}, changes.seen())

	// 3. Closed: every request goes through.
	ok, refused = burst(t, c, srv.URL, 8, 160)
	assert.EqualValues(t, 160, ok)
	assert.Zero(t, refused)

	// 4. The window follows the clock: once its successes are a whole
	// window old, 20 failures (less than half of them with the
	// successes) open the circuit again.
	failing.Store(true)
	ok, _ = burst(t, c, srv.URL, 4, 4) // failures: one bucket
	assert.Zero(t, ok)
	assert.Len(t, changes.seen(), 3, "4 failures among 160 successes leave the circuit closed")
	clock.Advance(time.Minute)
	before := srv.Attempts.Load()
	for range 20 {
		_, err := try(c, srv.URL)
		require.NoError(t, err)
	}
	_, err := try(c, srv.URL)
	require.ErrorIs(t, err, retryhttp.ErrCircuitOpen)
	assert.Equal(t, before+20, srv.Attempts.Load())
	assert.Equal(t, []string{"closed→open", "open→half-open", "half-open→closed", "closed→open"}, changes.seen())
}

func TestBreakerCycleConcurrentOnTheRealClock(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	srv := switchServer(t, &failing)
	var changes transitions
	// OpenTimeout is a nanosecond, so that the real clock passes it at
	// once: the next request after the circuit opens is a probe.
	c := testkit.NewClient(t, retryhttp.WithMaxRetries(0),
		retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{
			MinRequests: 20, HalfOpenProbes: 3, OpenTimeout: time.Nanosecond, OnStateChange: changes.record,
		}))

	ok, _ := burst(t, c, srv.URL, 8, 160)
	assert.Zero(t, ok)
	seen := changes.seen()
	require.NotEmpty(t, seen)
	assert.Equal(t, "closed→open", seen[0])
	for _, change := range seen {
		assert.NotEqual(t, "half-open→closed", change, "no probe succeeded")
	}

	failing.Store(false)
	ok, _ = burst(t, c, srv.URL, 8, 160)
	assert.GreaterOrEqual(t, ok, int64(3))
	seen = changes.seen()
	assert.Equal(t, "half-open→closed", seen[len(seen)-1])

	ok, refused := burst(t, c, srv.URL, 8, 160)
	assert.EqualValues(t, 160, ok, "closed: every request goes through")
	assert.Zero(t, refused)
	assert.Equal(t, seen, changes.seen(), "successes change nothing")
}
