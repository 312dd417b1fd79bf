package retryhttp_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
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
	"github.com/seed2409de8f/retryhttp/destinations"
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

const (
	tailFast = 2 * time.Millisecond  // the usual latency of tailServer
	tailSlow = 60 * time.Millisecond // its slow tail's
)

// tailServer answers GET /?id=N after tailFast, but the first request of
// every 20th id (5%) after tailSlow, or when the request is cancelled.
func tailServer(t *testing.T) *testkit.CountingServer {
	var mu sync.Mutex
	seen := map[string]bool{}
	return testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("id")
		mu.Lock()
		first := !seen[id]
		seen[id] = true
		mu.Unlock()
		n, _ := strconv.Atoi(id)
		d := tailFast
		if first && n%20 == 0 {
			d = tailSlow
		}
		select {
		case <-time.After(d):
			_, _ = w.Write([]byte("ok"))
		case <-r.Context().Done():
		}
	})
}

// hedgeCounter counts the hedges of each request, by the id in its URL.
type hedgeCounter struct {
	mu     sync.Mutex
	hedges map[string]int
}

func (c *hedgeCounter) option() retryhttp.Option {
	c.hedges = map[string]int{}
	return retryhttp.WithHooks(retryhttp.Hooks{OnRetryDecision: func(d retryhttp.Decision) {
		if d.Hedge {
			c.mu.Lock()
			c.hedges[d.Attempt.Req.URL.Query().Get("id")]++
			c.mu.Unlock()
		}
	}})
}

func (c *hedgeCounter) of(id int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hedges[strconv.Itoa(id)]
}

// getID sends GET /?id=id with ctx and returns how long it took.
func getID(ctx context.Context, t *testing.T, c *http.Client, url string, id int) (time.Duration, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/?id=%d", url, id), nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := c.Do(req)
	if err != nil {
		return time.Since(start), err
	}
	drainClose(t, res)
	return time.Since(start), nil
}

func drainClose(t *testing.T, res *http.Response) {
	t.Helper()
	buf := make([]byte, 64)
	for {
		if _, err := res.Body.Read(buf); err != nil {
			break
		}
	}
	if err := res.Body.Close(); err != nil {
		t.Fatal(err)
	}
}

// On a host with a 5% slow tail, adaptive hedging sends no hedge until the
// host's window holds enough first attempts, then hedges the slow ones:
// they end long before the tail's latency, for few extra requests. The
// first attempts are timed with a retry budget or without one.
func TestAdaptiveHedgingFollowsTheTail(t *testing.T) {
	for _, tt := range []struct {
		name   string
		budget *retryhttp.RetryBudget
	}{
		{"own budget", retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{})},
		{"no budget", nil},
	} {
		t.Run(tt.name, func(t *testing.T) { followsTheTail(t, tt.budget) })
	}
}

func followsTheTail(t *testing.T, b *retryhttp.RetryBudget) {
	const (
		q        = 0.9
		cold     = 40 // tailMinSamples(0.9)
		requests = 300
	)
	srv := tailServer(t)
	var hc hedgeCounter
	tr := retryhttp.New(retryhttp.WithAdaptiveHedging(q, 1), hc.option(), retryhttp.WithRetryBudget(b))
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}

	rescued, slow := 0, 0
	for id := range requests {
		took, err := getID(context.Background(), t, c, srv.URL, id)
		if err != nil {
			t.Fatalf("request %d: %v", id, err)
		}
		switch {
		case id < cold && hc.of(id) != 0:
			t.Fatalf("request %d, before the window holds %d first attempts: %d hedges, want none", id, cold, hc.of(id))
		case id >= 2*cold && id%20 == 0:
			slow++
			if took < tailSlow/2 && hc.of(id) == 1 {
				rescued++
			}
		}
	}
	if rescued < slow*8/10 {
		t.Errorf("%d of %d requests whose first attempt was slow ended by a hedge within %v, want 80%% at least", rescued, slow, tailSlow/2)
	}
	if extra := float64(srv.Attempts.Load())/requests - 1; extra > 0.15 {
		t.Errorf("the server received %.0f%% more requests than were sent, want 15%% at most", extra*100)
	}
}

