package retryhttp_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/seed2409de8f/retryhttp/retryhttptest"
)

// quotaServer is a loopback server with a fixed-window quota of limit
// requests per window, on clock's time, that states it on every response
// in one dialect; over the quota it answers 429 with the same fields.
type quotaServer struct {
	*httptest.Server
	mu             sync.Mutex
	start          time.Time
	served, denied int
}

func newQuotaServer(t *testing.T, clock *retryhttptest.Clock, limit int, window time.Duration, dialect string) *quotaServer {
	s := &quotaServer{start: clock.Now()}
	t.Cleanup(retryhttp.ForgetQuotas)
	used, index := 0, int64(0)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		now := clock.Now()
		if i := int64(now.Sub(s.start) / window); i != index {
			index, used = i, 0
		}
		ok := used < limit
		if ok {
			used++
		}
		left := s.start.Add(time.Duration(index+1) * window).Sub(now)
		secs := int((left + time.Second - 1) / time.Second)
		r := limit - used
		h := w.Header()
		switch dialect {
		case "draft-11":
			h.Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=%d`, r, secs))
			h.Set("RateLimit-Policy", fmt.Sprintf(`"default";q=%d;w=%d`, limit, int(window/time.Second)))
		case "draft-07":
			h.Set("RateLimit", fmt.Sprintf("limit=%d, remaining=%d, reset=%d", limit, r, secs))
		case "ratelimit-06":
			h.Set("RateLimit-Limit", fmt.Sprint(limit))
			h.Set("RateLimit-Remaining", fmt.Sprint(r))
			h.Set("RateLimit-Reset", fmt.Sprint(secs))
		case "x-ratelimit":
			h.Set("X-RateLimit-Limit", fmt.Sprint(limit))
			h.Set("X-RateLimit-Remaining", fmt.Sprint(r))
			h.Set("X-RateLimit-Reset", fmt.Sprint(secs))
		case "x-ratelimit-epoch": // GitHub's: the epoch second after the one the window turns in
			h.Set("X-RateLimit-Limit", fmt.Sprint(limit))
			h.Set("X-RateLimit-Remaining", fmt.Sprint(r))
			h.Set("X-RateLimit-Reset", fmt.Sprint(now.Add(left).Unix()+1))
		case "llm":
			h.Set("X-RateLimit-Limit-Requests", fmt.Sprint(limit))
			h.Set("X-RateLimit-Remaining-Requests", fmt.Sprint(r))
			h.Set("X-RateLimit-Reset-Requests", left.String())
		}
		if !ok {
			s.denied++
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		s.served++
	}))
	t.Cleanup(s.Close)
	return s
}

// counts returns the requests served and refused.
func (s *quotaServer) counts() (served, denied int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served, s.denied
}

// A client paced by the quota its server advertises, in each dialect,
// meets no 429: each request past a window's quota is held until the
// window turns (on a fake clock: no real waiting), and the holds are
// reported with their own hook, not as parked retries.
func TestQuotaPacingLoopback(t *testing.T) {
	for _, dialect := range []string{"draft-11", "draft-07", "ratelimit-06", "x-ratelimit", "llm"} {
		t.Run(dialect, func(t *testing.T) {
			clock := retryhttptest.NewClock(time.Now())
			srv := newQuotaServer(t, clock, 3, 10*time.Second, dialect)
			var mu sync.Mutex
			var holds []retryhttp.QuotaHold
			parks := 0
			opts := []retryhttp.Option{retryhttp.WithClock(clock), retryhttp.WithHooks(retryhttp.Hooks{
				OnQuotaHold: func(h retryhttp.QuotaHold) { mu.Lock(); holds = append(holds, h); mu.Unlock() },
				OnPark:      func(retryhttp.ParkEvent) { mu.Lock(); parks++; mu.Unlock() },
			})}
			if dialect == "llm" { // read only for a scope the caller names
				opts = append(opts, retryhttp.WithQuotaScope(func(*http.Request) string { return "model-a" }))
			}
			c := &http.Client{Transport: testkit.NewTransport(t, opts...)}
			for range 7 {
				assert.Equal(t, http.StatusOK, testkit.Get(t, c, srv.URL+"/v1/items"))
			}
			served, denied := srv.counts()
			assert.Equal(t, 7, served)
			assert.Zero(t, denied, "no request meets the quota")
			// Two window turns waited for, in all: 7 requests at 3 per 10 s.
			assert.InDelta(t, 20*time.Second, clock.Slept(), float64(2*time.Second))
			mu.Lock()
			defer mu.Unlock()
			assert.Zero(t, parks)
			require.NotEmpty(t, holds)
			assert.Equal(t, 1, holds[0].Attempt.Count)
			assert.True(t, strings.HasPrefix(holds[0].Scope, srv.URL), holds[0].Scope)
			assert.Zero(t, holds[0].Remaining)
			if dialect == "draft-11" {
				assert.Equal(t, "default", holds[0].Policy)
			}
		})
	}
}

// A reset stated as an epoch second is the same second to every answer:
// here 0.7 s after the turn (the windows turn 0.3 s past a second). A
// client whose first request went as the window began takes the turn to
// be a window after it, and keeps that part of a second turn after turn:
// 7 requests at 3 per 10 s wait two windows, not two windows and twice
// 0.7 s.
func TestQuotaEpochTurn(t *testing.T) {
	clock := retryhttptest.NewClock(time.Now().Truncate(time.Second).Add(300 * time.Millisecond))
	srv := newQuotaServer(t, clock, 3, 10*time.Second, "x-ratelimit-epoch")
	c := &http.Client{Transport: testkit.NewTransport(t, retryhttp.WithClock(clock))}
	for range 7 {
		assert.Equal(t, http.StatusOK, testkit.Get(t, c, srv.URL))
	}
	served, denied := srv.counts()
	assert.Equal(t, 7, served)
	assert.Zero(t, denied)
	assert.InDelta(t, 20*time.Second, clock.Slept(), float64(50*time.Millisecond), "the turns: %v", clock.Sleeps())
}

// At a turn the book reckoned, the first request asks whether it came and
// the others wait for its answer: they go when it comes, not when their
// short waits end (a manual clock that does not move after the turn would
// hold them for ever).
func TestQuotaProbeWakesTheHeld(t *testing.T) {
	clock := retryhttptest.NewManualClock(time.Now())
	srv := newQuotaServer(t, clock, 3, 10*time.Second, "draft-11")
	var mu sync.Mutex
	var probeWaits int
	c := &http.Client{Transport: testkit.NewTransport(t, retryhttp.WithClock(clock),
		retryhttp.WithHooks(retryhttp.Hooks{OnQuotaHold: func(h retryhttp.QuotaHold) {
			if h.Wait < time.Second {
				mu.Lock()
				probeWaits++
				mu.Unlock()
			}
		}}))}
	for range 3 { // the window's quota
		assert.Equal(t, http.StatusOK, testkit.Get(t, c, srv.URL))
	}
	const held = 3
	done := make(chan int, held)
	for range held {
		go getInto(c, srv.URL, done)
	}
	require.Eventually(t, func() bool { return clock.Timers() == held }, 5*time.Second, time.Millisecond, "held for the turn")
	clock.Advance(10 * time.Second) // the turn; the time moves no more
	for range held {
		select {
		case code := <-done:
			assert.Equal(t, http.StatusOK, code)
		case <-time.After(5 * time.Second):
			t.Fatal("a request held for the turn's first answer was not woken by it")
		}
	}
	served, denied := srv.counts()
	assert.Equal(t, 3+held, served)
	assert.Zero(t, denied)
	t.Logf("holds for the first answer: %d", probeWaits)
}

// getInto sends a GET to url with c, and sends its status code to done (0
// for an error).
func getInto(c *http.Client, url string, done chan<- int) {
	res, err := c.Get(url)
	if err != nil {
		done <- 0
		return
	}
	res.Body.Close()
	done <- res.StatusCode
}

// Without pacing, or with a caller's scope the responses do not share, the
// same server's quota is met: the pacing is what avoids the 429s above.
func TestQuotaPacingOff(t *testing.T) {
	clock := retryhttptest.NewClock(time.Now())
	srv := newQuotaServer(t, clock, 3, 10*time.Second, "draft-11")
	c := &http.Client{Transport: testkit.NewTransport(t, retryhttp.WithClock(clock), retryhttp.WithQuotaPacing(false))}
	for range 5 {
		assert.Equal(t, http.StatusOK, testkit.Get(t, c, srv.URL))
	}
	_, denied := srv.counts()
	assert.Positive(t, denied)
}

// A wait that does not fit the maximum delay fails at once, before
// anything is sent, with the wait the server stated.
func TestQuotaWaitTooLong(t *testing.T) {
	clock := retryhttptest.NewClock(time.Now())
	srv := newQuotaServer(t, clock, 1, time.Hour, "draft-11")
	var reasons []retryhttp.StopReason
	tr := testkit.NewTransport(t, retryhttp.WithClock(clock), retryhttp.WithMaxDelay(time.Minute),
		retryhttp.WithHooks(retryhttp.Hooks{OnRetryDecision: func(d retryhttp.Decision) { reasons = append(reasons, d.Reason) }}))
	c := &http.Client{Transport: tr}
	assert.Equal(t, http.StatusOK, testkit.Get(t, c, srv.URL))
	_, err := c.Get(srv.URL)
	require.Error(t, err)
	assert.ErrorIs(t, err, retryhttp.ErrQuotaExhausted)
	var qe *retryhttp.QuotaWaitError
	require.ErrorAs(t, err, &qe)
	assert.Equal(t, time.Hour, qe.Wait)
	assert.Equal(t, "default", qe.Policy)
	assert.True(t, strings.HasPrefix(qe.Scope, srv.URL), qe.Scope)
	assert.Contains(t, err.Error(), "retryhttp: advertised quota exhausted")
	assert.Equal(t, []retryhttp.StopReason{retryhttp.StopSuccess, retryhttp.StopQuotaWait}, reasons)
	assert.Empty(t, clock.Sleeps(), "no wait begun")
	served, denied := srv.counts()
	assert.Equal(t, 1, served)
	assert.Zero(t, denied)

	// The context's deadline bounds it too.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tr2 := testkit.NewTransport(t, retryhttp.WithClock(clock))
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	_, err = tr2.RoundTrip(req)
	assert.True(t, errors.As(err, &qe))
}

// A hold is written to the logger at LogLevelQuotaHold, with its scope,
// policy, remaining count and wait.
func TestQuotaHoldLogged(t *testing.T) {
	clock := retryhttptest.NewClock(time.Now())
	srv := newQuotaServer(t, clock, 1, 5*time.Second, "draft-11")
	var buf strings.Builder
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: retryhttp.LogLevelQuotaHold}))
	c := &http.Client{Transport: testkit.NewTransport(t, retryhttp.WithClock(clock), retryhttp.WithLogger(logger))}
	for range 2 {
		assert.Equal(t, http.StatusOK, testkit.Get(t, c, srv.URL+"/x?secret=1"))
	}
	mu.Lock()
	defer mu.Unlock()
	out := buf.String()
	assert.Contains(t, out, `msg="retryhttp: quota hold"`)
	assert.Contains(t, out, "scope="+srv.URL)
	assert.Contains(t, out, "policy=default remaining=0 wait=5s")
	assert.NotContains(t, out, "secret")
	assert.NotContains(t, out, "parked")
}

// A 429 whose quota the transport paces is retried at the turn it
// states, not later: DefaultDelayFn's wait, the stated reset jittered by
// a third, would find the new window spent by the requests sent at its
// turn. Here another client spends each window of 2 (10 s) from its
// fifth second; a request at the sixth meets its 429 (the turn 4 s
// away), eight windows in a row (on a fake clock: no real waiting).
func TestQuotaRetryAtTheTurn(t *testing.T) {
	clock := retryhttptest.NewClock(time.Now())
	start := clock.Now()
	const window = 10 * time.Second
	srv := othersSpendServer(t, clock, 2, window, func(at time.Duration) bool { return at%window >= window/2 })
	c, delays := delaysClient(t, clock)
	for k := range 8 {
		clock.Advance(start.Add(time.Duration(k)*window + 6*time.Second).Sub(clock.Now()))
		assert.Equal(t, http.StatusOK, testkit.Get(t, c, srv.URL))
	}
	require.NotEmpty(t, delays(), "the 429s were retried")
	for i, d := range delays() {
		assert.LessOrEqual(t, d, 4*time.Second, "retry %d: at the turn stated", i+1)
	}
}

// othersSpendServer is a loopback server of a fixed window of q requests
// per window on clock's time, from now, stated in draft-11's fields, whose
// windows other clients spend when spent says so of the time since it
// began; over the quota it answers 429 with the same fields.
func othersSpendServer(t *testing.T, clock *retryhttptest.Clock, q int, window time.Duration, spent func(time.Duration) bool) *httptest.Server {
	start := clock.Now()
	var mu sync.Mutex
	used, index := 0, int64(0)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		at := clock.Now().Sub(start)
		if i := int64(at / window); i != index {
			index, used = i, 0
		}
		if spent(at) {
			used = q
		}
		ok := used < q
		if ok {
			used++
		}
		left := time.Duration(index+1)*window - at
		w.Header().Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=%d`, q-used, int((left+time.Second-1)/time.Second)))
		w.Header().Set("RateLimit-Policy", fmt.Sprintf(`"default";q=%d;w=%d`, q, int(window/time.Second)))
		if !ok {
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(retryhttp.ForgetQuotas)
	return srv
}

