package budget

import (
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/hostmap"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeClock is a clock that moves only when told.
type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newFakeClock() *fakeClock               { return &fakeClock{t: time.Unix(1_000_000, 0)} }
func (c *fakeClock) budget() *Budget         { return New(testConfig(), c) }
func (h *host) lock(f func())                { h.mu.Lock(); defer h.mu.Unlock(); f() }
func newTestWaiter(owner any) *Waiter {
	return &Waiter{ch: make(chan struct{}, 1), owner: owner}
}
func (h *host) released(ws []*Waiter) int { return countState(ws, WaitReleased) }

func countState(ws []*Waiter, s WaitState) int {
	n := 0
	for _, w := range ws {
		if w.state == s {
			n++
		}
	}
	return n
}

// pacerFixture is one host's state on a fake clock, with its tokens spent
// and a retry that just failed.
type pacerFixture struct {
	clock *fakeClock
	b     *Budget
	h     *host
}

func newPacerFixture(t *testing.T) *pacerFixture {
	c := newFakeClock()
	b := c.budget()
	h := b.hosts.GetOrCreate(hostmap.Key{Scheme: "http", Host: "example.test"})
	for h.withdraw() {
	}
	h.stats.record(b.clock(), false, false, 0) // a retry just failed…
	h.stats.streak.Store(1)                    // …once: not an outage (a new host's first failure would be one)

	return &pacerFixture{clock: c, b: b, h: h}
}

// firsts records n first attempts, failed of them failing, spread over d
// (so that the clock ends d later), each taking lat.
func (f *pacerFixture) firsts(n, failed int, d, lat time.Duration) {
	for i := range n {
		f.clock.advance(d / time.Duration(n))
		f.h.stats.record(f.b.clock(), i >= failed, true, lat)
	}
}

// spread records n first attempts over d, failed of them failing, spread
// evenly among the successes (a share, not an outage's run).
func (f *pacerFixture) spread(n, failed int, d, lat time.Duration) {
	for i := range n {
		f.clock.advance(d / time.Duration(n))
		f.h.stats.record(f.b.clock(), (i+1)*failed/n == i*failed/n, true, lat)
	}
}

func (f *pacerFixture) step(in input) (bool, uint64) {
	var granted bool
	var seq uint64
	f.h.lock(func() { granted, seq = f.h.step(f.b.clock(), in) })
	return granted, seq
}

func (f *pacerFixture) park(n int) []*Waiter {
	ws := make([]*Waiter, n)
	for i := range ws {
		ws[i] = newTestWaiter(nil)
		f.step(input{ev: evPark, w: ws[i]})
	}
	return ws
}

func TestPacerGateHoldsWhileFirstAttemptsFail(t *testing.T) {
	tests := []struct {
		name   string
		failed int // of 100 first attempts in the last 100ms
		want   bool
	}{
		{name: "all fail", failed: 100, want: false},
		{name: "20% fail", failed: 20, want: false},
		{name: "19% fail: within the margin", failed: 19, want: false},
		{name: "15% fail", failed: 15, want: true},
		{name: "none fail", failed: 0, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newPacerFixture(t)
			ws := f.park(3)
			f.spread(100, tt.failed, 100*time.Millisecond, 10*time.Millisecond)
			f.step(input{ev: evPoke})
			assert.Equal(t, tt.want, f.h.released(ws) > 0)
		})
	}
}

func TestPacerGateForgetsOldFailures(t *testing.T) {
	f := newPacerFixture(t)
	ws := f.park(1)
	f.firsts(100, 100, 100*time.Millisecond, time.Millisecond) // an outage
	f.step(input{ev: evPoke})
	require.Zero(t, f.h.released(ws))
	f.firsts(100, 0, 200*time.Millisecond, time.Millisecond) // recovery
	f.step(input{ev: evPoke})
	assert.Equal(t, 1, f.h.released(ws), "the outage is out of the gate's slots")
}

func TestPacerReleasesFirstComeFirstServed(t *testing.T) {
	f := newPacerFixture(t)
	ws := f.park(6)
	f.firsts(100, 0, 100*time.Millisecond, time.Millisecond)
	states := func() []WaitState {
		s := make([]WaitState, len(ws))
		for i, w := range ws {
			s[i] = w.state
		}
		return s
	}
	r, p := WaitReleased, WaitParked
	// One by one, in order: the credit is never saved up past releaseShare,
	// whatever the time since the last look (125 first attempts a second
	// over the statistics' span: 1.5 releases per 8ms).
	f.step(input{ev: evPoke})
	assert.Equal(t, []WaitState{r, p, p, p, p, p}, states())
	for range 3 {
		f.clock.advance(20 * time.Millisecond)
		f.step(input{ev: evPoke})
	}
	assert.Equal(t, []WaitState{r, r, r, r, p, p}, states())
}

