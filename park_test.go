package retryhttp_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/inbound"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// waitParked waits until n retries are parked on url's host.
func waitParked(t *testing.T, b *retryhttp.RetryBudget, url string, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, _, parked := budgetPacing(b, url)
		return parked >= n
	}, 30*time.Second, time.Millisecond)
}

func TestParkedRetriesSurviveABlip(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	b := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Capacity: 1, MaxWait: time.Minute})
	var ev testkit.ParkEvents
	c := testkit.NewClient(t, retryhttp.WithRetryBudget(b), ev.Option())

	const n = 20
	statuses := make(chan int, n)
	for range n {
		go func() { statuses <- testkit.Get(t, c, srv.URL) }()
	}
	// The one token goes to one retry, which fails; every other failed
	// request parks. Then the host comes back.
	waitParked(t, b, srv.URL, n-1)
	down.Store(false)
	for range n {
		assert.Equal(t, http.StatusOK, <-statuses)
	}
	// Every request failed once during the outage and was retried once
	// after it (the retry that took the token may have failed once more,
	// and parked too).
	assert.LessOrEqual(t, srv.Attempts.Load(), int64(2*n+1))
	assert.Equal(t, ev.Count(retryhttp.ParkParked), ev.Count(retryhttp.ParkReleased), "every parked retry released")
	assert.GreaterOrEqual(t, ev.Count(retryhttp.ParkParked), n-1)
	assert.Zero(t, ev.Count(retryhttp.ParkDropped))
	_, inFlight, parked := budgetPacing(b, srv.URL)
	assert.Zero(t, inFlight+parked, "every slot given back")
}

func TestParkedDeadHostAboutOneX(t *testing.T) {
	srv := testkit.DeadServer(t)
	b := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{MaxWait: 300 * time.Millisecond})
	var ev testkit.ParkEvents
	c := testkit.NewClient(t, retryhttp.WithRetryBudget(b), ev.Option())

	const requests = 400
	getMany(t, c, srv.URL, requests, 8)
	// The first attempts, at most the bucket's ten retries (those decided
	// before the host was seen failing ten times in a row: after that they
	// park, token or not), and at most a probe per probeQuiet while the host
	// could still be waited for.
	hits := srv.Attempts.Load()
	t.Logf("dead host, %d GETs: %d attempts = %.3f×", requests, hits, float64(hits)/requests)
	assert.GreaterOrEqual(t, hits, int64(requests))
	assert.LessOrEqual(t, hits, int64(requests+10+2))
	// Once the host has had no success for MaxWait, nothing parks: the
	// late requests are refused at once.
	before := ev.Count(retryhttp.ParkParked)
	getMany(t, c, srv.URL, 50, 8)
	assert.Equal(t, before, ev.Count(retryhttp.ParkParked))
}

func TestParkedCancellationReturnsAtOnce(t *testing.T) {
	srv := testkit.DeadServer(t)
	b := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Capacity: 1, MaxWait: time.Hour})
	c := testkit.NewClient(t, retryhttp.WithRetryBudget(b))
	testkit.Get(t, c, srv.URL) // spends the token

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		res, err := c.Do(req)
		if res != nil {
			res.Body.Close()
		}
		done <- err
	}()
	waitParked(t, b, srv.URL, 1)
	cancel()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled parked retry still waits")
	}
	_, _, parked := budgetPacing(b, srv.URL)
	assert.Zero(t, parked)
}

