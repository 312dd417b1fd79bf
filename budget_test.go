package retryhttp_test

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
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

// getMany sends n GETs to url from workers goroutines.
func getMany(t testing.TB, c *http.Client, url string, n, workers int) {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				testkit.Get(t, c, url)
			}
		}()
	}
	wg.Wait()
}

func TestBudgetBucketArithmetic(t *testing.T) {
	const u = "http://example.com/"
	b := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{})

	for i := range 10 {
		require.True(t, budgetWithdraw(b, u), "retry %d of a fresh budget", i+1)
	}
	require.False(t, budgetWithdraw(b, u), "the 11th retry in a row")
	require.False(t, budgetWithdraw(b, u), "refusals take nothing and give nothing")

	for range 9 {
		budgetDeposit(b, u, http.StatusOK)
	}
	assert.InDelta(t, 0.9, budgetTokens(b, u), 1e-9)
	require.False(t, budgetWithdraw(b, u), "0.9 tokens are not a retry")
	budgetDeposit(b, u, http.StatusNotFound) // 4xx: the server answers
	require.True(t, budgetWithdraw(b, u), "ten successes make one retry")
	assert.InDelta(t, 0, budgetTokens(b, u), 1e-9)

	for range 1000 {
		budgetDeposit(b, u, http.StatusOK)
	}
	assert.InDelta(t, 10, budgetTokens(b, u), 1e-9, "never above capacity")
}

func TestBudgetWhatDeposits(t *testing.T) {
	tests := []struct {
		name   string
		give   int
		header string // a Retry-After value, if any
		want   bool
	}{
		{name: "200", give: 200, want: true},
		{name: "204", give: 204, want: true},
		{name: "304", give: 304, want: true},
		{name: "404", give: 404, want: true},
		{name: "409", give: 409, want: true},
		{name: "429", give: 429, want: false},
		{name: "400 with Retry-After", give: 400, header: "1", want: false},
		{name: "200 with Retry-After", give: 200, header: "1", want: true},
		{name: "500", give: 500, want: false},
		{name: "503", give: 503, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
				if tt.header != "" {
					w.Header().Set("Retry-After", tt.header)
				}
				w.WriteHeader(tt.give)
			})
			// Empty the host's bucket of one token, then send one attempt
			// through a transport sharing the budget: a success refills it.
			b := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Capacity: 1, Ratio: 1})
			require.True(t, budgetWithdraw(b, srv.URL))
			c := testkit.NewClient(t, retryhttp.WithRetryBudget(b), retryhttp.WithMaxRetries(0))
			testkit.Get(t, c, srv.URL)
			assert.Equal(t, tt.want, budgetTokens(b, srv.URL) == 1)
		})
	}
}

func TestBudgetOptionsInvalidMeanDefault(t *testing.T) {
	tests := []struct {
		name        string
		give        retryhttp.RetryBudgetOptions
		wantRetries int     // retries allowed in a row from fresh
		wantRefill  float64 // tokens after 10 successes from empty
	}{
		{name: "zero", give: retryhttp.RetryBudgetOptions{}, wantRetries: 10, wantRefill: 1},
		{name: "negative", give: retryhttp.RetryBudgetOptions{Ratio: -1, Capacity: -5, MaxHosts: -1}, wantRetries: 10, wantRefill: 1},
		{name: "NaN", give: retryhttp.RetryBudgetOptions{Ratio: math.NaN()}, wantRetries: 10, wantRefill: 1},
		{name: "Inf", give: retryhttp.RetryBudgetOptions{Ratio: math.Inf(1)}, wantRetries: 10, wantRefill: 1},
		{name: "custom", give: retryhttp.RetryBudgetOptions{Ratio: 0.5, Capacity: 3}, wantRetries: 3, wantRefill: 3},
		{name: "ratio above capacity", give: retryhttp.RetryBudgetOptions{Ratio: 100, Capacity: 2}, wantRetries: 2, wantRefill: 2},
		{name: "tiny ratio", give: retryhttp.RetryBudgetOptions{Ratio: 1e-12, Capacity: 1}, wantRetries: 1, wantRefill: 10e-6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const u = "http://example.com/"
			b := retryhttp.NewRetryBudget(tt.give)
			n := 0
			for budgetWithdraw(b, u) {
				n++
			}
			assert.Equal(t, tt.wantRetries, n)
			for range 10 {
				budgetDeposit(b, u, 200)
			}
			assert.InDelta(t, tt.wantRefill, budgetTokens(b, u), 1e-9)
		})
	}
}

