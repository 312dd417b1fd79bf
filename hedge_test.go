package retryhttp_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// notHedged is how long a test holds an attempt that it expects not to be
// hedged: many hedge delays, yet a short wait for the test.
const notHedged = 150 * time.Millisecond

// newHedgeClient returns a client whose transport never waits between
// attempts, and that transport.
func newHedgeClient(t *testing.T, opts ...retryhttp.Option) (*http.Client, *retryhttp.Transport) {
	t.Helper()
	opts = append([]retryhttp.Option{retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 })}, opts...)
	tr := retryhttp.New(opts...)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}, tr
}

// allStacks returns the stacks of every goroutine.
func allStacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

func TestHedgeSlowFirstAttemptLoses(t *testing.T) {
	hs := newHedgeServer(t, slowFirst)
	c, _ := newHedgeClient(t, retryhttp.WithHedging(20*time.Millisecond, 1))

	start := time.Now()
	res, err := c.Get(hs.URL)
	elapsed := time.Since(start)
	require.NoError(t, err)

	assert.Equal(t, "attempt 2", testkit.ReadAll(t, res), "the hedge answered")
	assert.GreaterOrEqual(t, elapsed, 20*time.Millisecond, "the hedge waited for its delay")
	assert.Less(t, elapsed, 2*time.Second, "far sooner than the 10s slow attempt")
	hs.waitCancelled(t, 1)
	assert.EqualValues(t, 2, hs.hits.Load())
}

func TestHedgeRetryableFailureLaunchesNextAtOnce(t *testing.T) {
	hs := newHedgeServer(t, func(_ *hedgeServer, n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "attempt %d", n)
	})
	c, _ := newHedgeClient(t, retryhttp.WithHedging(5*time.Second, 1))

	start := time.Now()
	res, err := c.Get(hs.URL)
	elapsed := time.Since(start)
	require.NoError(t, err)

	assert.Equal(t, "attempt 2", testkit.ReadAll(t, res))
	assert.Less(t, elapsed, 2*time.Second, "no wait for the 5s hedge delay")
	assert.EqualValues(t, 2, hs.hits.Load())
}

func TestHedgeAttemptsBounded(t *testing.T) {
	tests := []struct {
		name     string
		opts     []retryhttp.Option
		wantHits int
	}{
		{name: "maxHedges 2: three in flight", opts: []retryhttp.Option{retryhttp.WithHedging(10*time.Millisecond, 2)}, wantHits: 3},
		{
			name:     "maxRetries 1 bounds maxHedges 5",
			opts:     []retryhttp.Option{retryhttp.WithHedging(10*time.Millisecond, 5), retryhttp.WithMaxRetries(1)},
			wantHits: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs := newHedgeServer(t, alwaysSlow)
			c, _ := newHedgeClient(t, tt.opts...)
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL, nil)
			require.NoError(t, err)

			start := time.Now()
			res, err := c.Do(req)
			elapsed := time.Since(start)

			require.Nil(t, res)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Less(t, elapsed, 2*time.Second, "ended by the 500ms deadline")
			want := make([]int, tt.wantHits)
			for i := range want {
				want[i] = i + 1
			}
			hs.waitCancelled(t, want...)
			assert.EqualValues(t, tt.wantHits, hs.hits.Load())
		})
	}
}

