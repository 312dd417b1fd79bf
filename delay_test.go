package retryhttp_test

import (
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/retryafter"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const longestDuration = time.Duration(math.MaxInt64)

// nextBelowOne is the largest float64 below 1, the highest value
// math/rand/v2's Float64 can return.
var nextBelowOne = math.Nextafter(1, 0)

func retryAfterHeader(values ...string) http.Header {
	h := http.Header{}
	for _, v := range values {
		h.Add("Retry-After", v)
	}
	return h
}

func TestDelayWithRetryAfter(t *testing.T) {
	now := time.Date(2006, time.January, 2, 15, 4, 5, 0, time.UTC)
	res := &http.Response{StatusCode: 503, Header: retryAfterHeader("3")}
	a := retryhttp.Attempt{Count: 1, Res: res}
	d := 3 * time.Second
	def := retryhttp.CustomizedDelayFnOptions{}
	tests := []struct {
		name string
		opts retryhttp.CustomizedDelayFnOptions
		r    float64
		want time.Duration
	}{
		{"r=0 gives 2/3", def, 0, 2 * d / 3},
		{"r=0.5 gives d", def, 0.5, d},
		{"r=0.25", def, 0.25, 5 * d / 6},
		{"r=0.75", def, 0.75, 7 * d / 6},
		{"r->1 approaches 4/3", def, nextBelowOne, 4 * d / 3},
		{"jitter 0 means default", retryhttp.CustomizedDelayFnOptions{JitterMagnitude: 0}, 0, 2 * d / 3},
		{"jitter NaN means default", retryhttp.CustomizedDelayFnOptions{JitterMagnitude: math.NaN()}, 0, 2 * d / 3},
		{"jitter NaN high", retryhttp.CustomizedDelayFnOptions{JitterMagnitude: math.NaN()}, nextBelowOne, 4 * d / 3},
		{"jitter negative means none/low", retryhttp.CustomizedDelayFnOptions{JitterMagnitude: -0.5}, 0, d},
		{"jitter negative means none/high", retryhttp.CustomizedDelayFnOptions{JitterMagnitude: -0.5}, nextBelowOne, d},
		{"jitter -Inf means none", retryhttp.CustomizedDelayFnOptions{JitterMagnitude: math.Inf(-1)}, 0, d},
		{"jitter 0.1 low", retryhttp.CustomizedDelayFnOptions{JitterMagnitude: 0.1}, 0, 9 * d / 10},
		{"jitter 0.1 high", retryhttp.CustomizedDelayFnOptions{JitterMagnitude: 0.1}, nextBelowOne, 11 * d / 10},
		{"jitter 1 low", retryhttp.CustomizedDelayFnOptions{JitterMagnitude: 1}, 0, 0},
		{"jitter 1 high", retryhttp.CustomizedDelayFnOptions{JitterMagnitude: 1}, nextBelowOne, 2 * d},
		{"jitter 5 is 1/low", retryhttp.CustomizedDelayFnOptions{JitterMagnitude: 5}, 0, 0},
		{"jitter 5 is 1/high", retryhttp.CustomizedDelayFnOptions{JitterMagnitude: 5}, nextBelowOne, 2 * d},
		{"jitter +Inf is 1", retryhttp.CustomizedDelayFnOptions{JitterMagnitude: math.Inf(1)}, nextBelowOne, 2 * d},
		{"base and cap do not bound Retry-After", retryhttp.CustomizedDelayFnOptions{Base: time.Millisecond, Cap: time.Millisecond}, 0.5, d},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := retryhttp.DelayWith(tt.opts, a, now, tt.r)
			assert.InDelta(t, float64(tt.want), float64(got), 2, "got %v", got)
		})
	}
}