func TestParkedWaitBounds(t *testing.T) {
	tests := []struct {
		name     string
		opts     retryhttp.RetryBudgetOptions
		deadline time.Duration // of the request's context; 0: none
		attempt  time.Duration // WithAttemptTimeout
		atLeast  time.Duration // the request's time, at least: the bound's
	}{
		{name: "MaxWait", opts: retryhttp.RetryBudgetOptions{MaxWait: 300 * time.Millisecond}, atLeast: 300 * time.Millisecond},
		{
			name: "deadline less one attempt timeout", opts: retryhttp.RetryBudgetOptions{MaxWait: time.Hour},
			deadline: 3 * time.Second, attempt: 1500 * time.Millisecond, atLeast: 1500 * time.Millisecond,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The host fails every request but those of the background
			// traffic, half of which succeed: the gate stays closed, and
			// the host is not dead.
			var n atomic.Int64
			srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/background" && n.Add(1)%2 == 0 {
					_, _ = io.WriteString(w, "ok")
					return
				}
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, "down")
			})
			tt.opts.Capacity = 1
			b := retryhttp.NewRetryBudget(tt.opts)
			var ev testkit.ParkEvents
			c := testkit.NewClient(t, retryhttp.WithRetryBudget(b), retryhttp.WithAttemptTimeout(tt.attempt), ev.Option())
			BudgetSpend(b, srv.URL)

			ctx := context.Background()
			start := time.Now()
			if tt.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.deadline)
				defer cancel()
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			require.NoError(t, err)
			type result struct {
				res *http.Response
				err error
			}
			done := make(chan result, 1)
			go func() {
				res, err := c.Do(req)
				done <- result{res, err}
			}()
			// A host that never answered is in an outage: the retry parks.
			// Then the host answers half of the background traffic: not
			// dead, and the gate stays closed.
			require.Eventually(t, func() bool { return ev.Count(retryhttp.ParkParked) == 1 }, 10*time.Second, time.Millisecond)
			sustainTraffic(t, b, srv.URL+"/background")
			r := <-done
			res, err := r.res, r.err
			elapsed := time.Since(start)
			require.NoError(t, err, "the wait expired before the deadline: the last response, as it was")
			assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
			assert.Equal(t, "down", testkit.ReadAll(t, res))
			if tt.deadline > 0 {
				assert.NoError(t, ctx.Err(), "returned before the deadline")
			}
			require.Len(t, ev.Dropped, 1)
			assert.Equal(t, retryhttp.StopBudgetRefused, ev.Dropped[0].Reason)
			assert.GreaterOrEqual(t, elapsed, tt.atLeast)
		})
	}
}

func TestParkedPerHostLimit(t *testing.T) {
	srv := testkit.DeadServer(t)
	b := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Capacity: 1, MaxParked: 3, MaxWait: 300 * time.Millisecond})
	var ev testkit.ParkEvents
	c := testkit.NewClient(t, retryhttp.WithRetryBudget(b), ev.Option())
	getMany(t, c, srv.URL, 40, 10)
	assert.LessOrEqual(t, ev.MaxParked, 3)
	assert.Positive(t, ev.Count(retryhttp.ParkParked))
}

func TestParkedExpiredWaitMarksPushback(t *testing.T) {
	dead := testkit.DeadServer(t)
	b := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Capacity: 1, MaxWait: 100 * time.Millisecond})
	tr := testkit.NewTransport(t, testkit.NoDelay, retryhttp.WithRetryBudget(b))
	BudgetSpend(b, dead.URL)
	front := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		inbound.Pushback(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, dead.URL, nil)
			res, err := tr.RoundTrip(req)
			if err != nil {
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			res.Body.Close()
			w.WriteHeader(res.StatusCode)
		})).ServeHTTP(w, r)
	})
	res, err := http.Get(front.URL)
	require.NoError(t, err)
	testkit.ReadAll(t, res)
	assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	assert.True(t, retryhttp.HasRetrySignal(res.Header), "an expired wait is a give-up")
}

// sustainTraffic sends first attempts to url, without retries, through a
// transport sharing b, until the test ends, and waits until the host's gate
// judges by them: gateSample of them answered (url's host fails a fifth or
// more of them, so the gate is then closed, and no probe is released).
func sustainTraffic(t *testing.T, b *retryhttp.RetryBudget, url string) {
	c := testkit.NewClient(t, retryhttp.WithRetryBudget(b), retryhttp.WithMaxRetries(0))
	stop := make(chan struct{})
	done := make(chan struct{})
	var answered atomic.Int32
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
				if res, err := c.Get(url); err == nil {
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					answered.Add(1)
				}
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	require.Eventually(t, func() bool { return answered.Load() >= gateSample }, 10*time.Second, time.Millisecond)
}