func TestHedgeOnlyRequestsGuessedIdempotent(t *testing.T) {
	tests := []struct {
		name     string
		method   string
		header   http.Header
		opts     []retryhttp.Option
		hold     time.Duration // how long the first attempt is held unless cancelled
		wantHits int
	}{
		{name: "POST is not hedged", method: http.MethodPost, hold: notHedged, wantHits: 1},
		{name: "PATCH is not hedged", method: http.MethodPatch, hold: notHedged, wantHits: 1},
		{
			name: "injected key, not honoured: not hedged", method: http.MethodPost,
			opts: []retryhttp.Option{retryhttp.WithIdempotencyKeys(retryhttp.IdempotencyKeys{})}, hold: notHedged, wantHits: 1,
		},
		{
			name: "injected key, honoured: hedged", method: http.MethodPost,
			opts: []retryhttp.Option{retryhttp.WithIdempotencyKeys(retryhttp.IdempotencyKeys{Honored: true})}, hold: slowHandler, wantHits: 2,
		},
		{
			name: "caller's key: hedged", method: http.MethodPost,
			header: http.Header{"Idempotency-Key": {"k"}}, hold: slowHandler, wantHits: 2,
		},
		{name: "PUT is hedged", method: http.MethodPut, hold: slowHandler, wantHits: 2},
		{name: "DELETE is hedged", method: http.MethodDelete, hold: slowHandler, wantHits: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs := newHedgeServer(t, func(hs *hedgeServer, n int, w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				if n == 1 && hs.hold(n, r, tt.hold) {
					return
				}
				fmt.Fprintf(w, "attempt %d", n)
			})
			c, _ := newHedgeClient(t, append(tt.opts, retryhttp.WithHedging(10*time.Millisecond, 2))...)
			req, err := http.NewRequest(tt.method, hs.URL, bytes.NewReader([]byte("body")))
			require.NoError(t, err)
			for k, v := range tt.header {
				req.Header[k] = v
			}

			res, err := c.Do(req)
			require.NoError(t, err)

			assert.Equal(t, fmt.Sprintf("attempt %d", tt.wantHits), testkit.ReadAll(t, res))
			assert.EqualValues(t, tt.wantHits, hs.hits.Load())
		})
	}
}

func TestHedgeBodyReplayedPerAttempt(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 16<<10) // 256 KiB
	sum := sha256.Sum256(data)
	want := hex.EncodeToString(sum[:])
	tests := []struct {
		name string
		give func() io.Reader
	}{
		{name: "GetBody", give: func() io.Reader { return bytes.NewReader(data) }},
		// A body without GetBody is streamed, and not hedged: see
		// TestHedgeUnreplayableBodyNotHedged.
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var sums []string
			recorded := make(chan struct{}, 3)
			// Attempts 1 and 2 are held; attempt 3 answers once all three
			// bodies have arrived.
			hs := newHedgeServer(t, func(hs *hedgeServer, n int, w http.ResponseWriter, r *http.Request) {
				h := sha256.New()
				_, _ = io.Copy(h, r.Body)
				mu.Lock()
				sums = append(sums, hex.EncodeToString(h.Sum(nil)))
				mu.Unlock()
				recorded <- struct{}{}
				if n < 3 {
					hs.hold(n, r, slowHandler)
					return
				}
				for range 3 {
					<-recorded
				}
				fmt.Fprintf(w, "attempt %d", n)
			})
			c, _ := newHedgeClient(t, retryhttp.WithHedging(20*time.Millisecond, 2))
			req, err := http.NewRequest(http.MethodPut, hs.URL, tt.give())
			require.NoError(t, err)

			res, err := c.Do(req)
			require.NoError(t, err)

			assert.Equal(t, "attempt 3", testkit.ReadAll(t, res))
			hs.waitCancelled(t, 1, 2)
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, []string{want, want, want}, sums, "every attempt got the whole body")
		})
	}
}

func TestHedgeUnreplayableBodyNotHedged(t *testing.T) {
	hs := newHedgeServer(t, func(hs *hedgeServer, n int, w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		hs.hold(n, r, 100*time.Millisecond)
		w.Write(b)
	})
	c, _ := newHedgeClient(t, retryhttp.WithHedging(10*time.Millisecond, 2), retryhttp.WithBodyBufferLimit(16))
	body := bytes.Repeat([]byte("x"), 64)
	req, err := http.NewRequest(http.MethodPut, hs.URL, struct{ io.Reader }{bytes.NewReader(body)})
	require.NoError(t, err)

	res, err := c.Do(req)
	require.NoError(t, err)

	assert.Equal(t, string(body), testkit.ReadAll(t, res), "streamed once, intact")
	assert.EqualValues(t, 1, hs.hits.Load())
}

