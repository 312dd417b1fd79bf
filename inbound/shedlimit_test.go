package inbound_test

import (
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp/inbound"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// queueingServer models a server with c workers and a queue in front of
// them: with n requests in flight, each takes work·max(1, n/c).
func queueingLatency(work time.Duration, c, n int) time.Duration {
	return time.Duration(float64(work) * max(1, float64(n)/float64(c)))
}

// simulate feeds lim samples from a server that always has as many requests
// in flight as the limit allows (an offered load above any limit), with
// latency(n) for n in flight, and returns the limit after each sample and
// the time the samples took.
func simulate(lim *inbound.AdaptiveLimit, samples int, latency func(n int) time.Duration, clock *time.Time) []int {
	limit := lim.Start()
	trace := make([]int, 0, samples)
	for range samples {
		d := latency(limit)
		*clock = clock.Add(d / time.Duration(limit)) // limit requests end per latency
		limit, _ = lim.Record(d, int64(limit), lim.Epoch(), *clock, 0.5)
		trace = append(trace, limit)
	}
	return trace
}

// TestAdaptiveLimitConverges: offered more than it can serve, a server of
// c workers gets a limit near c, from above or below: enough to keep every
// worker busy, few enough that latency stays near the work's time.
func TestAdaptiveLimitConverges(t *testing.T) {
	for _, c := range []int{1, 5, 10, 50} {
		for _, initial := range []int{20, 200} {
			clock := time.Unix(0, 0)
			lim := inbound.NewAdaptiveLimit(initial, 2, 1000, time.Hour)
			trace := simulate(lim, 6000, func(n int) time.Duration { return queueingLatency(10*time.Millisecond, c, n) }, &clock)
			final := trace[len(trace)-1]
			upper := c + int(2*math.Sqrt(float64(c))) + 2
			assert.GreaterOrEqual(t, final, min(c, 2), "c=%d, from %d", c, initial)
			assert.LessOrEqual(t, final, upper, "c=%d, from %d", c, initial)
			// And it stays there: the last thousand samples oscillate
			// within the band.
			for _, l := range trace[len(trace)-1000:] {
				assert.LessOrEqual(t, l, upper, "c=%d, from %d", c, initial)
			}
		}
	}
}

// TestAdaptiveLimitGrowsWithoutQueueing: latency that does not depend on
// the concurrency lets the limit grow, up to MaxLimit.
func TestAdaptiveLimitGrowsWithoutQueueing(t *testing.T) {
	clock := time.Unix(0, 0)
	lim := inbound.NewAdaptiveLimit(20, 2, 300, time.Hour)
	trace := simulate(lim, 50000, func(int) time.Duration { return 10 * time.Millisecond }, &clock)
	for i := 1; i < len(trace); i++ {
		if trace[i-1] >= 20 { // after the first probe
			require.GreaterOrEqual(t, trace[i], trace[i-1], "sample %d", i)
		}
	}
	assert.Equal(t, 300, trace[len(trace)-1])
}

// TestAdaptiveLimitAppLimited: a limit far above what is used does not
// grow: the windows say nothing about a higher concurrency.
func TestAdaptiveLimitAppLimited(t *testing.T) {
	lim := inbound.NewAdaptiveLimit(20, 2, 1000, time.Hour)
	now := time.Unix(0, 0)
	for range 1000 {
		now = now.Add(time.Millisecond)
		lim.Record(time.Millisecond, 3, lim.Epoch(), now, 0.5)
	}
	l, _ := lim.Record(time.Millisecond, 3, lim.Epoch(), now, 0.5)
	assert.Equal(t, 20, l)
}

// TestAdaptiveLimitProbes: the limit starts at MinLimit until 10 requests
// admitted then have ended; requests admitted before a probe do not count
// for it; a probe begins again after the interval (jittered by r).
func TestAdaptiveLimitProbes(t *testing.T) {
	lim := inbound.NewAdaptiveLimit(20, 3, 1000, 10*time.Second)
	start := time.Unix(0, 0)
	assert.Equal(t, 3, lim.Start())
	epoch := lim.Epoch()
	for i := range 9 {
		l, changed := lim.Record(time.Millisecond, 3, epoch, start, 0.5)
		require.Equal(t, 3, l, "sample %d", i)
		require.False(t, changed)
	}
	l, changed := lim.Record(time.Millisecond, 3, epoch, start, 0.5)
	assert.Equal(t, 20, l, "the probe ends after 10 samples")
	assert.True(t, changed)
	assert.NotEqual(t, epoch, lim.Epoch())

	// r = 0.5: the next probe is due after exactly the interval.
	l, _ = lim.Record(time.Millisecond, 20, lim.Epoch(), start.Add(10*time.Second-1), 0.5)
	assert.Equal(t, 20, l)
	old := lim.Epoch()
	l, changed = lim.Record(time.Millisecond, 20, old, start.Add(10*time.Second), 0.5)
	assert.Equal(t, 3, l, "probing again")
	assert.True(t, changed)
	for range 20 { // admitted before the probe: ignored
		l, _ = lim.Record(time.Millisecond, 20, old, start.Add(10*time.Second), 0.5)
	}
	assert.Equal(t, 3, l)
	for range 10 {
		l, _ = lim.Record(time.Millisecond, 3, lim.Epoch(), start.Add(11*time.Second), 0.5)
	}
	assert.Equal(t, 20, l)
}

// TestAdaptiveLimitRelearnsBaseline: when the service itself becomes
// slower (not queueing: twice the latency at any concurrency), the limit
// first shrinks, then the next probe measures the new no-load latency and
// the limit grows back.
func TestAdaptiveLimitRelearnsBaseline(t *testing.T) {
	clock := time.Unix(0, 0)
	lim := inbound.NewAdaptiveLimit(50, 2, 1000, 10*time.Second)
	fast := func(int) time.Duration { return 10 * time.Millisecond }
	slow := func(int) time.Duration { return 20 * time.Millisecond }
	before := simulate(lim, 2000, fast, &clock)
	require.Less(t, clock.Sub(time.Unix(0, 0)), 7*time.Second, "no probe yet")
	during := simulate(lim, 500, slow, &clock)
	assert.Less(t, during[len(during)-1], before[len(before)-1], "slower: the limit shrinks")
	after := simulate(lim, 20000, slow, &clock)
	// The trace ends anywhere, a probe at MinLimit included: its peak over
	// the last half is what the limit grew back to.
	peak := 0
	for _, l := range after[len(after)/2:] {
		peak = max(peak, l)
	}
	assert.Greater(t, peak, before[len(before)-1], "relearned: it grows again")
}

// TestLoadShedderAdaptiveReportsLimitChanges drives an adaptive shedder
// through loopback in batches of 10 concurrent requests, with a clock that
// stands still (every request takes no time): the limit probes at 10, then
// grows by 0.2·√10 per window of 10 requests, so it reaches 11 after the
// third batch.
func TestLoadShedderAdaptiveReportsLimitChanges(t *testing.T) {
	type change struct{ from, to int }
	var mu sync.Mutex
	var changes []change
	s := inbound.NewLoadShedder(inbound.LoadShedderOptions{
		Adaptive: true, Limit: 10, MinLimit: 10,
		OnLimitChange: func(from, to int) {
			mu.Lock()
			changes = append(changes, change{from, to})
			mu.Unlock()
		},
	})
	still := time.Unix(0, 0)
	inbound.SetShedClock(s, func() time.Time { return still })
	var current atomic.Pointer[gate]
	srv := httptest.NewServer(s.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		current.Load().ServeHTTP(w, r)
	})))
	t.Cleanup(srv.Close)
	c := plainClient(t)
	for batch := range 3 {
		g := newGate()
		current.Store(g)
		held := occupy(t, c, srv.URL, g, 10)
		g.open()
		for _, h := range held {
			require.Equal(t, http.StatusOK, <-h, "batch %d", batch)
		}
	}
	assert.Equal(t, 11, s.Stats().Limit)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []change{{10, 11}}, changes)
}
