package backoff

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nextBelowOne is the largest float64 below 1, the highest value
// math/rand/v2's Float64 can return.
var nextBelowOne = math.Nextafter(1, 0)

// fullJitterCeiling is min(ceil, base·2^(n−1)), computed in floating point
// so that it cannot overflow.
func fullJitterCeiling(base, ceil time.Duration, n int) time.Duration {
	f := float64(base) * math.Pow(2, float64(n-1))
	if f >= float64(ceil) {
		return ceil
	}
	return time.Duration(f)
}

func TestFullJitterBounds(t *testing.T) {
	configs := []struct{ base, ceil time.Duration }{
		{250 * time.Millisecond, 10 * time.Second},
		{time.Nanosecond, MaxDuration},
		{3, MaxDuration},
		{time.Nanosecond, time.Nanosecond},
		{time.Second, time.Second},
		{7 * time.Millisecond, 1<<62 + 12345},
		{time.Hour, MaxDuration},
		{MaxDuration, MaxDuration},
		{1 << 40, 1<<62 - 1},
	}
	rs := []float64{0, 0.5, 0.999999999, nextBelowOne}
	for _, c := range configs {
		for n := 1; n <= 100; n++ {
			limit := fullJitterCeiling(c.base, c.ceil, n)
			for _, r := range rs {
				got := FullJitter(c.base, c.ceil, n, r)
				require.GreaterOrEqual(t, got, time.Duration(0), "base=%v cap=%v n=%d r=%v", c.base, c.ceil, n, r)
				require.Less(t, got, limit, "base=%v cap=%v n=%d r=%v", c.base, c.ceil, n, r)
			}
			// The middle draw lands in the middle of the range: the
			// ceiling is the right one, not merely an upper bound.
			mid := FullJitter(c.base, c.ceil, n, 0.5)
			require.InDelta(t, float64(limit)/2, float64(mid), float64(limit)*1e-12+1, "base=%v cap=%v n=%d", c.base, c.ceil, n)
			require.Equal(t, time.Duration(0), FullJitter(c.base, c.ceil, n, 0))
		}
	}
}

// TestFullJitterExactCeilingAtRetry63 pins a fixed bug: with base 1ns and
// the longest cap, retry 63 (a shift of 62) used the cap, 2^63−1ns, as its
// ceiling instead of base·2^62.
func TestFullJitterExactCeilingAtRetry63(t *testing.T) {
	assert.Equal(t, time.Duration(1<<61), FullJitter(1, MaxDuration, 63, 0.5))
	assert.Equal(t, time.Duration(1<<62), FullJitter(1, MaxDuration, 64, 0.5))
}

func TestFullJitterDefaults(t *testing.T) {
	base, ceil := 250*time.Millisecond, 10*time.Second
	tests := []struct {
		give int
		want time.Duration // the ceiling
	}{
		{-5, 250 * time.Millisecond}, // counts as 1
		{0, 250 * time.Millisecond},
		{1, 250 * time.Millisecond},
		{2, 500 * time.Millisecond},
		{3, time.Second},
		{4, 2 * time.Second},
		{5, 4 * time.Second},
		{6, 8 * time.Second},
		{7, 10 * time.Second},
		{8, 10 * time.Second},
		{62, 10 * time.Second},
		{63, 10 * time.Second},
		{64, 10 * time.Second},
		{65, 10 * time.Second},
		{1000, 10 * time.Second},
		{math.MaxInt, 10 * time.Second},
		{math.MinInt, 250 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.give), func(t *testing.T) {
			assert.Equal(t, tt.want/2, FullJitter(base, ceil, tt.give, 0.5))
			assert.Equal(t, tt.want-1, FullJitter(base, ceil, tt.give, nextBelowOne))
			assert.Equal(t, time.Duration(0), FullJitter(base, ceil, tt.give, 0))
		})
	}
}

// TestFullJitterDegenerate checks inputs that CustomizedDelayFn never
// passes (it validates them first): no panic, never negative.
func TestFullJitterDegenerate(t *testing.T) {
	tests := []struct {
		name       string
		base, ceil time.Duration
	}{
		{"zero base", 0, time.Second},
		{"zero cap", time.Second, 0},
		{"both zero", 0, 0},
		{"negative base", -time.Second, time.Second},
		{"negative cap", time.Second, -time.Second},
		{"min base", math.MinInt64, MaxDuration},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, n := range []int{math.MinInt, 0, 1, 2, 62, 63, 64, 1000, math.MaxInt} {
				for _, r := range []float64{0, 0.5, nextBelowOne} {
					assert.GreaterOrEqual(t, FullJitter(tt.base, tt.ceil, n, r), time.Duration(0))
				}
			}
		})
	}
}

// TestJitterBounds checks that Jitter stays within d·(1±magnitude), lands
// in the middle for the middle draw, and is monotonic in r.
func TestJitterBounds(t *testing.T) {
	ds := []time.Duration{0, 1, time.Millisecond, 3 * time.Second, time.Hour, MaxDuration / 4}
	for _, d := range ds {
		for _, m := range []float64{0, 0.1, 1.0 / 3, 1} {
			lo, hi := float64(d)*(1-m), float64(d)*(1+m)
			prev := time.Duration(0)
			for _, r := range []float64{0, 0.25, 0.5, 0.75, nextBelowOne} {
				got := Jitter(d, m, r)
				require.GreaterOrEqual(t, float64(got), lo*(1-1e-12)-1, "d=%v m=%v r=%v", d, m, r)
				require.LessOrEqual(t, float64(got), hi*(1+1e-12)+1, "d=%v m=%v r=%v", d, m, r)
				require.GreaterOrEqual(t, got, prev, "d=%v m=%v r=%v: not monotonic", d, m, r)
				prev = got
			}
			assert.InDelta(t, float64(d), float64(Jitter(d, m, 0.5)), float64(d)*1e-12+1, "d=%v m=%v", d, m)
		}
	}
}

func TestJitterExamples(t *testing.T) {
	d := 3 * time.Second
	assert.Equal(t, 2*time.Second, Jitter(d, 1.0/3, 0))
	assert.Equal(t, d, Jitter(d, 0, nextBelowOne))
	assert.Equal(t, time.Duration(0), Jitter(d, 1, 0))
	assert.InDelta(t, float64(2*d), float64(Jitter(d, 1, nextBelowOne)), 1)
}

// TestJitterSaturates checks the ends: a wait too long to move up
// saturates at MaxDuration, and nothing is ever negative.
func TestJitterSaturates(t *testing.T) {
	assert.Equal(t, MaxDuration, Jitter(MaxDuration, 1, nextBelowOne))
	assert.Equal(t, MaxDuration, Jitter(MaxDuration/2+MaxDuration/4, 1, nextBelowOne))
	assert.Equal(t, time.Duration(0), Jitter(-time.Second, 0.5, 0.5))
	assert.Equal(t, time.Duration(0), Jitter(time.Second, 5, 0))
}