func TestDelayWithRetryAfterEdges(t *testing.T) {
	now := time.Date(2006, time.January, 2, 15, 4, 5, 0, time.UTC)
	attempt := func(code int, h http.Header) retryhttp.Attempt {
		return retryhttp.Attempt{Count: 2, Res: &http.Response{StatusCode: code, Header: h}}
	}
	def := retryhttp.CustomizedDelayFnOptions{}
	tests := []struct {
		name string
		give retryhttp.Attempt
		r    float64
		want time.Duration
	}{
		{"zero", attempt(503, retryAfterHeader("0")), nextBelowOne, 0},
		{"past date", attempt(503, retryAfterHeader("Mon, 02 Jan 2006 15:00:00 GMT")), nextBelowOne, 0},
		{"date", attempt(503, retryAfterHeader("Mon, 02 Jan 2006 15:04:35 GMT")), 0.5, 30 * time.Second},
		{"huge saturates low", attempt(503, retryAfterHeader("1000000000000000000")), 0, longestDuration / 3 * 2},
		{"huge saturates high", attempt(503, retryAfterHeader("1000000000000000000")), nextBelowOne, longestDuration},
		{"huge saturates mid", attempt(503, retryAfterHeader("18446744073709551616")), 0.5, longestDuration},
		{"far future date", attempt(503, retryAfterHeader("Fri, 31 Dec 9999 23:59:59 GMT")), nextBelowOne, longestDuration},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := retryhttp.DelayWith(def, tt.give, now, tt.r)
			assert.InDelta(t, float64(tt.want), float64(got), float64(tt.want)*1e-9+2, "got %v", got)
			assert.GreaterOrEqual(t, got, time.Duration(0))
		})
	}
}

// TestDelayWithoutValidRetryAfter checks that an absent or invalid
// Retry-After falls back to full jitter backoff.
func TestDelayWithoutValidRetryAfter(t *testing.T) {
	now := time.Date(2006, time.January, 2, 15, 4, 5, 0, time.UTC)
	tests := []struct {
		name string
		give http.Header
	}{
		{"absent", http.Header{}},
		{"negative", retryAfterHeader("-5")},
		{"fraction", retryAfterHeader("2.5")},
		{"garbage", retryAfterHeader("later")},
		{"empty", retryAfterHeader("")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := retryhttp.Attempt{Count: 3, Res: &http.Response{StatusCode: 503, Header: tt.give}}
			// Retry 3 with the defaults: ceiling 250ms·2² = 1s.
			def := retryhttp.CustomizedDelayFnOptions{}
			assert.Equal(t, time.Duration(0), retryhttp.DelayWith(def, a, now, 0))
			assert.Equal(t, 500*time.Millisecond, retryhttp.DelayWith(def, a, now, 0.5))
			assert.Equal(t, time.Second-1, retryhttp.DelayWith(def, a, now, nextBelowOne))
		})
	}
	t.Run("error attempt", func(t *testing.T) {
		a := retryhttp.Attempt{Count: 1, Err: fakeTimeoutErr{}}
		assert.Equal(t, 125*time.Millisecond, retryhttp.DelayWith(retryhttp.CustomizedDelayFnOptions{}, a, now, 0.5))
	})
}

