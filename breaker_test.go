package retryhttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
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

// transitions records the calls of Hooks.OnCircuitStateChange.
type transitions struct {
	mu  sync.Mutex
	got []string
}

func (tr *transitions) record(host string, from, to retryhttp.CircuitState) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.got = append(tr.got, from.String()+"→"+to.String())
}

// option installs tr.record as a Hooks.OnCircuitStateChange.
func (tr *transitions) option() retryhttp.Option {
	return retryhttp.WithHooks(retryhttp.Hooks{OnCircuitStateChange: tr.record})
}

func (tr *transitions) seen() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.got...)
}

// switchServer fails with 503 while failing is set, else answers 200.
func switchServer(t *testing.T, failing *atomic.Bool) *testkit.CountingServer {
	return testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
		if failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
}

// try sends a GET and returns its status, or 0 and the error.
func try(c *http.Client, url string) (int, error) {
	res, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, nil
}

func TestBreakerOpensAfterMinRequestsAndFailsFast(t *testing.T) {
	srv := testkit.DeadServer(t)
	var changes transitions
	c := testkit.NewClient(t, testkit.OnFakeTime(), changes.option(), retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{}))

	for i := range 20 {
		code, err := try(c, srv.URL)
		require.NoError(t, err, "request %d", i+1)
		require.Equal(t, http.StatusServiceUnavailable, code)
	}
	assert.Equal(t, []string{"closed→open"}, changes.seen(), "the 20th failed sample opens the circuit")

	hits := srv.Attempts.Load()
	for range 10 {
		_, err := try(c, srv.URL)
		require.ErrorIs(t, err, retryhttp.ErrCircuitOpen)
		assert.Contains(t, err.Error(), "retryhttp: circuit breaker open: "+srv.URL)
	}
	assert.Equal(t, hits, srv.Attempts.Load(), "no request reaches the server while open")
}

func TestBreakerFailureRatio(t *testing.T) {
	tests := []struct {
		name      string
		failEvery int // every failEvery-th request fails
		wantOpen  bool
	}{
		{name: "50% opens", failEvery: 2, wantOpen: true},
		{name: "33% stays closed", failEvery: 3, wantOpen: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n atomic.Int64
			srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
				if n.Add(1)%int64(tt.failEvery) == 0 {
					w.WriteHeader(http.StatusInternalServerError)
				}
			})
			var changes transitions
			c := testkit.NewClient(t, retryhttp.WithMaxRetries(0),
				changes.option(), retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{}))
			for range 60 {
				if _, err := try(c, srv.URL); err != nil {
					require.ErrorIs(t, err, retryhttp.ErrCircuitOpen)
				}
			}
			assert.Equal(t, tt.wantOpen, len(changes.seen()) > 0, "%v", changes.seen())
		})
	}
}

func TestBreakerOneSamplePerLogicalRequest(t *testing.T) {
	// Each request fails once and then succeeds on its retry: a success
	// for the breaker, although half the attempts failed. (The budget is
	// off: it would rightly refuse a retry for every request.)
	srv := testkit.FailOnceServer(t)
	var changes transitions
	c := testkit.NewClient(t, retryhttp.WithRetryBudget(nil), changes.option(), retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{
		MinRequests: 4,
	}))
	for i := range 40 {
		code, err := try(c, srv.URL+"/"+strings.Repeat("x", i+1))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code)
	}
	assert.Empty(t, changes.seen())
}

func TestBreakerClosesTheBodyWhenOpen(t *testing.T) {
	srv := testkit.DeadServer(t)
	c := testkit.NewClient(t, retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{MinRequests: 1}))
	_, err := try(c, srv.URL)
	require.NoError(t, err)

	body := &closeRecorder{Reader: strings.NewReader("payload")}
	req, err := http.NewRequest(http.MethodPost, srv.URL, body)
	require.NoError(t, err)
	_, err = c.Do(req)
	require.ErrorIs(t, err, retryhttp.ErrCircuitOpen)
	assert.True(t, body.closed.Load(), "the body is closed")
	assert.EqualValues(t, 4, srv.Attempts.Load(), "the POST was not sent")
}

type closeRecorder struct {
	io.Reader
	closed atomic.Bool
}

func (c *closeRecorder) Close() error {
	c.closed.Store(true)
	return nil
}

func TestBreakerHalfOpenProbesThenCloses(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	srv := switchServer(t, &failing)
	var changes transitions
	clock := retryhttptest.NewClock(time.Now())
	c := testkit.NewClient(t, retryhttp.WithClock(clock), changes.option(), retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{
		MinRequests: 5, OpenTimeout: 50 * time.Millisecond,
	}))

	for range 5 {
		_, err := try(c, srv.URL)
		require.NoError(t, err)
	}
	_, err := try(c, srv.URL)
	require.ErrorIs(t, err, retryhttp.ErrCircuitOpen)

	failing.Store(false)
	hits := srv.Attempts.Load()
	clock.Advance(50*time.Millisecond + time.Nanosecond)
	code, err := try(c, srv.URL)
	require.NoError(t, err, "a probe goes through after OpenTimeout")
	require.Equal(t, http.StatusOK, code)
	for range 2 { // the other two probes
		code, err := try(c, srv.URL)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code)
	}
	assert.Equal(t, []string{"closed→open", "open→half-open", "half-open→closed"}, changes.seen())
	assert.EqualValues(t, 3, srv.Attempts.Load()-hits, "three probes reached the server")

	for range 10 {
		code, err := try(c, srv.URL)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code)
	}
}