func TestBudgetSeparatesSchemesAndPorts(t *testing.T) {
	b := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Capacity: 1})
	require.True(t, budgetWithdraw(b, "http://example.com/"))
	assert.False(t, budgetWithdraw(b, "http://example.com:80/other"), "same host, default port spelled out")
	assert.True(t, budgetWithdraw(b, "https://example.com/"), "another scheme")
	assert.True(t, budgetWithdraw(b, "http://example.com:8080/"), "another port")
	assert.True(t, budgetWithdraw(b, "http://example.org/"), "another host")
}

func TestBudgetMaxHosts(t *testing.T) {
	tests := []struct {
		name string
		give int
		want int
	}{
		{name: "default", give: 0, want: 1024},
		{name: "100", give: 100, want: 100},
		{name: "fewer than shards", give: 5, want: 5},
		{name: "one", give: 1, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A new host whose shard is empty is added even when the map
			// is full: at most one more per shard.
			bound := tt.want + min(32, tt.want) - 1
			b := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{MaxHosts: tt.give})
			for i := range 10_000 {
				budgetWithdraw(b, fmt.Sprintf("http://host-%d.example/", i))
				if i < tt.want {
					// Regression: shards evicted at MaxHosts/shards each,
					// long before the map held MaxHosts hosts.
					require.Equal(t, i+1, budgetHosts(b), "no eviction before MaxHosts")
				}
				if i%100 == 0 {
					require.LessOrEqual(t, budgetHosts(b), bound)
				}
			}
			assert.LessOrEqual(t, budgetHosts(b), bound)
			assert.GreaterOrEqual(t, budgetHosts(b), tt.want)
		})
	}
}

func TestBudgetEvictedHostStartsFull(t *testing.T) {
	b := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{MaxHosts: 1, Capacity: 1})
	require.True(t, budgetWithdraw(b, "http://a.example/"))
	require.False(t, budgetWithdraw(b, "http://a.example/"))
	require.True(t, budgetWithdraw(b, "http://b.example/"), "b evicts a")
	assert.Equal(t, 1, budgetHosts(b))
	assert.True(t, budgetWithdraw(b, "http://a.example/"), "an evicted host starts again full")
}

func TestBudgetDeadBackend(t *testing.T) {
	srv := testkit.DeadServer(t)
	// The parked retries wait out MaxWait in microseconds (onFakeTime).
	c := testkit.NewClient(t, testkit.OnFakeTime())

	const requests = 2000
	getMany(t, c, srv.URL, requests, 8)

	hits := srv.Attempts.Load()
	t.Logf("dead backend, %d GETs, 8 goroutines, one Transport with the default budget: %d attempts = %.4f× (without a budget: %d = 4×)",
		requests, hits, float64(hits)/requests, 4*requests)
	// The first attempts, plus at most the ten retries of a full bucket
	// (those decided before ten failures in a row were seen: the later
	// ones park, token or not), plus the probes of the parked retries
	// until the host has had no success for MaxWait; from then on, nothing
	// is parked.
	assert.GreaterOrEqual(t, hits, int64(requests))
	assert.LessOrEqual(t, hits, int64(requests+retryhttp.DefaultRetryBudgetCapacity+testkit.MaxProbes))
}

func TestBudgetDeadBackendParkingOff(t *testing.T) {
	srv := testkit.DeadServer(t)
	c := testkit.NewClient(t, testkit.NoParking(retryhttp.RetryBudgetOptions{}))
	const requests = 2000
	getMany(t, c, srv.URL, requests, 8)
	assert.Equal(t, int64(requests+retryhttp.DefaultRetryBudgetCapacity), srv.Attempts.Load(),
		"the first attempts, plus the ten retries of a full bucket")
}

func TestBudgetIsolatedFailuresAllRetried(t *testing.T) {
	srv := testkit.FailOnceServer(t)
	c := testkit.NewClient(t)

	for i := range 10 {
		assert.Equal(t, http.StatusOK, testkit.Get(t, c, fmt.Sprintf("%s/%d", srv.URL, i)), "request %d", i)
	}
	assert.EqualValues(t, 20, srv.Attempts.Load(), "every failure retried once")
}