// gateSample is the number of recent first attempts a host's gate needs to
// judge by their share of failures (internal/budget/pacer.go,
// gateMinSamples).
const gateSample = 20

// BudgetSpend empties the bucket of rawURL's host.
func BudgetSpend(b *retryhttp.RetryBudget, rawURL string) {
	for budgetWithdraw(b, rawURL) {
	}
}

func TestParkedCircuitOpenFailsThemAtOnce(t *testing.T) {
	srv := testkit.DeadServer(t)
	b := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Capacity: 1, MaxParked: 1, MaxWait: time.Hour})
	var ev testkit.ParkEvents
	c := testkit.NewClient(t, retryhttp.WithRetryBudget(b), ev.Option(), retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{
		MinRequests: 5, FailureRatio: 0.5,
	}))
	BudgetSpend(b, srv.URL)
	parked := make(chan *http.Response, 1)
	go func() {
		res, err := c.Get(srv.URL)
		assert.NoError(t, err)
		parked <- res
	}()
	waitParked(t, b, srv.URL, 1)
	// The queue is full: the others fail at once, and open the circuit.
	for range 5 {
		testkit.Get(t, c, srv.URL)
	}
	select {
	case res := <-parked:
		assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
		assert.Equal(t, "down", testkit.ReadAll(t, res))
	case <-time.After(10 * time.Second):
		t.Fatal("an open circuit left a parked retry waiting")
	}
	require.Len(t, ev.Dropped, 1)
	assert.Equal(t, retryhttp.StopCircuitOpen, ev.Dropped[0].Reason)
}

// TestParkedCircuitOpenFailsThemInADestinationBudget: the same, with the
// retry parked in a policy's own budget (a destination's), not the
// transport's.
func TestParkedCircuitOpenFailsThemInADestinationBudget(t *testing.T) {
	srv := testkit.DeadServer(t)
	own := retryhttp.NewPolicy(retryhttp.WithRetryBudget(retryhttp.NewRetryBudget(
		retryhttp.RetryBudgetOptions{Capacity: 1, MaxParked: 1, MaxWait: time.Hour})))
	var ev testkit.ParkEvents
	c := testkit.NewClient(t, retryhttp.WithPolicyFunc(func(*http.Request) *retryhttp.Policy { return own }), ev.Option(), retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{
		MinRequests: 5, FailureRatio: 0.5,
	}))
	parked := make(chan *http.Response, 1)
	go func() {
		res, err := c.Get(srv.URL) // one retry spends the token, the next parks
		assert.NoError(t, err)
		parked <- res
	}()
	require.Eventually(t, func() bool { return ev.Count(retryhttp.ParkParked) == 1 }, 30*time.Second, time.Millisecond)
	// The queue is full: the others fail at once, and open the circuit.
	for range 5 {
		testkit.Get(t, c, srv.URL)
	}
	select {
	case res := <-parked:
		assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
		assert.Equal(t, "down", testkit.ReadAll(t, res))
	case <-time.After(10 * time.Second):
		t.Fatal("an open circuit left a retry parked in a destination's budget waiting")
	}
	require.Len(t, ev.Dropped, 1)
	assert.Equal(t, retryhttp.StopCircuitOpen, ev.Dropped[0].Reason)
}