// delaysClient returns a client on clock, and a function that returns the
// delays of the retries its transport decided so far.
func delaysClient(t *testing.T, clock *retryhttptest.Clock) (*http.Client, func() []time.Duration) {
	var mu sync.Mutex
	var delays []time.Duration
	c := &http.Client{Transport: testkit.NewTransport(t, retryhttp.WithClock(clock), retryhttp.WithHooks(retryhttp.Hooks{
		OnRetryDecision: func(d retryhttp.Decision) {
			if d.Retry {
				mu.Lock()
				delays = append(delays, d.Delay)
				mu.Unlock()
			}
		},
	}))}
	return c, func() []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(delays)
	}
}

// A retry in the pause lane waits for the answer to the one released
// before it; when the quota book holds that one until its window turns,
// the host is silent because the client is: the waiting retry is not taken
// for a retry of a silent host (no answer for the budget's MaxWait) and
// refused. Here a server states its reset in whole seconds, rounded down:
// two 429s half a second before the turn state none left, and a reset of
// 0; the book holds the first retry to the turn, the second waits in the
// lane, and both succeed.
func TestQuotaHoldIsNoSilence(t *testing.T) {
	clock := retryhttptest.NewManualClock(time.Now())
	start := clock.Now()
	const window = 10 * time.Second
	var mu sync.Mutex
	n, denied := 0, 0
	both := make(chan struct{}) // the two requests sent together are in
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		n++
		me := n
		if me == 2 || me == 3 {
			if me == 3 {
				close(both)
			}
			mu.Unlock()
			select {
			case <-both:
			case <-time.After(5 * time.Second):
			}
			mu.Lock()
		}
		defer mu.Unlock()
		at := clock.Now().Sub(start)
		left := window - at%window
		w.Header().Set("X-RateLimit-Limit", "3")
		w.Header().Set("X-RateLimit-Reset", fmt.Sprint(int(left/time.Second)))
		if me == 2 || me == 3 { // the others spent the window
			denied++
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.Header().Set("X-RateLimit-Remaining", "2")
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(retryhttp.ForgetQuotas)
	budget := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Clock: clock, MaxWait: 200 * time.Millisecond})
	c := &http.Client{Transport: testkit.NewTransport(t, retryhttp.WithClock(clock), retryhttp.WithRetryBudget(budget))}
	assert.Equal(t, http.StatusOK, testkit.Get(t, c, srv.URL)) // the quota known
	clock.Advance(window - 500*time.Millisecond)
	done := make(chan int, 2)
	for range 2 {
		go getInto(c, srv.URL, done)
	}
	// One retry held for the turn, one waiting in the lane.
	require.Eventually(t, func() bool { return clock.Timers() == 2 }, 5*time.Second, time.Millisecond)
	clock.Advance(500 * time.Millisecond) // the turn, past the budget's MaxWait
	next := func() int {
		select {
		case code := <-done:
			return code
		case <-time.After(5 * time.Second):
			t.Fatalf("a retry hangs: at %v, timers %d, sleeps %v", clock.Now().Sub(start), clock.Timers(), clock.Sleeps())
			return 0
		}
	}
	assert.Equal(t, http.StatusOK, next(), "the first answer: a retry refused for the client's own hold")
	for len(done) == 0 && clock.Now().Sub(start) < window+time.Second {
		clock.Advance(10 * time.Millisecond) // the second's own turn, the probe's answer
		time.Sleep(time.Millisecond)
	}
	assert.Equal(t, http.StatusOK, next())
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, 2, denied)
	assert.Equal(t, 5, n)
}

