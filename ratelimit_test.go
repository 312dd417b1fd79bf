package retryhttp_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// headers builds a header from name, value pairs; a name may repeat.
func headers(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// TestDelayPrecedence checks the order DefaultDelayFn reads the server's
// hints in, and the 429 backoff without any.
func TestDelayPrecedence(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	opts := retryhttp.CustomizedDelayFnOptions{JitterMagnitude: -1} // exact waits
	tests := []struct {
		name   string
		status int
		give   http.Header
		count  int
		r      float64
		want   time.Duration
	}{
		{"retry-after wins", 429, headers("Retry-After", "2", "RateLimit", `"a";r=0;t=10`, "X-RateLimit-Reset", "30"), 1, 0.5, 2 * time.Second},
		{"invalid retry-after: ietf", 429, headers("Retry-After", "soon", "RateLimit", `"a";r=0;t=10`), 1, 0.5, 10 * time.Second},
		{"x reset", 429, headers("X-RateLimit-Reset", "1800000030"), 1, 0.5, 30 * time.Second},
		{"429 without hints: 1s base", 429, http.Header{}, 1, 0.5, 500 * time.Millisecond},
		{"429 without hints, retry 3", 429, http.Header{}, 3, 0.5, 2 * time.Second},
		{"429 without hints, capped", 429, http.Header{}, 10, 0.5, 5 * time.Second},
		{"429 with past reset: backoff", 429, headers("X-RateLimit-Reset", "1700000000"), 1, 0.5, 500 * time.Millisecond},
		{"503 without hints: 250ms base", 503, http.Header{}, 1, 0.5, 125 * time.Millisecond},
		{"503 with reset but quota left: backoff", 503, headers("X-RateLimit-Reset", "30", "X-RateLimit-Remaining", "3"), 1, 0.5, 125 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := retryhttp.Attempt{Count: tt.count, Res: &http.Response{StatusCode: tt.status, Header: tt.give}}
			assert.Equal(t, tt.want, retryhttp.DelayWith(opts, a, now, tt.r))
		})
	}
	t.Run("jitter applies to reset waits", func(t *testing.T) {
		a := retryhttp.Attempt{Count: 1, Res: &http.Response{StatusCode: 429, Header: headers("RateLimit-Reset", "3")}}
		def := retryhttp.CustomizedDelayFnOptions{}
		assert.Equal(t, 2*time.Second, retryhttp.DelayWith(def, a, now, 0))
		assert.LessOrEqual(t, retryhttp.DelayWith(def, a, now, nextBelowOne), 4*time.Second)
	})
	t.Run("throttle base option", func(t *testing.T) {
		a := retryhttp.Attempt{Count: 2, Res: &http.Response{StatusCode: 429, Header: http.Header{}}}
		o := retryhttp.CustomizedDelayFnOptions{ThrottleBase: 3 * time.Second, Cap: time.Second}
		// Cap is raised to ThrottleBase: min(3s, 3s·2) = 3s.
		assert.Equal(t, 1500*time.Millisecond, retryhttp.DelayWith(o, a, now, 0.5))
	})
}

// TestDefaultDelayFn429Distribution checks the draws for a 429 without
// hints: uniform below 1s·2^(n−1).
func TestDefaultDelayFn429Distribution(t *testing.T) {
	const n = 20000
	a := retryhttp.Attempt{Count: 2, Res: &http.Response{StatusCode: 429, Header: http.Header{}}}
	s := sampleDelays(t, n, 0, 2*time.Second-1, func() time.Duration { return retryhttp.DefaultDelayFn(a) })
	assertUniform(t, n, s)
}

// TestRateLimitResetLoopback sends requests to a server that throttles with
// each kind of header and checks the waits the transport chose.
func TestRateLimitResetLoopback(t *testing.T) {
	tests := []struct {
		name     string
		give     http.Header
		min, max time.Duration
	}{
		{"ietf", headers("RateLimit", `"default";r=0;t=3`, "RateLimit-Policy", `"default";q=10;w=60`), 2 * time.Second, 4 * time.Second},
		{"reset", headers("RateLimit-Reset", "6"), 4 * time.Second, 8 * time.Second},
		{"x reset delta", headers("X-RateLimit-Reset", "9", "X-RateLimit-Remaining", "0"), 6 * time.Second, 12 * time.Second},
		{"x reset epoch", headers("X-RateLimit-Reset", "+epoch+"), 0, 0}, // filled below
		{"none", http.Header{}, 0, time.Second},
		{"hostile", headers("X-RateLimit-Reset", "-1", "RateLimit", `"x";r=0;t=abc`), 0, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			give := tt.give.Clone()
			lo, hi := tt.min, tt.max
			if give.Get("X-RateLimit-Reset") == "+epoch+" {
				// 30s ahead of the real clock, which DefaultDelayFn reads;
				// a second of slack either side for a slow machine.
				give.Set("X-RateLimit-Reset", strconvUnix(time.Now().Add(30*time.Second)))
				lo, hi = 19*time.Second, 41*time.Second
			}
			srv := testkit.NewCountingServer(t, func(n int64, w http.ResponseWriter, _ *http.Request) {
				if n == 1 {
					for k, v := range give {
						w.Header()[k] = v
					}
					w.WriteHeader(http.StatusTooManyRequests)
					return
				}
				_, _ = io.WriteString(w, "ok")
			})
			tr := testkit.NewTransport(t, testkit.UnlimitedBudget)
			clock := testkit.FakeWaits(tr)
			res, err := (&http.Client{Transport: tr}).Get(srv.URL)
			require.NoError(t, err)
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			assert.Equal(t, "ok", strings.TrimSpace(string(body)))
			assert.EqualValues(t, 2, srv.Attempts.Load())
			waits := clock.Sleeps()
			require.Len(t, waits, 1)
			assert.GreaterOrEqual(t, waits[0], lo)
			assert.LessOrEqual(t, waits[0], hi)
		})
	}
}

