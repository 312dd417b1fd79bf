package retryhttp_test

import (
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
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