// A 429 late in its window states a turn in whole seconds, rounded up: up
// to a second after the turn. The book's earliest stated turn of the
// window (an answer that came as it began) is closer: the retry waits for
// that one, not for the 429's, where a fleet's others would have spent the
// new window. Here a window of 10 s turns at 10 s: an answer at 0.1 s
// states 10 s left (the turn at 10.1 s), a 429 at 5.5 s states 5 (10.5 s).
func TestQuotaRetryAtTheEarliestTurn(t *testing.T) {
	clock := retryhttptest.NewClock(time.Now())
	start := clock.Now()
	const window = 10 * time.Second
	srv := othersSpendServer(t, clock, 4, window, func(at time.Duration) bool { return at >= window/2 && at < window })
	c, delays := delaysClient(t, clock)
	clock.Advance(100 * time.Millisecond)
	for range 3 { // 0.1 s: the turn at 10.1 s, a fixed window
		assert.Equal(t, http.StatusOK, testkit.Get(t, c, srv.URL))
	}
	clock.Advance(5400 * time.Millisecond)
	assert.Equal(t, http.StatusOK, testkit.Get(t, c, srv.URL)) // 5.5 s: a 429, retried at the turn
	assert.GreaterOrEqual(t, clock.Now().Sub(start), window, "not before the turn")
	require.Len(t, delays(), 1)
	assert.InDelta(t, 4600*time.Millisecond, delays()[0], float64(10*time.Millisecond), "the book's turn (10.1 s), not the 429's (10.5 s)")
}

