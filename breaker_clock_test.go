package retryhttp_test

import (
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

// The breaker reads the time from the Transport's Clock: these tests move a
// fake clock instead of waiting.

func TestBreakerOpenTimeoutOnTheClock(t *testing.T) {
	for _, clockFirst := range []bool{true, false} {
		t.Run(map[bool]string{true: "WithClock first", false: "WithClock last"}[clockFirst], func(t *testing.T) {
			testBreakerOpenTimeoutOnTheClock(t, clockFirst)
		})
	}
}

// testBreakerOpenTimeoutOnTheClock opens a circuit and moves the clock past
// its OpenTimeout, with WithClock before or after WithCircuitBreaker: the
// order of the options does not matter.
func testBreakerOpenTimeoutOnTheClock(t *testing.T, clockFirst bool) {
	srv := testkit.DeadServer(t)
	clock := retryhttptest.NewClock(time.Now())
	var changes transitions
	breaker := retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{
		MinRequests: 1, OpenTimeout: time.Minute, OnStateChange: changes.record,
	})
	opts := []retryhttp.Option{retryhttp.WithClock(clock), breaker}
	if !clockFirst {
		opts = []retryhttp.Option{breaker, retryhttp.WithClock(clock)}
	}
	c := testkit.NewClient(t, append([]retryhttp.Option{retryhttp.WithMaxRetries(0)}, opts...)...)
	_, err := try(c, srv.URL)
	require.NoError(t, err)
	clock.Advance(time.Minute) // not after OpenTimeout yet: at it
	_, err = try(c, srv.URL)
	require.ErrorIs(t, err, retryhttp.ErrCircuitOpen)
	assert.Equal(t, []string{"closed→open"}, changes.seen())

	clock.Advance(time.Nanosecond)
	hits := srv.Attempts.Load()
	code, err := try(c, srv.URL)
	require.NoError(t, err, "the probe is sent")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, hits+1, srv.Attempts.Load())
	assert.Equal(t, []string{"closed→open", "open→half-open", "half-open→open"}, changes.seen())
}

func TestBreakerHalfOpenClosesOnTheClock(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	srv := switchServer(t, &failing)
	clock := retryhttptest.NewClock(time.Now())
	var changes transitions
	c := testkit.NewClient(t, retryhttp.WithMaxRetries(0), retryhttp.WithClock(clock),
		retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{
			MinRequests: 2, HalfOpenProbes: 2, OnStateChange: changes.record,
		}))
	for range 2 {
		_, err := try(c, srv.URL)
		require.NoError(t, err)
	}
	failing.Store(false)
	clock.Advance(30*time.Second + time.Nanosecond) // the default OpenTimeout
	for range 2 {
		code, err := try(c, srv.URL)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code)
	}
	assert.Equal(t, []string{"closed→open", "open→half-open", "half-open→closed"}, changes.seen())
}

func TestBreakerWindowRollsOnTheClock(t *testing.T) {
	// A window of 10s in ten buckets of 1s: samples older than the window
	// are forgotten a bucket at a time.
	srv := testkit.DeadServer(t)
	clock := retryhttptest.NewClock(time.Now())
	var changes transitions
	c := testkit.NewClient(t, retryhttp.WithMaxRetries(0), retryhttp.WithClock(clock),
		retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{
			MinRequests: 5, Window: 10 * time.Second, OnStateChange: changes.record,
		}))
	fail := func(n int) {
		t.Helper()
		for range n {
			_, err := try(c, srv.URL)
			require.NoError(t, err)
		}
	}
	fail(2) // bucket 0
	clock.Advance(5 * time.Second)
	fail(2) // bucket 5
	clock.Advance(5 * time.Second)
	fail(1) // bucket 10: bucket 0 has left the window, 3 samples remain
	assert.Empty(t, changes.seen(), "the first two failures were forgotten")
	fail(1)
	assert.Empty(t, changes.seen(), "4 samples")
	fail(1)
	assert.Equal(t, []string{"closed→open"}, changes.seen(), "5 failed samples in the window")
}

func TestBreakerSamplesOfAnEarlierStateDoNotCount(t *testing.T) {
	// A request let through while closed whose answer comes after the
	// circuit opened and closed again is not counted in the new state.
	release := make(chan struct{})
	var slow atomic.Bool
	srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if slow.Load() {
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	clock := retryhttptest.NewClock(time.Now())
	var changes transitions
	c := testkit.NewClient(t, retryhttp.WithMaxRetries(0), retryhttp.WithClock(clock),
		retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{
			MinRequests: 2, HalfOpenProbes: 1, OnStateChange: changes.record,
		}))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = try(c, srv.URL+"/slow") // let through while closed
	}()
	require.Eventually(t, func() bool { return srv.Attempts.Load() == 1 }, 5*time.Second, time.Millisecond)
	for range 2 {
		_, err := try(c, srv.URL)
		require.NoError(t, err)
	}
	slow.Store(true) // healthy from now on
	clock.Advance(time.Minute)
	_, err := try(c, srv.URL) // the probe closes the circuit
	require.NoError(t, err)
	close(release) // the slow request fails, in the old state
	wg.Wait()
	slow.Store(false) // failing again
	_, err = try(c, srv.URL)
	require.NoError(t, err)
	assert.Equal(t, []string{"closed→open", "open→half-open", "half-open→closed"}, changes.seen(),
		"one failed sample of MinRequests 2: had the old failure counted, the circuit would have opened")
}

func TestBreakerAddsNoAllocs(t *testing.T) {
	// A request let through by a closed circuit allocates nothing more
	// than without a breaker.
	plain := retryhttp.New(retryhttp.WithTransport(memTransport{}))
	guarded := retryhttp.New(retryhttp.WithTransport(memTransport{}),
		retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{}))
	send := func(rt http.RoundTripper) func() {
		return func() {
			req, err := http.NewRequest(http.MethodGet, "http://example.test/", nil)
			if err != nil {
				panic(err)
			}
			res, err := rt.RoundTrip(req)
			if err != nil {
				panic(err)
			}
			res.Body.Close()
		}
	}
	send(guarded)() // the destination's circuit is made once
	assert.LessOrEqual(t, testing.AllocsPerRun(100, send(guarded)), testing.AllocsPerRun(100, send(plain)), "a breaker adds no allocation")
}

func TestBreakerConcurrentSamples(t *testing.T) {
	// Successes counted without a lock and failures under it, from many
	// goroutines: the circuit opens once, when the failures reach the
	// ratio, and not before MinRequests samples.
	var n atomic.Int64
	srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
		if n.Add(1) > 100 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	clock := retryhttptest.NewClock(time.Now())
	var changes transitions
	c := testkit.NewClient(t, retryhttp.WithMaxRetries(0), retryhttp.WithClock(clock),
		retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{OnStateChange: changes.record}))
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if _, err := try(c, srv.URL); err != nil {
					assert.ErrorIs(t, err, retryhttp.ErrCircuitOpen)
				}
			}
		}()
	}
	wg.Wait()
	// 100 successes, then failures: the circuit opens at the 100th failure
	// (50%), so the server saw at most 200 requests, plus those in flight.
	assert.Equal(t, []string{"closed→open"}, changes.seen())
	assert.GreaterOrEqual(t, n.Load(), int64(200))
	assert.Less(t, n.Load(), int64(200+8))
}