func TestHedgeWinnerBodyOutlivesLosers(t *testing.T) {
	payload := bytes.Repeat([]byte("hedge!"), 200_000) // 1.2 MB, more than socket buffers hold
	tests := []struct {
		name string
		opts []retryhttp.Option
	}{
		{name: "no attempt timeout"},
		{name: "attempt timeout shorter than the read", opts: []retryhttp.Option{retryhttp.WithAttemptTimeout(100 * time.Millisecond)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs := newHedgeServer(t, func(hs *hedgeServer, n int, w http.ResponseWriter, r *http.Request) {
				if n == 1 {
					hs.hold(n, r, slowHandler)
					return
				}
				w.Write(payload)
			})
			c, tr := newHedgeClient(t, append(tt.opts, retryhttp.WithHedging(20*time.Millisecond, 1))...)

			res, err := c.Get(hs.URL)
			require.NoError(t, err)
			// The loser is cancelled, and seen so by the server, before a
			// byte of the winner's body is read.
			hs.waitCancelled(t, 1)
			time.Sleep(150 * time.Millisecond) // past the attempt timeout

			got, err := io.ReadAll(res.Body)
			require.NoError(t, err)
			require.True(t, bytes.Equal(payload, got), "the winner's body is whole")
			require.NoError(t, res.Body.Close())

			// With the server still up, no goroutine of the transport is
			// left (give or take the few instructions a goroutine runs
			// after signalling that it is done).
			assert.Eventually(t, func() bool { return !strings.Contains(allStacks(), "retryhttp.(*hedge)") },
				50*time.Millisecond, time.Millisecond, "hedge goroutines after Close:\n%s", allStacks())
			tr.CloseIdleConnections()
			hs.Close()
			goleak.VerifyNone(t)
		})
	}
}

func TestHedgeCallerCancels(t *testing.T) {
	hs := newHedgeServer(t, alwaysSlow)
	c, _ := newHedgeClient(t, retryhttp.WithHedging(10*time.Millisecond, 2))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL, nil)
	require.NoError(t, err)

	var cancelledAt atomic.Int64
	go func() {
		for range 3 {
			select {
			case <-hs.arrived:
			case <-time.After(2 * time.Second):
			}
		}
		cancelledAt.Store(time.Now().UnixNano())
		cancel()
	}()
	res, err := c.Do(req)
	returned := time.Now()

	require.Nil(t, res)
	require.ErrorIs(t, err, context.Canceled)
	assert.Less(t, returned.Sub(time.Unix(0, cancelledAt.Load())), time.Second, "returned promptly")
	hs.waitCancelled(t, 1, 2, 3)
	assert.EqualValues(t, 3, hs.hits.Load())
}

func TestHedgeAllAttemptsFail(t *testing.T) {
	t.Run("last response returned intact", func(t *testing.T) {
		hs := newHedgeServer(t, func(_ *hedgeServer, n int, w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "busy %d", n)
		})
		c, _ := newHedgeClient(t, retryhttp.WithHedging(time.Second, 1), retryhttp.WithMaxRetries(2))

		res, err := c.Get(hs.URL)
		require.NoError(t, err)

		assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
		assert.Equal(t, "busy 3", testkit.ReadAll(t, res))
		assert.EqualValues(t, 3, hs.hits.Load())
	})
	t.Run("attempt timeouts: last error marked exhausted", func(t *testing.T) {
		hs := newHedgeServer(t, alwaysSlow)
		c, _ := newHedgeClient(t, retryhttp.WithHedging(5*time.Second, 1),
			retryhttp.WithMaxRetries(2), retryhttp.WithAttemptTimeout(100*time.Millisecond))

		start := time.Now()
		res, err := c.Get(hs.URL)

		require.Nil(t, res)
		require.ErrorIs(t, err, retryhttp.ErrRetriesExhausted)
		require.ErrorIs(t, err, retryhttp.ErrAttemptTimeout)
		assert.Less(t, time.Since(start), 2*time.Second, "each timeout replaced at once, not after the 5s hedge delay")
		assert.ErrorContains(t, err, "after 3 attempts")
	})
}