func TestBreakerHalfOpenFailureReopens(t *testing.T) {
	srv := testkit.DeadServer(t)
	var changes transitions
	clock := retryhttptest.NewClock(time.Now())
	c := testkit.NewClient(t, retryhttp.WithMaxRetries(0), retryhttp.WithClock(clock),
		changes.option(), retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{
			MinRequests: 1, OpenTimeout: 50 * time.Millisecond,
		}))
	_, err := try(c, srv.URL)
	require.NoError(t, err)
	_, err = try(c, srv.URL)
	require.ErrorIs(t, err, retryhttp.ErrCircuitOpen)
	clock.Advance(50*time.Millisecond + time.Nanosecond)
	_, err = try(c, srv.URL)
	require.NoError(t, err, "the probe was sent, and failed")
	_, err = try(c, srv.URL)
	require.ErrorIs(t, err, retryhttp.ErrCircuitOpen)
	assert.Equal(t, []string{"closed→open", "open→half-open", "half-open→open"}, changes.seen())
}

func TestBreakerHalfOpenLimitsProbes(t *testing.T) {
	// While the probes are in flight, other requests fail fast.
	release := make(chan struct{})
	var healthy atomic.Bool
	srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
		if !healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		<-release
	})
	clock := retryhttptest.NewClock(time.Now())
	c := testkit.NewClient(t, retryhttp.WithMaxRetries(0), retryhttp.WithClock(clock),
		retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{
			MinRequests: 1, OpenTimeout: 50 * time.Millisecond, HalfOpenProbes: 2,
		}))
	_, err := try(c, srv.URL)
	require.NoError(t, err)
	healthy.Store(true)
	hits := srv.Attempts.Load()
	clock.Advance(50*time.Millisecond + time.Nanosecond)

	var wg sync.WaitGroup
	var probes atomic.Int64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := try(c, srv.URL); err == nil {
				probes.Add(1)
			}
		}()
	}
	require.Eventually(t, func() bool { return srv.Attempts.Load()-hits == 2 }, 10*time.Second, time.Millisecond,
		"both probes reach the server")
	for range 5 {
		_, err := try(c, srv.URL)
		assert.ErrorIs(t, err, retryhttp.ErrCircuitOpen, "probes in flight")
	}
	close(release)
	wg.Wait()
	assert.EqualValues(t, 2, probes.Load())
	assert.EqualValues(t, 2, srv.Attempts.Load()-hits)
}

func TestBreakerPerHost(t *testing.T) {
	a := testkit.DeadServer(t)
	b := testkit.OKServer(t)
	c := testkit.NewClient(t, retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{MinRequests: 3}))
	for range 3 {
		_, err := try(c, a.URL)
		require.NoError(t, err)
	}
	_, err := try(c, a.URL)
	require.ErrorIs(t, err, retryhttp.ErrCircuitOpen)
	code, err := try(c, b.URL)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code)
}

func TestBreakerOffByDefault(t *testing.T) {
	srv := testkit.DeadServer(t)
	c := testkit.NewClient(t, testkit.OnFakeTime())
	for range 100 {
		code, err := try(c, srv.URL)
		require.NoError(t, err)
		require.Equal(t, http.StatusServiceUnavailable, code)
	}
}

func TestBreakerIgnoresCallerCancellation(t *testing.T) {
	srv := testkit.DeadServer(t)
	var changes transitions
	c := testkit.NewClient(t, testkit.OnFakeTime(), changes.option(), retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{
		MinRequests: 20,
	}))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 30 {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		_, err = c.Do(req)
		require.ErrorIs(t, err, context.Canceled)
	}
	for range 19 {
		_, err := try(c, srv.URL)
		require.NoError(t, err)
	}
	assert.Empty(t, changes.seen(), "30 cancellations and 19 failures are 19 samples")
	_, err := try(c, srv.URL)
	require.NoError(t, err)
	assert.Equal(t, []string{"closed→open"}, changes.seen(), "the 20th failure opens")
}

func TestBreakerCountsErrorsAsFailures(t *testing.T) {
	srv := testkit.DeadServer(t)
	url := srv.URL
	srv.Close() // connection refused from now on
	c := testkit.NewClient(t, retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{MinRequests: 2}))
	for range 2 {
		_, err := try(c, url)
		require.Error(t, err)
		require.NotErrorIs(t, err, retryhttp.ErrCircuitOpen)
	}
	_, err := try(c, url)
	assert.ErrorIs(t, err, retryhttp.ErrCircuitOpen)
}