func TestPacerWindowStartsAtCapHalvesAndGrows(t *testing.T) {
	f := newPacerFixture(t)
	// 400 first attempts per second at 10ms at best, for 200ms: cap max(20, 2·100·0.01) = 20.
	f.firsts(80, 0, 200*time.Millisecond, 10*time.Millisecond)
	ws := f.park(100)
	f.step(input{ev: evPoke})
	settle := func(out SlotOutcome) {
		// The host's traffic goes on (~100 first attempts a second over
		// the statistics' span), each first attempt looking at the queue:
		// credit for three releases, one at a time.
		for range 3 {
			f.firsts(1, 0, 10*time.Millisecond, 10*time.Millisecond)
			f.step(input{ev: evPoke})
		}
		for _, w := range ws {
			if w.state == WaitReleased {
				f.step(input{ev: evSettle, out: out, seq: w.seq})
				w.state = WaitLeft
				return
			}
		}
		t.Fatal("nothing in flight")
	}
	window := func() float64 { w, _, _ := f.pacing(); return w }
	// At its cap from the start: the pace, not the window, bounds the
	// first releases.
	require.InDelta(t, minWindowCap, window(), 1e-9, "max(20, 2 × rate × latency)")
	_, inFlight, _ := f.pacing()
	require.Less(t, inFlight, 5, "released one at a time, at the pace")
	// Successes fill it, and it stays at the cap.
	for range 30 {
		settle(SlotOK)
	}
	require.InDelta(t, minWindowCap, window(), 1e-9, "capped at max(20, 2 × rate × latency)")
	_, inFlight, _ = f.pacing()
	require.Equal(t, minWindowCap, inFlight)
	// A failure halves it; the others of the same round do not.
	settle(SlotFailed)
	require.InDelta(t, 10, window(), 1e-9)
	for range 4 {
		settle(SlotFailed)
	}
	assert.InDelta(t, 10, window(), 1e-9, "halved once per round")
	// Past the threshold, linear: +1 per window's worth of successes.
	for range 10 {
		settle(SlotOK)
	}
	assert.InDelta(t, 11, window(), 0.1)
	// A neutral outcome (cancelled) frees the slot and changes nothing.
	before := window()
	settle(SlotNeutral)
	assert.InDelta(t, before, window(), 1e-9)
}

func (f *pacerFixture) pacing() (float64, int, int) {
	var w float64
	var n, q int
	f.h.lock(func() { w, n, q = f.h.p.window, f.h.p.inFlight, f.h.p.queue.n })
	return w, n, q
}

func TestPacerCapFollowsRateAndLatency(t *testing.T) {
	f := newPacerFixture(t)
	// 2,000 first attempts per second at 20ms: cap 2·2000·0.02 = 80.
	f.firsts(1600, 0, 800*time.Millisecond, 20*time.Millisecond)
	var c float64
	f.h.lock(func() { c, _, _ = f.h.windowCap(f.b.clock()) })
	assert.InDelta(t, 80, c, 8)
	// Slow: 10 per second: the floor.
	g := newPacerFixture(t)
	g.firsts(8, 0, 800*time.Millisecond, 20*time.Millisecond)
	g.h.lock(func() { c, _, _ = g.h.windowCap(g.b.clock()) })
	assert.InDelta(t, minWindowCap, c, 1e-9)
}