// A request whose deadline leaves less than twice the host's hedge delay
// is not hedged: a hedge sent after that delay could not come back.
func TestAdaptiveHedgingNotWithinTheDeadline(t *testing.T) {
	srv := tailServer(t)
	var hc hedgeCounter
	tr := retryhttp.New(retryhttp.WithAdaptiveHedging(0.9, 1), hc.option(),
		retryhttp.WithRetryBudget(retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{})))
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for id := 1; id < 60; id++ { // no slow one: id 0 is the first slow one
		if id%20 == 0 {
			continue
		}
		if _, err := getID(context.Background(), t, c, srv.URL, id); err != nil {
			t.Fatal(err)
		}
	}
	// The hedge delay is tailFast at least: a deadline of 1.5 tailFast
	// leaves less than twice that.
	ctx, cancel := context.WithTimeout(context.Background(), tailFast*3/2)
	defer cancel()
	if _, err := getID(ctx, t, c, srv.URL, 100); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow request with a short deadline: %v, want context.DeadlineExceeded", err)
	}
	if n := hc.of(100); n != 0 {
		t.Errorf("slow request with a short deadline: %d hedges, want none", n)
	}
	// Without a deadline, the same kind of request is hedged.
	if _, err := getID(context.Background(), t, c, srv.URL, 120); err != nil {
		t.Fatal(err)
	}
	if n := hc.of(120); n != 1 {
		t.Errorf("slow request without a deadline: %d hedges, want 1", n)
	}
}

// Every hedge is charged to the retry budget: once a budget that never
// refills is spent, slow requests are no longer hedged.
func TestAdaptiveHedgingChargedToTheBudget(t *testing.T) {
	srv := tailServer(t)
	var hc hedgeCounter
	var hedges atomic.Int64
	budget := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Ratio: 0.001, Capacity: 2, NoParking: true})
	tr := retryhttp.New(retryhttp.WithAdaptiveHedging(0.9, 1), hc.option(), retryhttp.WithRetryBudget(budget))
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for id := range 200 {
		if _, err := getID(context.Background(), t, c, srv.URL, id); err != nil {
			t.Fatal(err)
		}
		hedges.Add(int64(hc.of(id)))
	}
	if n := hedges.Load(); n == 0 || n > 3 {
		t.Errorf("%d hedges with a budget of 2 tokens that barely refills, want 1 to 3", n)
	}
}