func TestBreakerCallbackMaySendRequests(t *testing.T) {
	// The breaker notes a change under its lock; the transport calls the
	// hook after releasing it, so a hook that uses the same circuit does
	// not deadlock.
	srv := testkit.DeadServer(t)
	var c *http.Client
	var fromCallback atomic.Value
	c = testkit.NewClient(t, retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{MinRequests: 1}),
		retryhttp.WithHooks(retryhttp.Hooks{OnCircuitStateChange: func(host string, from, to retryhttp.CircuitState) {
			_, err := try(c, srv.URL)
			fromCallback.Store(err)
		}}))
	_, err := try(c, srv.URL)
	require.NoError(t, err)
	got, _ := fromCallback.Load().(error)
	assert.ErrorIs(t, got, retryhttp.ErrCircuitOpen)
}

func TestBreakerSettingsDefaults(t *testing.T) {
	// Invalid values mean the defaults: the circuit opens after 20 failed
	// samples, not before.
	srv := testkit.DeadServer(t)
	var changes transitions
	c := testkit.NewClient(t, retryhttp.WithMaxRetries(0), changes.option(), retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{
		FailureRatio: -1, Window: -time.Second, OpenTimeout: -time.Second, MaxHosts: -1,
	}))
	for range 19 {
		_, err := try(c, srv.URL)
		require.NoError(t, err)
	}
	assert.Empty(t, changes.seen())
	_, err := try(c, srv.URL)
	require.NoError(t, err)
	assert.Equal(t, []string{"closed→open"}, changes.seen())
	_, err = try(c, srv.URL)
	assert.True(t, errors.Is(err, retryhttp.ErrCircuitOpen))
}

func TestCircuitStateString(t *testing.T) {
	assert.Equal(t, "closed", retryhttp.CircuitClosed.String())
	assert.Equal(t, "half-open", retryhttp.CircuitHalfOpen.String())
	assert.Equal(t, "open", retryhttp.CircuitOpen.String())
	assert.Equal(t, "CircuitState(7)", retryhttp.CircuitState(7).String())
}

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
		MinRequests: 1, OpenTimeout: time.Minute,
	})
	opts := []retryhttp.Option{retryhttp.WithClock(clock), breaker, changes.option()}
	if !clockFirst {
		opts = []retryhttp.Option{breaker, retryhttp.WithClock(clock), changes.option()}
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
		changes.option(), retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{
			MinRequests: 2, HalfOpenProbes: 2,
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
		changes.option(), retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{
			MinRequests: 5, Window: 10 * time.Second,
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
		changes.option(), retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{
			MinRequests: 2, HalfOpenProbes: 1,
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
		changes.option(), retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{}))
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
		changes.option(), retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{
			MinRequests: 20, HalfOpenProbes: 3, OpenTimeout: 30 * time.Second,
			Window: time.Minute,
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
		changes.option(), retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{
			MinRequests: 20, HalfOpenProbes: 3, OpenTimeout: time.Nanosecond,
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

// The breaker's cost on the happy path: a GET answered 200 at once by an
// in-memory base transport, through a Transport without and with a circuit
// breaker, as top-level benchmarks so that an instruction count (callgrind)
// of each can be taken alone:
//
//	go test -c -o /tmp/s.test .
//	GOGC=off GOMAXPROCS=1 GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off valgrind --tool=callgrind \
//	    /tmp/s.test -test.run '^$' -test.bench '^BenchmarkCostGetBreaker$' -test.benchtime=20000x
//
// at two counts; the difference over the difference of the counts is the
// cost of one request (issue 13's "happy GET with a circuit breaker" row).
// (valgrind does not know RDTSCP, which Go uses when the CPU has it.)

func BenchmarkCostGetPlain(b *testing.B) {
	benchGetOnce(b, retryhttp.New(retryhttp.WithTransport(memTransport{})))
}

func BenchmarkCostGetBreaker(b *testing.B) {
	benchGetOnce(b, retryhttp.New(retryhttp.WithTransport(memTransport{}),
		retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{})))
}

// benchGetOnce sends b.N GETs through rt, one request made beforehand.
func benchGetOnce(b *testing.B, rt http.RoundTripper) {
	req, err := http.NewRequest(http.MethodGet, "http://example.test/", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		res.Body.Close()
	}
}

// BenchmarkBreakerParallel sends GETs to one host from all the
// benchmark's goroutines (b.RunParallel: GOMAXPROCS of them), directly,
// through a Transport, and through a Transport with a circuit breaker: a
// closed circuit takes no lock, so the last should scale as the second
// does.
func BenchmarkBreakerParallel(b *testing.B) {
	for _, tr := range []struct {
		name string
		rt   http.RoundTripper
	}{
		{"bare", memTransport{}},
		{"retryhttp", retryhttp.New(retryhttp.WithTransport(memTransport{}))},
		{"breaker", retryhttp.New(retryhttp.WithTransport(memTransport{}),
			retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{}))},
	} {
		b.Run(tr.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				req, err := http.NewRequest(http.MethodGet, "http://example.test/", nil)
				if err != nil {
					b.Error(err)
					return
				}
				for pb.Next() {
					res, err := tr.rt.RoundTrip(req)
					if err != nil {
						b.Error(err)
						return
					}
					res.Body.Close()
				}
			})
		})
	}
}