// TestHedgeBudgetRefusesExtraAttempts: a budget without a token for the
// host (and without parking, so without a slot of its window) refuses the
// hedge after the delay and the retry after a failure: the only attempt's
// outcome is the request's.
func TestHedgeBudgetRefusesExtraAttempts(t *testing.T) {
	tests := []struct {
		name string
		// answer answers the only attempt, after the hedge delay passed.
		answer     func(w http.ResponseWriter)
		wantStatus int
		wantStop   retryhttp.StopReason
	}{
		{
			name: "no hedge after the delay",
			answer: func(w http.ResponseWriter) {
				time.Sleep(300 * time.Millisecond) // 30 hedge delays
				io.WriteString(w, "late")
			},
			wantStatus: http.StatusOK,
			wantStop:   retryhttp.StopSuccess,
		},
		{
			name:       "no retry after a 503",
			answer:     func(w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) },
			wantStatus: http.StatusServiceUnavailable,
			wantStop:   retryhttp.StopBudgetRefused,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs := newHedgeServer(t, func(_ *hedgeServer, _ int, w http.ResponseWriter, _ *http.Request) {
				tt.answer(w)
			})
			b := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Capacity: 1, NoParking: true})
			require.True(t, budgetWithdraw(b, hs.URL), "the host's only token, spent")
			var stops []retryhttp.StopReason
			c, _ := newHedgeClient(t, retryhttp.WithHedging(10*time.Millisecond, 2), retryhttp.WithRetryBudget(b),
				retryhttp.WithHooks(retryhttp.Hooks{OnRetryDecision: func(d retryhttp.Decision) {
					if !d.Retry {
						stops = append(stops, d.Reason)
					}
				}}))

			res, err := c.Get(hs.URL)
			require.NoError(t, err)
			testkit.ReadAll(t, res)

			assert.Equal(t, tt.wantStatus, res.StatusCode)
			assert.EqualValues(t, 1, hs.hits.Load(), "no other attempt")
			assert.Equal(t, []retryhttp.StopReason{tt.wantStop}, stops)
		})
	}
}

func TestHedgeSettings(t *testing.T) {
	on := retryhttp.WithHedging(10*time.Millisecond, 1)
	tests := []struct {
		name     string
		opts     []retryhttp.Option
		ctx      func(context.Context) context.Context
		hold     time.Duration // how long the first attempt is held unless cancelled
		wantHits int
	}{
		{name: "off by default", hold: notHedged, wantHits: 1},
		{name: "on", opts: []retryhttp.Option{on}, hold: slowHandler, wantHits: 2},
		{name: "zero delay is off", opts: []retryhttp.Option{retryhttp.WithHedging(0, 2)}, hold: notHedged, wantHits: 1},
		{name: "zero hedges is off", opts: []retryhttp.Option{retryhttp.WithHedging(10*time.Millisecond, 0)}, hold: notHedged, wantHits: 1},
		{name: "no retries, no hedges", opts: []retryhttp.Option{on, retryhttp.WithMaxRetries(0)}, hold: notHedged, wantHits: 1},
		{
			name: "limits at their largest",
			opts: []retryhttp.Option{retryhttp.WithHedging(10*time.Millisecond, math.MaxInt), retryhttp.WithMaxRetries(math.MaxInt)},
			hold: slowHandler, wantHits: 2,
		},
		{
			name: "on for the request",
			ctx: func(ctx context.Context) context.Context {
				return retryhttp.SetOptions(ctx, retryhttp.WithHedging(10*time.Millisecond, 1))
			},
			hold: slowHandler, wantHits: 2,
		},
		{
			name: "off for the request",
			opts: []retryhttp.Option{on},
			ctx: func(ctx context.Context) context.Context {
				return retryhttp.SetOptions(ctx, retryhttp.WithHedging(0, 0))
			},
			hold: notHedged, wantHits: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs := newHedgeServer(t, func(hs *hedgeServer, n int, w http.ResponseWriter, r *http.Request) {
				if n == 1 && hs.hold(n, r, tt.hold) {
					return
				}
				fmt.Fprintf(w, "attempt %d", n)
			})
			c, _ := newHedgeClient(t, tt.opts...)
			ctx := context.Background()
			if tt.ctx != nil {
				ctx = tt.ctx(ctx)
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL, nil)
			require.NoError(t, err)

			res, err := c.Do(req)
			require.NoError(t, err)

			assert.Equal(t, "attempt "+strconv.Itoa(tt.wantHits), testkit.ReadAll(t, res))
			assert.EqualValues(t, tt.wantHits, hs.hits.Load())
		})
	}
}