func TestPacerProbesOneAtATimeWithoutTraffic(t *testing.T) {
	f := newPacerFixture(t) // its state was made by a failure, just now
	ws := f.park(3)
	f.step(input{ev: evPoke})
	require.Zero(t, f.h.released(ws), "the latest news is a failure")
	f.clock.advance(probeQuiet)
	f.step(input{ev: evPoke})
	require.Equal(t, 1, f.h.released(ws), "a lone probe after probeQuiet")
	f.clock.advance(probeQuiet)
	f.step(input{ev: evPoke})
	require.Equal(t, 1, f.h.released(ws), "never two probes at once")
	// The probe fails: silence again before the next.
	f.h.stats.record(f.b.clock(), false, false, 0)
	f.step(input{ev: evSettle, out: SlotFailed, seq: ws[0].seq})
	require.Equal(t, 1, f.h.released(ws))
	f.clock.advance(probeQuiet)
	f.step(input{ev: evPoke})
	require.Equal(t, 2, f.h.released(ws))
	// It succeeds: the latest news is good, and the next goes at the
	// probes' pace while the second is still in flight.
	f.h.stats.record(f.b.clock(), true, false, time.Millisecond)
	f.step(input{ev: evSettle, out: SlotOK, seq: ws[1].seq})
	f.step(input{ev: evTake}) // a slot of the window, taken by a hedge
	f.clock.advance(probeQuiet)
	f.step(input{ev: evPoke})
	assert.Equal(t, 3, f.h.released(ws))
}

func TestPacerHedgeTakesAFreeSlotOnly(t *testing.T) {
	f := newPacerFixture(t)
	f.firsts(100, 0, 100*time.Millisecond, time.Millisecond)
	var seq uint64
	for i := range minWindowCap {
		var granted bool
		granted, seq = f.step(input{ev: evTake})
		require.True(t, granted, "slot %d", i+1)
	}
	granted, _ := f.step(input{ev: evTake})
	require.False(t, granted, "the window is full")
	f.step(input{ev: evSettle, out: SlotOK, seq: seq})
	granted, _ = f.step(input{ev: evTake})
	require.True(t, granted, "settled like a retry: one is free")
	granted, _ = f.step(input{ev: evTake})
	require.False(t, granted, "full again: the window is at its cap")
	// Nobody jumps the queue.
	f.park(1)
	granted, _ = f.step(input{ev: evTake})
	assert.False(t, granted)
}

func TestPacerCircuitOpenFailsItsOwnersWaiters(t *testing.T) {
	f := newPacerFixture(t)
	mine, theirs := new(int), new(int) // owners are opaque: any comparable values
	a, b := newTestWaiter(mine), newTestWaiter(theirs)
	f.step(input{ev: evPark, w: a})
	f.step(input{ev: evPark, w: b})
	f.step(input{ev: evFail, owner: mine})
	assert.Equal(t, WaitFailed, a.state)
	assert.Equal(t, WaitParked, b.state)
	assert.Len(t, a.ch, 1, "woken")
	_, _, q := f.pacing()
	assert.Equal(t, 1, q)
}

func TestPacerWindowForgetsItsHalvingsAfterIdle(t *testing.T) {
	f := newPacerFixture(t)
	f.firsts(100, 0, 100*time.Millisecond, time.Millisecond)
	_, seq := f.step(input{ev: evTake})
	f.step(input{ev: evSettle, out: SlotFailed, seq: seq})
	w, _, _ := f.pacing()
	require.InDelta(t, minWindowCap/2, w, 1e-9, "a failure halved it")
	f.clock.advance(f.b.maxWait)
	f.step(input{ev: evPoke})
	w, _, _ = f.pacing()
	require.InDelta(t, minWindowCap/2, w, 1e-9, "unused for MaxWait: kept")
	f.clock.advance(time.Millisecond)
	f.step(input{ev: evPoke})
	w, _, _ = f.pacing()
	assert.InDelta(t, minWindowCap, w, 1e-9, "unused for longer than MaxWait: back at its cap")
}

func TestPacerBusyHostIsNeverEvicted(t *testing.T) {
	c := newFakeClock()
	b := New(Config{Ratio: 0.1, Capacity: 10, MaxHosts: 1, MaxWait: 2 * time.Second, MaxParked: 10_000}, c)
	h := b.hosts.GetOrCreate(hostmap.Key{Scheme: "http", Host: "a.example"})
	h.lock(func() { h.step(b.clock(), input{ev: evPark, w: newTestWaiter(nil)}) })
	for i := range 100 {
		b.hosts.GetOrCreate(hostmap.Key{Scheme: "http", Host: "h" + string(rune('a'+i%26)) + ".example"})
	}
	got, ok := b.hosts.Get(hostmap.Key{Scheme: "http", Host: "a.example"})
	require.True(t, ok, "a host with a parked retry stays")
	assert.Same(t, h, got)
	assert.LessOrEqual(t, hostCount(b), 2, "the others evict each other")
}