func TestCustomizedDelayFnOptions(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name     string
		give     retryhttp.CustomizedDelayFnOptions
		count    int
		wantCeil time.Duration
	}{
		{"zero is default/1", retryhttp.CustomizedDelayFnOptions{}, 1, 250 * time.Millisecond},
		{"zero is default/7", retryhttp.CustomizedDelayFnOptions{}, 7, 10 * time.Second},
		{"base", retryhttp.CustomizedDelayFnOptions{Base: time.Second}, 2, 2 * time.Second},
		{"base and default cap", retryhttp.CustomizedDelayFnOptions{Base: time.Second}, 10, 10 * time.Second},
		{"cap", retryhttp.CustomizedDelayFnOptions{Cap: time.Second}, 10, time.Second},
		{"base and cap", retryhttp.CustomizedDelayFnOptions{Base: 10 * time.Millisecond, Cap: 50 * time.Millisecond}, 3, 40 * time.Millisecond},
		{"base and cap capped", retryhttp.CustomizedDelayFnOptions{Base: 10 * time.Millisecond, Cap: 50 * time.Millisecond}, 4, 50 * time.Millisecond},
		{"negative base is default", retryhttp.CustomizedDelayFnOptions{Base: -time.Second}, 1, 250 * time.Millisecond},
		{"negative cap is default", retryhttp.CustomizedDelayFnOptions{Cap: -time.Second}, 100, 10 * time.Second},
		{"cap below base is raised to base", retryhttp.CustomizedDelayFnOptions{Base: time.Second, Cap: time.Millisecond}, 5, time.Second},
		{"cap below default base", retryhttp.CustomizedDelayFnOptions{Cap: time.Millisecond}, 1, 250 * time.Millisecond},
		{"base above default cap", retryhttp.CustomizedDelayFnOptions{Base: time.Minute}, 3, time.Minute},
		{"1ns base and cap", retryhttp.CustomizedDelayFnOptions{Base: 1, Cap: 1}, 1, 1},
		{"huge base and cap", retryhttp.CustomizedDelayFnOptions{Base: longestDuration, Cap: longestDuration}, math.MaxInt, longestDuration},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := retryhttp.Attempt{Count: tt.count, Err: fakeTimeoutErr{}}
			assert.Equal(t, time.Duration(0), retryhttp.DelayWith(tt.give, a, now, 0))
			assert.InDelta(t, float64(tt.wantCeil/2), float64(retryhttp.DelayWith(tt.give, a, now, 0.5)), 1)
			assert.InDelta(t, float64(max(tt.wantCeil-1, 0)), float64(retryhttp.DelayWith(tt.give, a, now, nextBelowOne)), float64(tt.wantCeil)*1e-12)
		})
	}
}

// TestCustomizedDelayFnNeverPanics runs the real DelayFn, with its real random
// source, over option values that broke the reference implementation.
func TestCustomizedDelayFnNeverPanics(t *testing.T) {
	opts := []retryhttp.CustomizedDelayFnOptions{
		{},
		{Base: 0},
		{Base: -1},
		{Base: math.MinInt64},
		{Cap: -1},
		{Base: time.Second, Cap: time.Nanosecond},
		{Base: longestDuration, Cap: longestDuration},
		{JitterMagnitude: math.NaN()},
		{JitterMagnitude: math.Inf(1)},
		{JitterMagnitude: math.Inf(-1)},
		{JitterMagnitude: -1},
	}
	attempts := []retryhttp.Attempt{
		{Count: 1},
		{Count: 0},
		{Count: -1},
		{Count: math.MaxInt},
		{Count: 64, Res: &http.Response{StatusCode: 503}},
		{Count: 2, Res: &http.Response{StatusCode: 503, Header: retryAfterHeader("18446744073709551616")}},
		{Count: 2, Res: &http.Response{StatusCode: 503, Header: retryAfterHeader("-1")}},
		{Count: 2, Res: &http.Response{StatusCode: 503, Header: retryAfterHeader("Fri, 31 Dec 9999 23:59:59 GMT")}},
	}
	for _, o := range opts {
		fn := retryhttp.CustomizedDelayFn(o)
		for _, a := range attempts {
			assert.NotPanics(t, func() {
				assert.GreaterOrEqual(t, fn(a), time.Duration(0), "opts=%+v count=%d", o, a.Count)
			})
		}
	}
}

// sampleStats summarises delays drawn for one range [lo, hi).
type sampleStats struct {
	min, max, mean   float64 // as shares of the range
	belowQ1, aboveQ3 int     // samples in [lo, lo+w/4) and [lo+3w/4, hi)
}

// sampleDelays draws n delays and checks that all fall in [lo, hi].
func sampleDelays(t *testing.T, n int, lo, hi time.Duration, draw func() time.Duration) sampleStats {
	t.Helper()
	s := sampleStats{min: math.Inf(1), max: math.Inf(-1)}
	w := float64(hi - lo)
	var sum float64
	var outside []time.Duration
	for i := 0; i < n; i++ {
		d := draw()
		if d < lo || d > hi {
			outside = append(outside, d)
		}
		f := float64(d - lo)
		sum += f
		s.min = math.Min(s.min, f/w)
		s.max = math.Max(s.max, f/w)
		switch {
		case f < w/4:
			s.belowQ1++
		case f >= 3*w/4:
			s.aboveQ3++
		}
	}
	require.Empty(t, outside, "delays outside [%v, %v]", lo, hi)
	s.mean = sum / float64(n) / w
	return s
}