func TestBudgetFreshTransportRetriesLikeV1(t *testing.T) {
	// Code written for justinrixx/retryhttp v1 sees 3 retries per failing
	// request, for the first three dead requests (9 retries of 10 tokens).
	srv := testkit.DeadServer(t)
	c := testkit.NewClient(t)
	for i := range 3 {
		before := srv.Attempts.Load()
		assert.Equal(t, http.StatusServiceUnavailable, testkit.Get(t, c, srv.URL))
		assert.EqualValues(t, 4, srv.Attempts.Load()-before, "request %d", i+1)
	}
}

// TestBudgetSteadyState: a host failing a fifth of its requests at random,
// whatever the load. Retries that succeed give their tokens back, so they
// flow as without a budget; when the failures ask the client to back off
// (Retry-After), the retries are the bucket's: a tenth of the successes.
func TestBudgetSteadyState(t *testing.T) {
	const (
		requests = 5000
		failure  = 0.2
	)
	unbudgeted := failure + failure*failure + failure*failure*failure
	tests := []struct {
		name       string
		retryAfter string
		atLeast    float64 // retries per request
		atMost     float64
	}{
		{"retries that pay", "", 0.9 * unbudgeted, unbudgeted * 1.1},
		// Ratio per request the host answers (every first attempt, and the
		// successful retries), and the bucket's starting tokens.
		{"Retry-After", "1", 0.05, retryhttp.DefaultRetryBudgetRatio*(1+failure) + float64(retryhttp.DefaultRetryBudgetCapacity)/requests},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			rnd := rand.New(rand.NewPCG(1, 2))
			srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
				mu.Lock()
				fail := rnd.Float64() < failure
				mu.Unlock()
				if fail {
					if tt.retryAfter != "" {
						w.Header().Set("Retry-After", tt.retryAfter)
					}
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				_, _ = io.WriteString(w, "ok")
			})
			// The bucket alone; TestParkedSteadyFailures has parking. A
			// Retry-After is waited in full: on a fake clock.
			c := testkit.NewClient(t, testkit.NoParking(retryhttp.RetryBudgetOptions{}),
				retryhttp.WithClock(retryhttptest.NewClock(time.Now())))

			getMany(t, c, srv.URL, requests, 8)

			retries := srv.Attempts.Load() - requests
			ratio := float64(retries) / requests
			t.Logf("%.0f%% failures, %d requests: %d retries = %.4f of first attempts (without a budget: ~%.3f)",
				failure*100, requests, retries, ratio, unbudgeted)
			assert.LessOrEqual(t, ratio, tt.atMost)
			assert.GreaterOrEqual(t, ratio, tt.atLeast)
		})
	}
}

func TestBudgetRecovers(t *testing.T) {
	var healthy atomic.Bool
	srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		if !healthy.Load() || r.URL.Path == "/flaky" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	c := testkit.NewClient(t, testkit.OnFakeTime())

	// Dead: the bucket empties.
	for range 10 {
		testkit.Get(t, c, srv.URL)
	}
	before := srv.Attempts.Load()
	testkit.Get(t, c, srv.URL+"/flaky")
	require.EqualValues(t, 1, srv.Attempts.Load()-before, "no token left: no retry")

	// Healthy: 100 successes refill ten tokens.
	healthy.Store(true)
	for range 100 {
		require.Equal(t, http.StatusOK, testkit.Get(t, c, srv.URL))
	}
	before = srv.Attempts.Load()
	testkit.Get(t, c, srv.URL+"/flaky")
	assert.EqualValues(t, 4, srv.Attempts.Load()-before, "retried again after recovery")
}

func TestBudgetShared(t *testing.T) {
	srv := testkit.DeadServer(t)
	b := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{NoParking: true})
	c1 := testkit.NewClient(t, retryhttp.WithRetryBudget(b))
	c2 := testkit.NewClient(t, retryhttp.WithRetryBudget(b))

	for range 5 {
		testkit.Get(t, c1, srv.URL)
	}
	require.EqualValues(t, 15, srv.Attempts.Load(), "c1 spent the ten tokens")
	testkit.Get(t, c2, srv.URL)
	assert.EqualValues(t, 16, srv.Attempts.Load(), "c2 shares the empty bucket: no retry")
}

func TestBudgetOptOut(t *testing.T) {
	srv := testkit.DeadServer(t)
	c := testkit.NewClient(t, retryhttp.WithRetryBudget(nil))

	getMany(t, c, srv.URL, 100, 4)
	assert.EqualValues(t, 400, srv.Attempts.Load(), "every request retried three times")
}