func TestParkedTenThousandBounded(t *testing.T) {
	// Each request fails its first attempt with a refused connection (a
	// port nobody listens on): cheap, and real.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + ln.Addr().String() + "/"
	require.NoError(t, ln.Close())
	b := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{MaxWait: time.Hour})
	c := testkit.NewClient(t, retryhttp.WithRetryBudget(b))

	const n = 10_000
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	goroutines := runtime.NumGoroutine()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var canceled atomic.Int64
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			res, err := c.Do(req)
			if res != nil {
				res.Body.Close()
			}
			if errors.Is(err, context.Canceled) {
				canceled.Add(1)
			}
		}()
	}
	waitParked(t, b, url, n-retryhttp.DefaultRetryBudgetCapacity)

	runtime.GC()
	var during runtime.MemStats
	runtime.ReadMemStats(&during)
	perRequest := (int64(during.HeapInuse) - int64(before.HeapInuse)) / n
	stack := (int64(during.StackInuse) - int64(before.StackInuse)) / n
	extra := runtime.NumGoroutine() - goroutines - n
	t.Logf("%d parked: %d B of heap each (request, error, waiter), %d B of the caller's goroutine stack each, %d goroutines besides the callers'",
		n, perRequest, stack, extra)
	assert.Less(t, perRequest, int64(16<<10), "heap per parked request")
	assert.Less(t, extra, 200, "no goroutine per parked retry")

	cancel()
	wg.Wait()
	// All but the few that ended on their own (their probes used up their
	// retries) were parked when cancelled, and returned.
	assert.Greater(t, canceled.Load(), int64(n-100))
	_, inFlight, parked := budgetPacing(b, url)
	assert.Zero(t, inFlight+parked)
}

// TestBudgetRetriesThatPayAreFree: a request whose retry succeeds gets back
// the token its retry took, so a host whose first attempts all fail and
// whose retries all succeed keeps a full bucket; unless the failure asked
// the client to back off (Retry-After), or the success queued at the host
// (it took far longer than the host's fastest answers): then the bucket
// stays spent. The next retries, without a token, go free to a host that
// answers in time, unless it asked to back off: those wait parked for the
// host's window.
func TestBudgetRetriesThatPayAreFree(t *testing.T) {
	tests := []struct {
		name       string
		retryAfter string        // on the failed first attempts
		slow       time.Duration // the successful retry's latency
		wantSpent  bool          // the first retry's token is not given back
		wantParks  bool          // the retries after the first, without a token
	}{
		{name: "retries that pay"},
		{name: "Retry-After", retryAfter: "0", wantSpent: true, wantParks: true},
		{name: "queued", slow: 200 * time.Millisecond, wantSpent: true},
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
			assert.Equal(t, 5, ok, "every retry succeeds, sent or released")
			assert.Equal(t, tt.wantSpent, budgetTokens(b, srv.URL) < 1, "the bucket spent")
			if tt.wantParks {
				assert.Positive(t, ev.Count(retryhttp.ParkParked), "the bucket stayed spent: the next retries park")
				assert.Equal(t, ev.Count(retryhttp.ParkParked), ev.Count(retryhttp.ParkReleased), "and the host's window releases them")
			} else {
				assert.Zero(t, ev.Count(retryhttp.ParkParked), "nothing parks")
			}
		})
	}
}

// TestParkedOnlyInAnOutage: a retry without a token is sent at once to a
// host that answers fast (load does not hurt it), and parks once the
// host's latest attempts all failed (OutageStreak of them in a row).
func TestParkedOnlyInAnOutage(t *testing.T) {
	srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ok" {
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	b := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Capacity: 1, MaxWait: 200 * time.Millisecond})
	var ev testkit.ParkEvents
	c := testkit.NewClient(t, retryhttp.WithRetryBudget(b), ev.Option(),
		retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return time.Millisecond }))
	require.Equal(t, http.StatusOK, testkit.Get(t, c, srv.URL+"/ok"))

	// The first attempt and the retry with the token fail: two in a row,
	// not an outage, and the host answers fast. The next retries go
	// without a token.
	before := srv.Attempts.Load()
	assert.Equal(t, http.StatusServiceUnavailable, testkit.Get(t, c, srv.URL))
	assert.Equal(t, int64(1+retryhttp.DefaultMaxRetries), srv.Attempts.Load()-before, "every retry sent")
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