func TestHedgeConcurrentRequests(t *testing.T) {
	// The first attempt of every logical request (told apart by X-Id) is
	// held; its hedge answers with the id.
	var mu sync.Mutex
	seen := map[string]int{}
	hs := newHedgeServer(t, func(hs *hedgeServer, n int, w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Id")
		mu.Lock()
		seen[id]++
		first := seen[id] == 1
		mu.Unlock()
		if first && hs.hold(n, r, slowHandler) {
			return
		}
		io.WriteString(w, id)
	})
	// Every request is hedged here, far more than a retry budget allows
	// (TestHedgeSpendsRetryBudget covers that): no budget.
	c, _ := newHedgeClient(t, retryhttp.WithHedging(10*time.Millisecond, 1), testkit.UnlimitedBudget)

	const goroutines, perGoroutine = 32, 4
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perGoroutine {
				id := fmt.Sprintf("%d-%d", g, i)
				req, err := http.NewRequest(http.MethodGet, hs.URL, nil)
				if !assert.NoError(t, err) {
					return
				}
				req.Header.Set("X-Id", id)
				res, err := c.Do(req)
				if !assert.NoError(t, err) {
					return
				}
				b, err := io.ReadAll(res.Body)
				res.Body.Close()
				assert.NoError(t, err)
				assert.Equal(t, id, string(b))
			}
		}()
	}
	wg.Wait()

	timeout := time.After(5 * time.Second)
	for i := range goroutines * perGoroutine {
		select {
		case <-hs.cancelled:
		case <-timeout:
			require.Failf(t, "held attempts not cancelled", "%d of %d seen", i, goroutines*perGoroutine)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for id, n := range seen {
		assert.Equal(t, 2, n, "request %s: one held attempt, one hedge", id)
	}
}

func TestHedgeUpgradeKeepsWritableBody(t *testing.T) {
	// A 101 answer wins like any final answer, and its body stays writable,
	// as httputil.ReverseProxy needs.
	hs := newHedgeServer(t, func(_ *hedgeServer, _ int, w http.ResponseWriter, _ *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		brw.Flush()
		_, _ = io.Copy(conn, brw) // echo until the client closes
	})
	c, _ := newHedgeClient(t, retryhttp.WithHedging(time.Second, 1))
	req, err := http.NewRequest(http.MethodGet, hs.URL, nil)
	require.NoError(t, err)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")

	res, err := c.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, res.StatusCode)
	rwc, ok := res.Body.(io.ReadWriteCloser)
	require.True(t, ok, "the body of a 101 is writable")
	_, err = io.WriteString(rwc, "ping")
	require.NoError(t, err)
	got := make([]byte, 4)
	_, err = io.ReadFull(rwc, got)
	require.NoError(t, err)
	assert.Equal(t, "ping", string(got))
	require.NoError(t, rwc.Close())
	assert.EqualValues(t, 1, hs.hits.Load())
}