func TestBudgetPerHost(t *testing.T) {
	a, b := testkit.DeadServer(t), testkit.DeadServer(t)
	c := testkit.NewClient(t, testkit.NoParking(retryhttp.RetryBudgetOptions{}))

	for range 10 {
		testkit.Get(t, c, a.URL)
	}
	require.EqualValues(t, 20, a.Attempts.Load(), "a's bucket is empty")
	testkit.Get(t, c, b.URL)
	assert.EqualValues(t, 4, b.Attempts.Load(), "b keeps its own")
}

func TestBudgetRefusalJoinsTheNetError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + ln.Addr().String() + "/"
	require.NoError(t, ln.Close())
	c := testkit.NewClient(t, testkit.NoParking(retryhttp.RetryBudgetOptions{Capacity: 1}))

	_, err = c.Get(url) // one retry, then refused
	require.Error(t, err)
	assert.ErrorIs(t, err, retryhttp.ErrRetryBudgetExhausted)
	assert.NotErrorIs(t, err, retryhttp.ErrRetriesExhausted)
	var opErr *net.OpError
	assert.ErrorAs(t, err, &opErr)
	assert.Contains(t, err.Error(), "retryhttp: retry budget exhausted: ")

	_, err = c.Get(url) // refused at once
	assert.ErrorIs(t, err, retryhttp.ErrRetryBudgetExhausted)
	assert.ErrorAs(t, err, &opErr)
}

func TestBudgetRefusalReturnsTheResponse(t *testing.T) {
	srv := testkit.DeadServer(t)
	c := testkit.NewClient(t, testkit.NoParking(retryhttp.RetryBudgetOptions{Capacity: 1}))
	testkit.Get(t, c, srv.URL) // spends the token

	res, err := c.Get(srv.URL)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	assert.Equal(t, "down", string(body))
	assert.EqualValues(t, 3, srv.Attempts.Load())
}

// sharedResTransport answers every request in memory with one shared response.
type sharedResTransport struct{ res http.Response }

//go:noinline
func (m *sharedResTransport) RoundTrip(*http.Request) (*http.Response, error) {
	res := m.res
	return &res, nil
}

func TestBudgetHappyPathAllocatesNothing(t *testing.T) {
	base := &sharedResTransport{res: http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}}
	req, err := http.NewRequest(http.MethodGet, "http://example.com/", nil)
	require.NoError(t, err)
	// A host whose bucket is far from full: every GET deposits with a CAS.
	refilling := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Capacity: 1000})
	for budgetWithdraw(refilling, req.URL.String()) {
	}
	zero := &retryhttp.Transport{}
	retryhttp.SetBase(zero, base)

	var rt http.RoundTripper = base
	bare := testing.AllocsPerRun(200, func() { _, _ = rt.RoundTrip(req) })
	tests := []struct {
		name string
		give http.RoundTripper
	}{
		{name: "zero Transport, default budget, no bucket", give: zero},
		{name: "shared budget, bucket refilling", give: retryhttp.New(retryhttp.WithTransport(base), retryhttp.WithRetryBudget(refilling))},
		{name: "budget off", give: retryhttp.New(retryhttp.WithTransport(base), retryhttp.WithRetryBudget(nil))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _ = tt.give.RoundTrip(req) // makes the default budget
			got := testing.AllocsPerRun(200, func() { _, _ = tt.give.RoundTrip(req) })
			assert.LessOrEqual(t, got, bare, "allocations per GET: %v through the transport, %v bare", got, bare)
		})
	}
	assert.Less(t, budgetTokens(refilling, req.URL.String()), 1000.0, "the bucket was refilling throughout")
}

func TestBudgetRefusalsKeepTheConnection(t *testing.T) {
	// Responses the caller does not see (retried ones) are drained and
	// closed, and the one a refused retry returns is read by the caller:
	// every request reuses one connection.
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, strings.Repeat("x", 1000))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c := testkit.NewClient(t, testkit.OnFakeTime())
	for range 20 {
		testkit.Get(t, c, srv.URL)
	}
	assert.EqualValues(t, 1, conns.Load(), "one connection, reused")
}

func TestErrRetryBudgetExhaustedIsDistinct(t *testing.T) {
	assert.False(t, errors.Is(retryhttp.ErrRetryBudgetExhausted, retryhttp.ErrRetriesExhausted))
	assert.True(t, strings.HasPrefix(retryhttp.ErrRetryBudgetExhausted.Error(), "retryhttp: "))
}