// A 429 of a quota the transport paces to (its fields state the window
// spent) is retried at the turn through the quota book's hold, which lets
// the new window's quota go in the order its waiters came, and not through
// the host's pause lane, whose pace (the pause stated, spaced over the
// retries it released) would send a fleet's retry a window past the turn
// (bench/storm's 4 x 50: its last process at 1.35x the limit, a 429's
// retry held 2 s past its delay). OnPark hears nothing (two events
// through the lane).
func TestQuotaRetryHeldByTheBookNotTheLane(t *testing.T) {
	clock := retryhttptest.NewClock(time.Now())
	start := clock.Now()
	const window = 10 * time.Second
	srv := othersSpendServer(t, clock, 4, window, func(at time.Duration) bool { return at >= window/2 && at < window })
	var mu sync.Mutex
	parked := 0
	c := &http.Client{Transport: testkit.NewTransport(t, retryhttp.WithClock(clock), retryhttp.WithHooks(retryhttp.Hooks{
		OnPark: func(retryhttp.ParkEvent) { mu.Lock(); parked++; mu.Unlock() },
	}))}
	assert.Equal(t, http.StatusOK, testkit.Get(t, c, srv.URL)) // the quota read: 4 per 10 s
	clock.Advance(5500 * time.Millisecond)
	assert.Equal(t, http.StatusOK, testkit.Get(t, c, srv.URL)) // a 429 (the others spent it), then the turn
	assert.GreaterOrEqual(t, clock.Now().Sub(start), window, "not before the turn")
	mu.Lock()
	defer mu.Unlock()
	assert.Zero(t, parked, "not the pause lane")
}