// assertUniform checks that samples of a uniform distribution over a range
// look uniform: the mean (as a share of the range) is close to 1/2, both
// outer quarters hold about a quarter of the samples, and the extremes come
// close to both ends. With 20,000 samples the standard error of the mean is
// 0.2% of the range, so a 2% tolerance is ten standard errors.
func assertUniform(t *testing.T, n int, s sampleStats) {
	t.Helper()
	assert.InDelta(t, 0.5, s.mean, 0.02, "mean")
	assert.InDelta(t, 0.25, float64(s.belowQ1)/float64(n), 0.03, "first quarter")
	assert.InDelta(t, 0.25, float64(s.aboveQ3)/float64(n), 0.03, "last quarter")
	assert.Less(t, s.min, 0.1, "min")
	assert.Greater(t, s.max, 0.9, "max")
}

func TestDefaultDelayFnBackoffDistribution(t *testing.T) {
	const n = 20000
	tests := []struct {
		give int // retry number
		want time.Duration
	}{
		{1, 250 * time.Millisecond},
		{2, 500 * time.Millisecond},
		{3, time.Second},
		{4, 2 * time.Second},
		{5, 4 * time.Second},
		{6, 8 * time.Second},
		{7, 10 * time.Second},
		{20, 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.want.String(), func(t *testing.T) {
			a := retryhttp.Attempt{Count: tt.give, Res: &http.Response{StatusCode: 503, Header: http.Header{}}}
			// The ceiling itself is excluded.
			s := sampleDelays(t, n, 0, tt.want-1, func() time.Duration {
				return retryhttp.DefaultDelayFn(a)
			})
			assertUniform(t, n, s)
		})
	}
}

func TestDefaultDelayFnRetryAfterDistribution(t *testing.T) {
	const n = 20000
	tests := []struct {
		give string
		want time.Duration
	}{
		{"1", time.Second},
		{"3", 3 * time.Second},
		{"120", 2 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			a := retryhttp.Attempt{Count: 1, Res: &http.Response{StatusCode: 503, Header: retryAfterHeader(tt.give)}}
			s := sampleDelays(t, n, tt.want*2/3, tt.want*4/3, func() time.Duration {
				return retryhttp.DefaultDelayFn(a)
			})
			assertUniform(t, n, s)
		})
	}
}

