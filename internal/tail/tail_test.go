package tail

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// Every latency from 8.2 µs to 137 s falls in a bucket whose upper bound is
// above it by at most 12.5%; the buckets are in order.
func TestTailBucketBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		d := time.Duration(math.Exp(rng.Float64()*math.Log(float64(1<<37-1<<13)))) + 1<<13
		i := tailBucket(d)
		up := tailUpper(i)
		if up <= d || float64(up) > float64(d)*1.125 {
			t.Fatalf("latency %v: bucket %d, upper bound %v: want in (d, 1.125 d]", d, i, up)
		}
		if i > 0 && tailUpper(i-1) > d {
			t.Fatalf("latency %v: bucket %d, but the one below ends at %v", d, i, tailUpper(i-1))
		}
	}
	tests := []struct {
		give time.Duration
		want int
	}{
		{-time.Second, 0},
		{0, 0},
		{time.Microsecond, 0},
		{time.Hour, tailBuckets - 1},
		{math.MaxInt64, tailBuckets - 1},
	}
	for _, tt := range tests {
		if got := tailBucket(tt.give); got != tt.want {
			t.Errorf("tailBucket(%v) = %d, want %d", tt.give, got, tt.want)
		}
	}
}

func TestTailQuantileClamped(t *testing.T) {
	tests := []struct {
		give, want float64
	}{
		{math.NaN(), 0},
		{math.Inf(-1), 0},
		{-1, 0},
		{0, 0},
		{0.1, 0.5},
		{0.5, 0.5},
		{0.95, 0.95},
		{0.999, 0.999},
		{1, 0.999},
		{math.Inf(1), 0.999},
	}
	for _, tt := range tests {
		if got := ClampQuantile(tt.give); got != tt.want {
			t.Errorf("ClampQuantile(%v) = %v, want %v", tt.give, got, tt.want)
		}
	}
}

// The quantile of a window lies between the true quantile of the samples
// recorded and 12.5% above it, for several distributions and quantiles.
func TestTailQuantileWithinBucket(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	dists := map[string]func() time.Duration{
		"uniform 1-3ms": func() time.Duration { return time.Millisecond + time.Duration(rng.Int64N(int64(2*time.Millisecond))) },
		"5% tail 10x": func() time.Duration {
			d := time.Millisecond + time.Duration(rng.Int64N(int64(time.Millisecond)))
			if rng.Float64() < 0.05 {
				d *= 10
			}
			return d
		},
		"exponential 5ms": func() time.Duration { return time.Duration(rng.ExpFloat64() * float64(5*time.Millisecond)) },
	}
	for name, draw := range dists {
		for _, q := range []float64{0.5, 0.9, 0.95, 0.99} {
			var l Latency
			samples := make([]time.Duration, 5000)
			for i := range samples {
				samples[i] = draw()
				l.Record(0, samples[i])
			}
			slices.Sort(samples)
			truth := samples[int(math.Ceil(q*float64(len(samples))))-1]
			got := l.quantile(0, q)
			if got < truth || float64(got) > float64(truth)*1.125 {
				t.Errorf("%s: q%v = %v, want in [%v, %v]", name, q, got, truth, time.Duration(float64(truth)*1.125))
			}
		}
	}
}

// Until the window holds tailMinSamples, there is no quantile; samples
// older than two epochs leave it.
func TestTailQuantileWindow(t *testing.T) {
	const q = 0.95
	var l Latency
	n := int(tailMinSamples(q))
	if n != 80 {
		t.Fatalf("tailMinSamples(0.95) = %d, want 80", n)
	}
	for _, tt := range []struct {
		give float64
		want uint64
	}{{0.5, 20}, {0.8, 20}, {0.9, 40}, {0.99, 400}, {0.999, 4000}} {
		if got := tailMinSamples(tt.give); got != tt.want {
			t.Errorf("tailMinSamples(%v) = %d, want %d", tt.give, got, tt.want)
		}
	}
	epoch := int64(tailEpoch)
	for range n - 1 {
		l.Record(epoch, time.Millisecond)
	}
	if d := l.quantile(epoch, q); d != 0 {
		t.Fatalf("with %d samples: %v, want none", n-1, d)
	}
	l.Record(epoch+1, time.Millisecond)
	if d := l.quantile(epoch+1, q); d < time.Millisecond || d > 1125*time.Microsecond {
		t.Fatalf("with %d samples: %v, want about 1ms", n, d)
	}
	// The next epoch still sees them; the one after does not.
	if d := l.quantile(2*epoch+1, q); d == 0 {
		t.Fatal("one epoch later: the samples are gone")
	}
	if d := l.quantile(3*epoch, q); d != 0 {
		t.Fatalf("two epochs later: %v, want none", d)
	}
	// A new epoch in the same slot starts from nothing: one slow sample
	// recorded there leaves too few for a quantile.
	l.Record(3*epoch, time.Second)
	if d := l.quantile(3*epoch, q); d != 0 {
		t.Fatalf("after the slot was reused: %v, want none", d)
	}
}

// delay computes a quantile at most once per tailRefresh for one quantile.
func TestTailDelayRefresh(t *testing.T) {
	var l Latency
	if _, ok := l.Delay(0, 0.9); ok {
		t.Fatal("an empty window has a delay")
	}
	for range 100 {
		l.Record(0, time.Millisecond)
	}
	d, ok := l.Delay(1, 0.9) // a cold window is not cached
	if !ok || d < time.Millisecond || d > 1125*time.Microsecond {
		t.Fatalf("delay = %v, %v; want about 1ms", d, ok)
	}
	for range 1000 {
		l.Record(0, time.Second)
	}
	if got, _ := l.Delay(int64(tailRefresh)-1, 0.9); got != d {
		t.Fatalf("within tailRefresh: %v, want the cached %v", got, d)
	}
	if got, _ := l.Delay(int64(tailRefresh)-1, 0.5); got < time.Second {
		t.Fatalf("another quantile: %v, want it computed (about 1s)", got)
	}
	if got, _ := l.Delay(2*int64(tailRefresh), 0.9); got < time.Second {
		t.Fatalf("after tailRefresh: %v, want it computed again (about 1s)", got)
	}
}

// Recording and reading a host's latency does not allocate, once its
// quantile is cached.
func TestTailRecordAllocs(t *testing.T) {
	var l Latency
	l.Record(0, time.Millisecond)
	l.Delay(0, 0.95)
	if n := testing.AllocsPerRun(100, func() {
		l.Record(1, time.Millisecond)
		l.Delay(1, 0.95)
	}); n != 0 {
		t.Errorf("%v allocations per record and delay, want 0", n)
	}
}