func TestBudgetUnsentRetryCostsNothing(t *testing.T) {
	// A Retry-After beyond WithMaxDelay ends the request without a retry:
	// no token is spent on it.
	srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	b := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{})
	c := &http.Client{Transport: retryhttp.New(retryhttp.WithRetryBudget(b))}
	t.Cleanup(c.CloseIdleConnections)
	for range 20 {
		assert.Equal(t, http.StatusServiceUnavailable, testkit.Get(t, c, srv.URL))
	}
	assert.EqualValues(t, 20, srv.Attempts.Load())
	assert.InDelta(t, 10, budgetTokens(b, srv.URL), 1e-9)
}

// Regression: a healthy server that closes keep-alive connections as they
// are reused made requests fail with "broken pipe" or resets; their retries
// spent the budget, which ran dry, and requests to a server that never
// failed were refused. A retry after a lost connection that succeeds is now
// refunded; one that fails again is not, so a server that breaks every
// connection still gets no more than the budget's retries.
func TestBudgetLostConnectionRetriesRefundedOnSuccess(t *testing.T) {
	t.Run("server closing idle connections", func(t *testing.T) {
		const n = 500
		srv := testkit.StartServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			_, _ = io.WriteString(w, "ok")
		}, false, testkit.CloseIdle)
		base := &http.Transport{}
		t.Cleanup(base.CloseIdleConnections)
		counted := &testkit.CountingTransport{RoundTripper: base}
		// A lean budget, which successes refill slowly: without refunds,
		// the lost connections (several percent of requests here) would
		// exhaust it.
		lean := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Ratio: 0.01})
		tr := testkit.NewTransport(t, retryhttp.WithTransport(counted), testkit.NoDelay, retryhttp.WithRetryBudget(lean))
		body := strings.Repeat("x", 4<<10)
		for i := range n {
			// A PUT without GetBody: net/http cannot replay it itself.
			req, err := http.NewRequest(http.MethodPut, srv.URL, io.NopCloser(strings.NewReader(body)))
			require.NoError(t, err)
			res, err := tr.RoundTrip(req)
			require.NoError(t, err, "request %d", i)
			assert.Equal(t, "ok", testkit.ReadAll(t, res))
		}
		assert.Equal(t, int64(n), srv.Attempts.Load())
		t.Logf("%d requests, %d attempts", n, counted.Attempts.Load())
	})
	t.Run("server resetting every connection", func(t *testing.T) {
		const n = 200
		srv := testkit.NewRawServer(t, func(int64) testkit.Reply { return testkit.ReplyReset })
		base := &http.Transport{}
		t.Cleanup(base.CloseIdleConnections)
		counted := &testkit.CountingTransport{RoundTripper: base}
		tr := testkit.NewTransport(t, retryhttp.WithTransport(counted), testkit.NoDelay, testkit.NoParking(retryhttp.RetryBudgetOptions{}))
		for range n {
			req, err := http.NewRequest(http.MethodGet, srv.URL(), nil)
			require.NoError(t, err)
			_, err = tr.RoundTrip(req)
			require.Error(t, err)
		}
		assert.Equal(t, int64(n+retryhttp.DefaultRetryBudgetCapacity), counted.Attempts.Load(),
			"the budget's 10 retries, then none: failed retries are not refunded")
	})
}

func TestDefaultBudgetSharedByTransports(t *testing.T) {
	// Transports made without WithRetryBudget, one per call say, share the
	// process's default budget, as http.DefaultTransport shares
	// connections; an explicit budget is a Transport's own.
	a, b := retryhttp.New(), &retryhttp.Transport{}
	own := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{})
	c := retryhttp.New(retryhttp.WithRetryBudget(own))
	require.NotNil(t, retryhttp.DefaultBudgetOf(a))
	assert.Same(t, retryhttp.DefaultRetryBudget(), retryhttp.DefaultBudgetOf(a), "the one DefaultRetryBudget returns")
	assert.Same(t, retryhttp.DefaultBudgetOf(a), retryhttp.DefaultBudgetOf(b))
	assert.Same(t, own, retryhttp.DefaultBudgetOf(c))
	assert.Nil(t, retryhttp.DefaultBudgetOf(retryhttp.New(retryhttp.WithRetryBudget(nil))))

	// A token spent through one is gone for the other.
	srv := testkit.DeadServer(t)
	require.True(t, budgetWithdraw(retryhttp.DefaultBudgetOf(a), srv.URL))
	assert.InDelta(t, retryhttp.DefaultRetryBudgetCapacity-1, budgetTokens(retryhttp.DefaultBudgetOf(b), srv.URL), 1e-9)
	assert.InDelta(t, retryhttp.DefaultRetryBudgetCapacity, budgetTokens(own, srv.URL), 1e-9)
}