func TestCustomizedDelayFnDistribution(t *testing.T) {
	const n = 20000
	fn := retryhttp.CustomizedDelayFn(retryhttp.CustomizedDelayFnOptions{
		Base: 10 * time.Millisecond, Cap: 30 * time.Millisecond, JitterMagnitude: 0.5,
	})
	t.Run("backoff capped", func(t *testing.T) {
		a := retryhttp.Attempt{Count: 5, Err: fakeTimeoutErr{}}
		s := sampleDelays(t, n, 0, 30*time.Millisecond, func() time.Duration { return fn(a) })
		assertUniform(t, n, s)
	})
	t.Run("retry-after", func(t *testing.T) {
		a := retryhttp.Attempt{Count: 1, Res: &http.Response{StatusCode: 429, Header: retryAfterHeader("2")}}
		s := sampleDelays(t, n, time.Second, 3*time.Second, func() time.Duration { return fn(a) })
		assertUniform(t, n, s)
	})
}

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
		{"llm requests spent", 429, headers("X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "6m0s",
			"X-Ratelimit-Remaining-Tokens", "100", "X-Ratelimit-Reset-Tokens", "20ms"), 1, 0.5, 6 * time.Minute},
		{"llm tokens spent", 429, headers("X-Ratelimit-Remaining-Requests", "9", "X-Ratelimit-Reset-Requests", "6m0s",
			"X-Ratelimit-Remaining-Tokens", "0", "X-Ratelimit-Reset-Tokens", "1m30.5s"), 1, 0.5, 90500 * time.Millisecond},
		{"llm 429, none spent: the longest", 429, headers("X-Ratelimit-Reset-Requests", "1s", "X-Ratelimit-Reset-Tokens", "20ms"), 1, 0.5, time.Second},
		{"llm 503, requests spent", 503, headers("X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "20ms"), 1, 0.5, 20 * time.Millisecond},
		{"llm 503, quota left: backoff", 503, headers("X-Ratelimit-Remaining-Requests", "4", "X-Ratelimit-Reset-Requests", "6m0s"), 1, 0.5, 125 * time.Millisecond},
		{"llm malformed: 429 backoff", 429, headers("X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "6"), 1, 0.5, 500 * time.Millisecond},
		{"llm huge: saturates", 429, headers("X-Ratelimit-Reset-Requests", "99999999999999h"), 1, 0.5, time.Duration(math.MaxInt64)},
		{"x reset before llm", 429, headers("X-RateLimit-Reset", "30", "X-Ratelimit-Reset-Requests", "1s"), 1, 0.5, 30 * time.Second},
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
		{"llm reset", headers("X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "3s",
			"X-Ratelimit-Remaining-Tokens", "5000", "X-Ratelimit-Reset-Tokens", "1m0s"), 2 * time.Second, 4 * time.Second},
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
			t.Cleanup(retryhttp.ForgetQuotas) // its fields leave no quota for a later test's server on its port
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
			// The retry's delay, then, when it ends before the quota the
			// answer stated turns (a jitter below a reset; r=0 without a
			// valid t: a second), a hold of that quota (quota.go) until
			// it turns: the retry leaves within [lo, hi] all the same.
			waits := clock.Sleeps()
			require.NotEmpty(t, waits)
			require.LessOrEqual(t, len(waits), 2)
			var total time.Duration
			for _, w := range waits {
				total += w
			}
			assert.GreaterOrEqual(t, total, lo)
			assert.LessOrEqual(t, total, hi)
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
		{"llm 10^14 hours: returned at once", headers("X-Ratelimit-Reset-Requests", "99999999999999h"), 1, noWait},
		{"llm -1s: backoff", headers("X-Ratelimit-Remaining-Requests", "0", "X-Ratelimit-Reset-Requests", "-1s"), 4, throttleBackoff},
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
			t.Cleanup(retryhttp.ForgetQuotas) // its fields leave no quota for a later test's server on its port
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
			t.Cleanup(retryhttp.ForgetQuotas) // its fields leave no quota for a later test's server on its port
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

// fuzzNow is the time Retry-After dates are measured from in the fuzzers.
var fuzzNow = time.Date(2006, time.January, 2, 15, 4, 5, 0, time.UTC)

// retryAfterSeeds are Retry-After values worth trying first: valid, invalid,
// huge and in each of the three date formats.
var retryAfterSeeds = []string{
	"", " ", "0", "5", " 7 ", "0012", "86400",
	"9223372036", "9223372037", "100000000000000000", "1000000000000000000",
	"18446744073709551615", "18446744073709551616", "1" + strings.Repeat("0", 99),
	"-1", "-0", "+5", "1.5", "1e3", "0x10", "abc", "5s", "1 5", "٥",
	"Mon, 02 Jan 2006 15:04:35 GMT", "Mon, 02 Jan 2006 15:03:05 GMT",
	"Thu, 01 Jan 1970 00:00:00 GMT", "Fri, 31 Dec 9999 23:59:59 GMT",
	"Monday, 02-Jan-06 15:05:05 GMT", "Sunday, 01-Jan-06 15:04:05 GMT",
	"Mon Jan  2 16:04:05 2006", "Mon, 32 Jan 2006 15:04:05 GMT",
	"2006-01-02T15:05:05Z",
}

// isASCIIDigits reports whether s is one or more ASCII digits.
func isASCIIDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// FuzzParseRetryAfter fuzzes internal/retryafter.Parse, with the seeds
// FuzzDelay shares.
func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range retryAfterSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		h := http.Header{"Retry-After": {v}}
		d, ok := retryafter.Parse(h, func() time.Time { return fuzzNow })
		if d < 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, negative", v, d)
		}
		trimmed := strings.TrimSpace(v)
		_, dateErr := http.ParseTime(trimmed)
		valid := isASCIIDigits(trimmed) || dateErr == nil
		if ok != valid {
			t.Fatalf("ParseRetryAfter(%q) ok = %v, want %v", v, ok, valid)
		}
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, false: want 0", v, d)
		}
		// Whole seconds that fit in a Duration parse exactly; larger ones
		// saturate.
		if isASCIIDigits(trimmed) {
			secs, err := strconv.ParseUint(trimmed, 10, 64)
			want := longestDuration
			if err == nil && secs <= uint64(longestDuration/time.Second) {
				want = time.Duration(secs) * time.Second
			}
			if d != want {
				t.Fatalf("ParseRetryAfter(%q) = %v, want %v", v, d, want)
			}
		}
	})
}

