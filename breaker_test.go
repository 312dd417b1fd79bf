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

// transitions records the calls of OnStateChange.
type transitions struct {
	mu  sync.Mutex
	got []string
}

func (tr *transitions) record(host string, from, to retryhttp.CircuitState) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.got = append(tr.got, from.String()+"→"+to.String())
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
	c := testkit.NewClient(t, testkit.OnFakeTime(), retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{OnStateChange: changes.record}))

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
				retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{OnStateChange: changes.record}))
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
	c := testkit.NewClient(t, retryhttp.WithRetryBudget(nil), retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{
		MinRequests: 4, OnStateChange: changes.record,
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
	c := testkit.NewClient(t, retryhttp.WithClock(clock), retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{
		MinRequests: 5, OpenTimeout: 50 * time.Millisecond, OnStateChange: changes.record,
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
		retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{
			MinRequests: 1, OpenTimeout: 50 * time.Millisecond, OnStateChange: changes.record,
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
	c := testkit.NewClient(t, testkit.OnFakeTime(), retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{
		MinRequests: 20, OnStateChange: changes.record,
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
	// gobreaker calls OnStateChange under its lock; the transport calls the
	// callback after it, so a callback that uses the same circuit does not
	// deadlock.
	srv := testkit.DeadServer(t)
	var c *http.Client
	var fromCallback atomic.Value
	c = testkit.NewClient(t, retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{
		MinRequests: 1,
		OnStateChange: func(host string, from, to retryhttp.CircuitState) {
			_, err := try(c, srv.URL)
			fromCallback.Store(err)
		},
	}))
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
	c := testkit.NewClient(t, retryhttp.WithMaxRetries(0), retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{
		FailureRatio: -1, Window: -time.Second, OpenTimeout: -time.Second, MaxHosts: -1,
		OnStateChange: changes.record,
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