// TestBudgetTokenTakenWhenSent: a retry takes its token when it is sent,
// after its delay, so that the bucket bounds the retries sent and not those
// that wait. If the token is gone when its delay ends, the retry of a host
// that answers fast is sent without one (see TestBudgetHostsParked for a
// host in an outage, where it parks). A delay longer than MaxWait, or a
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
		{name: "gone when sent, the host answers fast: sent without one", delay: 10 * time.Millisecond, bodyLen: 4, spend: true,
			wantTokens: 1, wantAttempts: 2, wantStop: retryhttp.StopRetriesExhausted},
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

// mutexBudget is the naive budget the benchmark compares with: the same
// bucket arithmetic, with every host behind one global mutex.
type mutexBudget struct {
	mu     sync.Mutex
	tokens map[string]float64
}

func (m *mutexBudget) withdraw(req *http.Request) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.tokens[req.URL.Host]
	if !ok {
		v = 10
	}
	if v < 1 {
		return false
	}
	m.tokens[req.URL.Host] = v - 1
	return true
}

func (m *mutexBudget) deposit(req *http.Request, res *http.Response) {
	if res.StatusCode >= 500 || res.StatusCode == http.StatusTooManyRequests {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.tokens[req.URL.Host]; ok {
		m.tokens[req.URL.Host] = min(v+0.1, 10)
	}
}

// BenchmarkBudgetParallel hammers one host from GOMAXPROCS goroutines and
// from at least 64, with one withdrawal for every nine deposits (about the
// balance of a host that fails 10% of its requests): the sharded, atomic
// RetryBudget against the naive one behind a global mutex.
func BenchmarkBudgetParallel(b *testing.B) {
	ok := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}}
	impls := []struct {
		name     string
		withdraw func(*http.Request) bool
		deposit  func(*http.Request, *http.Response)
	}{
		func() (s struct {
			name     string
			withdraw func(*http.Request) bool
			deposit  func(*http.Request, *http.Response)
		}) {
			rb := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{})
			s.name = "sharded-atomic"
			s.withdraw = func(r *http.Request) bool { return retryhttp.WithdrawFor(rb, r) }
			s.deposit = func(r *http.Request, res *http.Response) { retryhttp.DepositFor(rb, r, res) }
			return s
		}(),
		func() (s struct {
			name     string
			withdraw func(*http.Request) bool
			deposit  func(*http.Request, *http.Response)
		}) {
			mb := &mutexBudget{tokens: map[string]float64{}}
			s.name = "global-mutex"
			s.withdraw, s.deposit = mb.withdraw, mb.deposit
			return s
		}(),
	}
	procs := runtime.GOMAXPROCS(0)
	for _, goroutines := range []int{procs, max(64, procs)} {
		for _, impl := range impls {
			b.Run(fmt.Sprintf("%s/goroutines=%d", impl.name, goroutines), func(b *testing.B) {
				b.SetParallelism((goroutines + procs - 1) / procs)
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					req, _ := http.NewRequest(http.MethodGet, "http://backend.example/", nil)
					for i := 0; pb.Next(); i++ {
						if i%10 == 0 {
							impl.withdraw(req)
						} else {
							impl.deposit(req, ok)
						}
					}
				})
			})
		}
	}
}

// TestZeroRetryBudgetIsTheDefaults: a RetryBudget not made by
// NewRetryBudget (&retryhttp.RetryBudget{}) is a budget with the defaults,
// made on first use: it panicked with a nil dereference on the first
// request.
func TestZeroRetryBudgetIsTheDefaults(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	b := &retryhttp.RetryBudget{}
	rt := retryhttp.New(retryhttp.WithRetryBudget(b), retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 }))
	defer rt.CloseIdleConnections()
	res, err := (&http.Client{Transport: rt}).Get(srv.URL)
	require.NoError(t, err)
	assert.Equal(t, "ok", testkit.ReadAll(t, res))
	assert.Equal(t, int32(2), n.Load(), "retried once")
	hosts := 0
	for h := range b.Hosts() {
		hosts++
		assert.Equal(t, retryhttp.DefaultRetryBudgetCapacity, h.Capacity)
	}
	assert.Equal(t, 1, hosts, "the budget records its host")
}