// TestParkedJustAfterAnOutage: a retry of a failure that comes just as an
// outage ends, its delay ending with the host answering again but its
// bucket spent, parks until the host's gate opens, and succeeds; refused,
// as a host with no room is answered, it would end with the 503.
func TestParkedJustAfterAnOutage(t *testing.T) {
	var down atomic.Bool
	var failOnce atomic.Bool
	down.Store(true)
	srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		if down.Load() || r.URL.Path == "/once" && failOnce.CompareAndSwap(true, false) {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	b := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Capacity: 1})
	var ev testkit.ParkEvents
	stops := make(chan retryhttp.StopReason, 1)
	c := testkit.NewClient(t, retryhttp.WithRetryBudget(b), ev.Option(),
		retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 10 * time.Millisecond }),
		retryhttp.WithHooks(retryhttp.Hooks{OnRetryDecision: func(d retryhttp.Decision) {
			if !d.Retry && d.Attempt.Req.URL.Path == "/once" {
				stops <- d.Reason
			}
		}}))
	once := retryhttp.New(retryhttp.WithRetryBudget(b), retryhttp.WithMaxRetries(0))

	// A retry spends the bucket's one token; then an outage: ten first
	// attempts fail in a row.
	require.True(t, budgetWithdraw(b, srv.URL), "the bucket's token")
	for range 10 {
		res, err := once.RoundTrip(testkit.NewRequest(t, http.MethodGet, srv.URL+"/", nil))
		require.NoError(t, err)
		res.Body.Close()
	}
	// The host answers again; a request fails once just after.
	down.Store(false)
	res, err := once.RoundTrip(testkit.NewRequest(t, http.MethodGet, srv.URL+"/", nil))
	require.NoError(t, err)
	res.Body.Close()
	failOnce.Store(true)
	assert.Equal(t, http.StatusOK, testkit.Get(t, c, srv.URL+"/once"), "its retry parked, then succeeded")
	assert.Equal(t, retryhttp.StopSuccess, <-stops)
	assert.Equal(t, 1, ev.Count(retryhttp.ParkParked))
	assert.Equal(t, 1, ev.Count(retryhttp.ParkReleased))
}

// TestHeldFirstAttemptCircuitOpens: a first attempt held for its host's
// stated pause (WithHoldDuringPause) whose circuit opens while it waits
// ends unsent, with an error wrapping ErrCircuitOpen: it was sent to the
// open circuit's host before.
func TestHeldFirstAttemptCircuitOpens(t *testing.T) {
	var held atomic.Int64 // requests to /held that reached the server
	srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/limit":
			w.Header().Set("Retry-After", "60")
			w.WriteHeader(http.StatusTooManyRequests)
		case "/held":
			held.Add(1)
		default:
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	var ev testkit.ParkEvents
	c := testkit.NewClient(t, testkit.OwnBudget(), ev.Option(), retryhttp.WithMaxRetries(0), retryhttp.WithHoldDuringPause(true),
		retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{MinRequests: 5, FailureRatio: 0.5}))
	require.Equal(t, http.StatusTooManyRequests, testkit.Get(t, c, srv.URL+"/limit")) // a pause of 60s

	done := make(chan error, 1)
	go func() {
		res, err := c.Get(srv.URL + "/held")
		if err == nil {
			res.Body.Close()
		}
		done <- err
	}()
	require.Eventually(t, func() bool { return ev.Count(retryhttp.ParkParked) == 1 }, 10*time.Second, time.Millisecond, "held")
	// Failures the hold does not apply to open the circuit.
	free := retryhttp.SetOptions(context.Background(), retryhttp.WithHoldDuringPause(false))
	for range 5 {
		req := testkit.NewRequest(t, http.MethodGet, srv.URL+"/fail", nil).WithContext(free)
		if res, err := c.Do(req); err == nil {
			res.Body.Close()
		}
	}
	select {
	case err := <-done:
		assert.ErrorIs(t, err, retryhttp.ErrCircuitOpen)
	case <-time.After(10 * time.Second):
		t.Fatal("an open circuit left a held first attempt waiting")
	}
	assert.Zero(t, held.Load(), "never sent")
}