func FuzzDelay(f *testing.F) {
	for i, s := range retryAfterSeeds {
		f.Add(s, i%8, int64(0), int64(0), 0.0, float64(i)/float64(len(retryAfterSeeds)))
	}
	f.Add("", 1, int64(0), int64(-1), math.NaN(), 0.5)
	f.Add("", 64, int64(1), int64(math.MaxInt64), 0.0, nextBelowOne)
	f.Add("", 63, int64(1), int64(math.MaxInt64), 0.0, 0.5)
	f.Add("", math.MaxInt, int64(math.MaxInt64), int64(math.MaxInt64), 0.0, nextBelowOne)
	f.Add("", math.MinInt, int64(math.MinInt64), int64(math.MinInt64), -1.0, 0.0)
	f.Add("", 3, int64(time.Second), int64(time.Millisecond), 0.0, 0.999999999)
	f.Add("3", 1, int64(0), int64(0), math.Inf(1), nextBelowOne)
	f.Add("3", 1, int64(0), int64(0), math.Inf(-1), 0.0)
	f.Add("18446744073709551616", 1, int64(0), int64(0), 1.0, nextBelowOne)
	f.Add("Fri, 31 Dec 9999 23:59:59 GMT", 1, int64(0), int64(0), 5.0, nextBelowOne)
	f.Fuzz(func(t *testing.T, v string, count int, base, ceil int64, jitter, r float64) {
		// r is a random number in [0, 1), as math/rand/v2's Float64 gives.
		r = math.Abs(math.Mod(r, 1))
		if math.IsNaN(r) {
			r = 0
		}
		opts := retryhttp.CustomizedDelayFnOptions{
			Base:            time.Duration(base),
			Cap:             time.Duration(ceil),
			JitterMagnitude: jitter,
		}
		a := retryhttp.Attempt{
			Count: count,
			Res:   &http.Response{StatusCode: 503, Header: http.Header{"Retry-After": {v}}},
		}
		d := retryhttp.DelayWith(opts, a, fuzzNow, r)
		if d < 0 {
			t.Fatalf("delay(%q, %d, %+v, r=%v) = %v, negative", v, count, opts, r, d)
		}
		if _, ok := retryafter.Parse(a.Res.Header, func() time.Time { return fuzzNow }); ok {
			return
		}
		// Backoff: below the effective cap (the default for values that
		// are not positive, raised to the base).
		b, c := opts.Base, opts.Cap
		if b <= 0 {
			b = 250 * time.Millisecond
		}
		if c <= 0 {
			c = 10 * time.Second
		}
		c = max(c, b)
		if d >= c {
			t.Fatalf("delay(%q, %d, %+v, r=%v) = %v, not below the cap %v", v, count, opts, r, d, c)
		}
		// The real DelayFn, with its own random source, keeps the bound too.
		if d := retryhttp.CustomizedDelayFn(opts)(a); d < 0 || d >= c {
			t.Fatalf("CustomizedDelayFn(%+v) = %v, out of [0, %v)", opts, d, c)
		}
	})
}