func strconvUnix(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

// TestHostileRateLimitReset sends GETs to servers that answer every request
// with a 429 carrying hostile rate-limit headers (and no Retry-After), and
// checks the attempts and waits: a huge wait returns the 429 at once, an
// invalid or past value falls back to the 429 backoff (1s base), never to
// an immediate retry.
func TestHostileRateLimitReset(t *testing.T) {
	throttleBackoff := func(t *testing.T, waits []time.Duration) {
		require.Len(t, waits, 3)
		for i, d := range waits {
			assert.GreaterOrEqual(t, d, time.Duration(0))
			assert.Less(t, d, time.Second<<i, "full jitter ceiling of retry %d", i+1)
		}
	}
	noWait := func(t *testing.T, waits []time.Duration) { assert.Empty(t, waits) }
	tests := []struct {
		name         string
		give         http.Header
		wantAttempts int64
		wantWaits    func(t *testing.T, waits []time.Duration)
	}{
		{"x 10^18: returned at once", headers("X-RateLimit-Reset", "1000000000000000000"), 1, noWait},
		{"x 10^30: returned at once", headers("X-RateLimit-Reset", "1"+strings.Repeat("0", 30)), 1, noWait},
		{"ietf t=10^12: returned at once", headers("RateLimit", `"a";r=0;t=1000000000000`), 1, noWait},
		{"reset of an hour: returned at once", headers("RateLimit-Reset", "3600"), 1, noWait},
		{"x in 2001: backoff, not at once", headers("X-RateLimit-Reset", "1000000000"), 4, throttleBackoff},
		{"x -1: backoff", headers("X-RateLimit-Reset", "-1"), 4, throttleBackoff},
		{"x NaN: backoff", headers("X-RateLimit-Reset", "NaN"), 4, throttleBackoff},
		{"ietf garbage: backoff", headers("RateLimit", `"a;r=0;t=`), 4, throttleBackoff},
		{"ietf 1,000 policies: the largest", headers("RateLimit", strings.Repeat(`"p";r=0;t=1, `, 999)+`"q";r=0;t=2`), 4,
			func(t *testing.T, waits []time.Duration) {
				require.Len(t, waits, 3)
				for _, d := range waits { // 2s ± 1/3
					assert.GreaterOrEqual(t, d, 4*time.Second/3)
					assert.LessOrEqual(t, d, 8*time.Second/3)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
				for k, v := range tt.give {
					w.Header()[k] = v
				}
				w.WriteHeader(http.StatusTooManyRequests)
			})
			tr := testkit.NewTransport(t, testkit.UnlimitedBudget)
			clock := testkit.FakeWaits(tr)
			res, err := (&http.Client{Transport: tr}).Get(srv.URL)
			require.NoError(t, err)
			res.Body.Close()
			assert.Equal(t, http.StatusTooManyRequests, res.StatusCode, "the last 429, as it is")
			assert.Equal(t, tt.wantAttempts, srv.Attempts.Load())
			tt.wantWaits(t, clock.Sleeps())
		})
	}
}

// TestHoldDuringPause: with WithHoldDuringPause, a request that its host's
// server did not answer yet waits while the pause the server stated for
// another request runs; by default it is sent at once (the pause is the
// request's). The server answers its first request 429 with Retry-After: 1
// and every other one 200; a second request starts 100ms after the 429.
func TestHoldDuringPause(t *testing.T) {
	for _, hold := range []bool{false, true} {
		t.Run(strconv.FormatBool(hold), func(t *testing.T) {
			var mu sync.Mutex
			var paused, second time.Time // when the 429 left, when /second arrived
			limited := make(chan struct{})
			srv := testkit.NewCountingServer(t, func(n int64, w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				switch {
				case n == 1:
					paused = time.Now()
					w.Header().Set("Retry-After", "1")
					w.WriteHeader(http.StatusTooManyRequests)
					close(limited)
				case r.URL.Path == "/second":
					second = time.Now()
				}
			})
			c := testkit.NewClient(t, retryhttp.WithRetryBudget(retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{})),
				retryhttp.WithHoldDuringPause(hold))
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				assert.Equal(t, http.StatusOK, testkit.Get(t, c, srv.URL+"/first"), "retried after its pause")
			}()
			<-limited
			time.Sleep(100 * time.Millisecond)
			assert.Equal(t, http.StatusOK, testkit.Get(t, c, srv.URL+"/second"))
			wg.Wait()
			mu.Lock()
			defer mu.Unlock()
			if hold {
				assert.GreaterOrEqual(t, second.Sub(paused), time.Second, "held until the pause ran out")
			} else {
				assert.Less(t, second.Sub(paused), 500*time.Millisecond, "sent at once")
			}
			assert.Equal(t, int64(3), srv.Attempts.Load(), "no request met the limit twice")
		})
	}
}