func TestHedgeSpendsRetryBudget(t *testing.T) {
	// Each hedge spends a token of the destination's retry budget: with two
	// tokens and parking off (no window to take a slot from), the first two
	// requests are hedged and the third is not. TestHedgeTakesASlot has the
	// window.
	var mu sync.Mutex
	seen := map[string]int{}
	hs := newHedgeServer(t, func(hs *hedgeServer, n int, w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Id")
		mu.Lock()
		seen[id]++
		first := seen[id] == 1
		mu.Unlock()
		if first {
			if hs.hold(n, r, notHedged) {
				return
			}
			io.WriteString(w, "first")
			return
		}
		io.WriteString(w, "hedge")
	})
	budget := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Capacity: 2, NoParking: true})
	c, _ := newHedgeClient(t, retryhttp.WithHedging(10*time.Millisecond, 1), retryhttp.WithRetryBudget(budget))

	var got []string
	for i := range 3 {
		req, err := http.NewRequest(http.MethodGet, hs.URL, nil)
		require.NoError(t, err)
		req.Header.Set("X-Id", fmt.Sprint(i))
		res, err := c.Do(req)
		require.NoError(t, err)
		got = append(got, testkit.ReadAll(t, res))
	}
	assert.Equal(t, []string{"hedge", "hedge", "first"}, got)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, map[string]int{"0": 2, "1": 2, "2": 1}, seen)
}

// Regression: the decision reported for a hedge carries, as Decision
// documents, the caller's request (not the transport's keyed copy) and the
// number of attempts in flight (not the number sent: a failed attempt was
// replaced before the hedge).
func TestHedgeDecisionReportsCallerRequestAndInFlight(t *testing.T) {
	hs := newHedgeServer(t, func(hs *hedgeServer, n int, w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch n {
		case 1:
			w.WriteHeader(http.StatusServiceUnavailable) // replaced at once
		case 2:
			hs.hold(n, r, 10*time.Second) // slow: hedged
		default:
			_, _ = io.WriteString(w, "ok")
		}
	})
	var mu sync.Mutex
	var hedges []retryhttp.Decision
	_, tr := newHedgeClient(t, retryhttp.WithHedging(30*time.Millisecond, 2), retryhttp.WithIdempotencyKeys(retryhttp.IdempotencyKeys{Honored: true}),
		retryhttp.WithHooks(retryhttp.Hooks{OnRetryDecision: func(d retryhttp.Decision) {
			if d.Hedge {
				mu.Lock()
				hedges = append(hedges, d)
				mu.Unlock()
			}
		}}))
	req, err := http.NewRequest(http.MethodPost, hs.URL, strings.NewReader("x"))
	require.NoError(t, err)

	res, err := tr.RoundTrip(req)
	require.NoError(t, err)
	assert.Equal(t, "ok", testkit.ReadAll(t, res))
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, hedges, 1)
	assert.Same(t, req, hedges[0].Attempt.Req, "the caller's request")
	assert.Equal(t, 1, hedges[0].Attempt.Count, "one attempt in flight when the hedge was sent")
}

func TestHedgeTakesASlot(t *testing.T) {
	hs := newHedgeServer(t, slowFirst)
	b := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{})
	c, _ := newHedgeClient(t, retryhttp.WithHedging(10*time.Millisecond, 1), retryhttp.WithRetryBudget(b))
	BudgetSpend(b, hs.URL) // no token left: the hedge needs a slot
	window, _, _ := budgetPacing(b, hs.URL)

	res, err := c.Get(hs.URL)
	require.NoError(t, err)
	assert.Equal(t, "attempt 2", testkit.ReadAll(t, res), "the hedge, sent with a slot, won")
	after, inFlight, _ := budgetPacing(b, hs.URL)
	assert.Zero(t, inFlight, "its slot given back")
	assert.GreaterOrEqual(t, after, window, "settled like a retry: a success does not shrink the window")
	assert.Less(t, budgetTokens(b, hs.URL), 1.0, "no token was spent: the hedge had a slot")
}