// A destination policy's hedging with a quantile follows that host's
// latency, as WithAdaptiveHedging does; the file form says the same.
func TestAdaptiveHedgingDestination(t *testing.T) {
	srv := tailServer(t)
	host := strings.TrimPrefix(srv.URL, "http://")
	cfg, err := destinations.Parse([]byte(`{"destinations": [{"host": "` + host + `", "hedging": {"quantile": 0.9, "maxHedges": 1}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if h := cfg.Destinations[0].Hedging; h == nil || h.Quantile != 0.9 || h.MaxHedges != 1 || h.Delay != 0 {
		t.Fatalf("parsed hedging %+v, want quantile 0.9, maxHedges 1", h)
	}
	d, err := destinations.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var hc hedgeCounter
	tr := retryhttp.New(retryhttp.WithPolicyFunc(d.Policy), hc.option(),
		retryhttp.WithRetryBudget(retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{})))
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	hedged := 0
	for id := range 161 {
		if _, err := getID(context.Background(), t, c, srv.URL, id); err != nil {
			t.Fatal(err)
		}
		if id >= 80 {
			hedged += hc.of(id)
		}
	}
	if hc.of(0) != 0 || hc.of(20) != 0 || hedged < 3 {
		t.Errorf("hedges: %d and %d before the window filled (want none), %d of the 5 slow ones after (want 3 at least)", hc.of(0), hc.of(20), hedged)
	}
}

// No hedge is sent with less than the hedge delay left before the deadline:
// of two hedges that a request hanging on every attempt would get, the
// second, due at twice the delay, is not sent when the deadline falls at 2.5
// times the delay.
func TestAdaptiveHedgingNoLateHedge(t *testing.T) {
	const usual = 10 * time.Millisecond
	srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		d := usual
		if r.URL.Query().Get("id") == "hang" {
			d = time.Hour
		}
		select {
		case <-time.After(d):
		case <-r.Context().Done():
		}
	})
	var hc hedgeCounter
	tr := retryhttp.New(retryhttp.WithAdaptiveHedging(0.9, 2), hc.option(), retryhttp.WithRetryBudget(nil))
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for id := range 40 { // tailMinSamples(0.9)
		if _, err := getID(context.Background(), t, c, srv.URL, id); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/?id=hang", nil)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := retryhttp.AdaptiveHedgeDelay(tr, req, 0.9)
	if !ok || d < usual {
		t.Fatalf("hedge delay %v, %v: want %v at least", d, ok, usual)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d*5/2)
	defer cancel()
	res, err := c.Do(req.WithContext(ctx))
	if err == nil {
		drainClose(t, res)
		t.Fatal("a request whose attempts all hang succeeded")
	}
	hc.mu.Lock()
	n := hc.hedges["hang"]
	hc.mu.Unlock()
	if n > 1 {
		t.Errorf("%d hedges, want at most 1: the second was due with less than the delay (%v) left", n, d)
	}
}

// The hedged path once drifted from the retry loop (issue 12): it guessed
// idempotency by the default method list whatever the policy's, and gave no
// lost-connection refund. These tests pin both.

// Regression: a CustomizedShouldRetryFn's IdempotentMethods did not decide
// which requests were hedged: a DELETE that the policy does not guess
// idempotent (and would never retry after a timeout) was sent twice at
// once, and a POST it does guess idempotent was not hedged. The rules are
// given with WithCustomizedShouldRetryFn, for the transport or in SetOptions; a
// CustomizedShouldRetryFn passed as a function is any function to the
// transport, and the default list applies.
func TestHedgeFollowsPolicyIdempotentMethods(t *testing.T) {
	onlyGETOpts := retryhttp.CustomizedShouldRetryFnOptions{IdempotentMethods: []string{http.MethodGet}}
	onlyGET := retryhttp.WithCustomizedShouldRetryFn(onlyGETOpts)
	withPOST := retryhttp.WithCustomizedShouldRetryFn(retryhttp.CustomizedShouldRetryFnOptions{
		IdempotentMethods: []string{http.MethodGet, http.MethodPost},
		RetryIf:           func(retryhttp.Attempt) bool { return false },
	})
	var asked atomic.Int32 // calls of a caller's own policy
	own := func(a retryhttp.Attempt) bool {
		asked.Add(1)
		return retryhttp.DefaultShouldRetryFn(a)
	}
	tests := []struct {
		name      string
		method    string
		opt       retryhttp.Option
		perReq    *retryhttp.CustomizedShouldRetryFnOptions // SetOptions(WithCustomizedShouldRetryFn)
		wantHits  int
		wantAsked int32
	}{
		{name: "DELETE, policy without it: not hedged", method: http.MethodDelete, opt: onlyGET, wantHits: 1},
		{name: "DELETE, per-request policy without it: not hedged", method: http.MethodDelete, perReq: &onlyGETOpts, wantHits: 1},
		{name: "POST, policy with it: hedged", method: http.MethodPost, opt: withPOST, wantHits: 2},
		{name: "GET, policy with it: hedged", method: http.MethodGet, opt: onlyGET, wantHits: 2},
		{name: "DELETE, policy passed as a function: default list, hedged", method: http.MethodDelete,
			opt: retryhttp.WithShouldRetryFn(retryhttp.CustomizedShouldRetryFn(onlyGETOpts)), wantHits: 2},
		// A caller's own function is only asked about attempts made, and
		// the default list applies.
		{name: "DELETE, own policy: default list, hedged", method: http.MethodDelete, opt: retryhttp.WithShouldRetryFn(own), wantHits: 2, wantAsked: 1},
		{name: "POST, own policy: default list, not hedged", method: http.MethodPost, opt: retryhttp.WithShouldRetryFn(own), wantHits: 1, wantAsked: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			asked.Store(0)
			hs := newHedgeServer(t, func(hs *hedgeServer, n int, w http.ResponseWriter, r *http.Request) {
				if n == 1 && hs.hold(n, r, notHedged) {
					return
				}
				fmt.Fprintf(w, "attempt %d", n)
			})
			opts := []retryhttp.Option{retryhttp.WithHedging(10*time.Millisecond, 1), retryhttp.WithIdempotencyKeys(retryhttp.IdempotencyKeys{Disabled: true})}
			if tt.opt != nil {
				opts = append(opts, tt.opt)
			}
			c, _ := newHedgeClient(t, opts...)
			req, err := http.NewRequest(tt.method, hs.URL, nil)
			require.NoError(t, err)
			if tt.perReq != nil {
				req = req.WithContext(retryhttp.SetOptions(req.Context(), retryhttp.WithCustomizedShouldRetryFn(*tt.perReq)))
			}

			res, err := c.Do(req)
			require.NoError(t, err)

			assert.Equal(t, fmt.Sprintf("attempt %d", tt.wantHits), testkit.ReadAll(t, res))
			assert.EqualValues(t, tt.wantHits, hs.hits.Load())
			assert.Equal(t, tt.wantAsked, asked.Load(), "calls of the caller's policy: one per outcome judged")
		})
	}
}

// Regression: a hedged request's retry after a lost connection spent a
// token of the budget for good, where the retry loop's is given back when
// the retry succeeds (budget.go settle): a healthy server that closes
// keep-alive connections drained the budget of hedged requests only.
func TestHedgeLostConnectionRetryRefunded(t *testing.T) {
	srv := testkit.NewRawServer(t, func(n int64) testkit.Reply {
		if n == 1 {
			return testkit.ReplyReset
		}
		return testkit.ReplyWith(http.StatusOK, []byte("ok"))
	})
	budget := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Capacity: 2, Ratio: 0.001, NoParking: true})
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	tr := testkit.NewTransport(t, retryhttp.WithTransport(base), retryhttp.WithRetryBudget(budget),
		retryhttp.WithHedging(time.Hour, 1))
	req, err := http.NewRequest(http.MethodGet, srv.URL(), nil)
	require.NoError(t, err)

	res, err := tr.RoundTrip(req)
	require.NoError(t, err)
	assert.Equal(t, "ok", testkit.ReadAll(t, res))

	assert.EqualValues(t, 2, srv.Requests.Load(), "the reset, then the retry")
	assert.InDelta(t, 2, budgetTokens(budget, srv.URL()), 1e-9, "the retry's token given back")
}

// stackOf returns the stack of the calling goroutine.
func stackOf() string {
	buf := make([]byte, 64<<10)
	return string(buf[:runtime.Stack(buf, false)])
}

// hedgeGoroutines counts the goroutines running code of the hedged path
// other than RoundTrip's own: attempts sent in parallel, the coordinator.
func hedgeGoroutines() int {
	return strings.Count(allStacks(), "retryhttp.(*hedge)")
}

// seeingTransport answers 200 in memory, recording, for each attempt,
// whether it runs on the goroutine of the test and how many goroutines of
// the hedged path are running meanwhile.
type seeingTransport struct {
	test    string // the test function's name, in the caller's stack
	onTest  []bool
	hedging []int
}

func (s *seeingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	s.onTest = append(s.onTest, strings.Contains(stackOf(), s.test))
	s.hedging = append(s.hedging, hedgeGoroutines())
	return memTransport{}.RoundTrip(req)
}

// TestHedgeFirstAttemptOnCallersGoroutine checks that a hedged request
// whose hedge delay does not pass sends its only attempt on the caller's
// goroutine, with no other goroutine of the hedged path.
func TestHedgeFirstAttemptOnCallersGoroutine(t *testing.T) {
	base := &seeingTransport{test: "TestHedgeFirstAttemptOnCallersGoroutine"}
	var decisions []retryhttp.Decision
	tr := retryhttp.New(retryhttp.WithTransport(base), retryhttp.WithHedging(time.Hour, 2),
		retryhttp.WithHooks(retryhttp.Hooks{OnRetryDecision: func(d retryhttp.Decision) { decisions = append(decisions, d) }}))
	for range 3 {
		req, err := http.NewRequest(http.MethodGet, "http://example.test/", nil)
		require.NoError(t, err)
		res, err := tr.RoundTrip(req)
		require.NoError(t, err)
		require.NoError(t, res.Body.Close())
	}
	assert.Equal(t, []bool{true, true, true}, base.onTest, "attempts on the caller's goroutine")
	assert.Equal(t, []int{0, 0, 0}, base.hedging, "goroutines of the hedged path during attempt 1")
	require.Len(t, decisions, 3)
	for _, d := range decisions {
		assert.Equal(t, retryhttp.StopSuccess, d.Reason)
		assert.Equal(t, 1, d.Attempt.Count)
	}
}

// panicFirst panics in attempt 1 once a hedge has been sent, and answers
// the hedges.
type panicFirst struct{ hedged chan struct{} }

func (p *panicFirst) RoundTrip(req *http.Request) (*http.Response, error) {
	if retryhttp.AttemptFromRequest(req) == 1 {
		<-p.hedged
		panic("base transport")
	}
	close(p.hedged)
	<-req.Context().Done() // the hedge is still in flight when attempt 1 panics
	return nil, req.Context().Err()
}

// TestHedgeFirstAttemptPanicReachesCaller checks that a panic of the base
// transport in attempt 1, on the caller's goroutine, goes up to the caller
// of RoundTrip once the hedge sent meanwhile has been ended: no goroutine
// is left waiting for attempt 1 (goleak, TestMain).
func TestHedgeFirstAttemptPanicReachesCaller(t *testing.T) {
	tr := retryhttp.New(retryhttp.WithTransport(&panicFirst{hedged: make(chan struct{})}),
		retryhttp.WithHedging(time.Millisecond, 1))
	req, err := http.NewRequest(http.MethodGet, "http://example.test/", nil)
	require.NoError(t, err)
	assert.PanicsWithValue(t, "base transport", func() { _, _ = tr.RoundTrip(req) })
	assert.Eventually(t, func() bool { return hedgeGoroutines() == 0 }, time.Second, time.Millisecond, allStacks())
}
