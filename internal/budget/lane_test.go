package budget

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// laneFixture is one host whose server answered a request with a 429 and
// Retry-After: 1, on a fake clock, with retries waiting in its lane.
type laneFixture struct {
	t     *testing.T
	clock *fakeClock
	b     *Budget
	h     *host
	req   *http.Request
}

func newLaneFixture(t *testing.T) *laneFixture {
	c := newFakeClock()
	b := New(testConfig(), c)
	req := httptest.NewRequest(http.MethodGet, "http://api.test/", nil)
	b.Settle(req, false, true, &Outcome{First: true, Pause: true, Limit: true, Stated: time.Second}, nil)
	return &laneFixture{t: t, clock: c, b: b, h: b.hostOf(req), req: req}
}

// wait puts n retries in the lane, as Admit does after their pause.
func (f *laneFixture) wait(n int) []*Waiter {
	ws := make([]*Waiter, n)
	for i := range ws {
		ws[i] = f.b.laneWaiter(f.h, false, f.clock)
		require.True(f.t, f.b.enqueue(f.h, ws[i]))
	}
	return ws
}

// released returns the waiters of ws released and not answered yet, with
// their leases, and marks them answered.
func (f *laneFixture) released(ws []*Waiter) []Lease {
	var ls []Lease
	for _, w := range ws {
		if w.state == WaitReleased {
			w.state = WaitLeft
			ls = append(ls, f.b.leaseOf(f.h, w))
		}
	}
	return ls
}

// next moves the clock to the lane's next release and lets the host look.
func (f *laneFixture) next() {
	if d := time.Duration(f.h.lane.next - f.b.clock()); d > 0 {
		f.clock.advance(d)
	}
	f.b.poke(f.h)
}

// answer settles the attempt a lane lease sent: ok, or a 429 with
// Retry-After: 1.
func (f *laneFixture) answer(l Lease, ok bool) {
	o := &Outcome{Pause: !ok, Limit: !ok}
	if !ok {
		o.Stated = time.Second
	}
	f.b.Settle(f.req, ok, true, o, &l)
}

// TestLanePaceLearnedFromAnswers: the lane releases one retry at a time,
// each answer releasing the next, until one is answered with a pause; the
// gap is then the pause stated over the successes before it, halving with
// each success until the next pause answer, which sets it to the interval
// between the two pause answers over the successes in it.
func TestLanePaceLearnedFromAnswers(t *testing.T) {
	f := newLaneFixture(t)
	ws := f.wait(20)
	for i := range 4 { // serial: one released per answer, no time passing
		ls := f.released(ws)
		require.Len(t, ls, 1, "answer %d", i)
		f.answer(ls[0], true)
	}
	ls := f.released(ws)
	require.Len(t, ls, 1)
	f.answer(ls[0], false) // the host asks for a pause again
	assert.Equal(t, time.Second/4, f.h.lane.gap, "the pause over the 4 it accepted")
	assert.Empty(t, f.released(ws), "the next waits the gap")
	_, wake, _ := f.b.check(f.h, ws[5])
	assert.Equal(t, time.Second/4, wake, "the head wakes up when the gap runs out")

	// Probing: each success halves the gap.
	for _, want := range []time.Duration{125 * time.Millisecond, 62500 * time.Microsecond} {
		f.next()
		ls = f.released(ws)
		require.Len(t, ls, 1)
		f.answer(ls[0], true)
		assert.Equal(t, want, f.h.lane.gap)
	}
	// A pause answer: the interval since the last one over the successes
	// in it.
	f.next()
	ls = f.released(ws)
	require.Len(t, ls, 1)
	since := time.Duration(f.b.clock() - f.h.lane.mark)
	f.answer(ls[0], false)
	assert.Equal(t, since/2, f.h.lane.gap, "two successes between the pauses")
	assert.False(t, f.h.lane.probing)
	// From then on a success shortens it by a twentieth.
	gap := f.h.lane.gap
	f.next()
	ls = f.released(ws)
	require.Len(t, ls, 1)
	f.answer(ls[0], true)
	assert.Equal(t, time.Duration(float64(gap)*laneGapShrink), f.h.lane.gap)
}

// TestLaneSlowsOncePerRound: the answers to retries released before the
// pace was slowed down do not slow it again, and a pause answer never
// spaces releases by more than the pause stated.
func TestLaneSlowsOncePerRound(t *testing.T) {
	f := newLaneFixture(t)
	ws := f.wait(3)
	ls := f.released(ws)
	require.Len(t, ls, 1)
	// Two in flight at the old pace: release the second before the first
	// is answered (a gap of zero is not serial once the pace is known).
	f.h.lock(func() { f.h.lane.gap = time.Nanosecond; f.h.lane.probing = false })
	f.b.poke(f.h)
	more := f.released(ws)
	require.NotEmpty(t, more)
	f.answer(ls[0], false)
	slowed := f.h.lane.gap
	assert.LessOrEqual(t, slowed, time.Second, "at most the pause stated")
	f.answer(more[0], false)
	assert.Equal(t, slowed, f.h.lane.gap, "released before the slow-down: it says nothing of the new pace")
	assert.LessOrEqual(t, f.h.tokens.Load(), f.h.capacity-tokenScale, "a release that slowed the pace spent a token")
}

// TestLaneHoldAndOtherClocks: a waiter that holds for the pause is not
// released before the host's stated pause ran out; one whose caller waits
// on another clock is released as the host answers, without the gap.
func TestLaneHoldAndOtherClocks(t *testing.T) {
	f := newLaneFixture(t)
	assert.True(t, f.b.held(f.h), "the pause runs")
	hold := f.b.laneWaiter(f.h, true, f.clock)
	require.True(t, f.b.enqueue(f.h, hold))
	assert.Equal(t, WaitParked, hold.state)
	_, wake, _ := f.b.check(f.h, hold)
	assert.Equal(t, time.Second, wake, "until the stated pause runs out")
	f.clock.advance(time.Second)
	f.b.poke(f.h)
	require.Equal(t, WaitReleased, hold.state)
	f.answer(f.b.leaseOf(f.h, hold), true)
	assert.False(t, f.b.held(f.h), "the pause ran out and nothing waits")

	g := newLaneFixture(t)
	g.h.lock(func() { g.h.lane.gap, g.h.lane.next = time.Hour, g.b.clock()+int64(time.Hour) })
	other := g.b.laneWaiter(g.h, true, nil) // the real clock, not the budget's
	require.True(t, other.timeless)
	assert.False(t, other.hold, "no hold on another clock")
	require.True(t, g.b.enqueue(g.h, other))
	assert.Equal(t, WaitReleased, other.state, "released without waiting the gap")
}

// TestLaneETA: a retry joining the lane would be released after the time
// to the next release and a gap per retry ahead of it; at once while the
// pace is not known.
func TestLaneETA(t *testing.T) {
	f := newLaneFixture(t)
	assert.Zero(t, f.b.laneETA(f.h))
	f.h.lock(func() { f.h.lane.gap, f.h.lane.next = 100*time.Millisecond, f.b.clock()+int64(50*time.Millisecond) })
	f.wait(3)
	assert.Equal(t, 350*time.Millisecond, f.b.laneETA(f.h))
}

// TestLaneFirstPaceCountsFirstAttempts: at the first pause answer, the
// host's first attempts that succeeded meanwhile (its statistics' span)
// count with the lane's successes: the host accepted them in the pause it
// stated too. And a success that shortens the gap brings the next release
// forward: the gap counts from the latest release, not from the old pace.
func TestLaneFirstPaceCountsFirstAttempts(t *testing.T) {
	f := newLaneFixture(t)
	ws := f.wait(10)
	ls := f.released(ws)
	require.Len(t, ls, 1)
	f.answer(ls[0], true)
	for range 3 { // a freed caller's first attempts take the host's tokens
		f.b.Settle(f.req, true, true, &Outcome{First: true}, nil)
	}
	ls = f.released(ws)
	require.Len(t, ls, 1)
	f.answer(ls[0], false)
	assert.Equal(t, time.Second/4, f.h.lane.gap, "the pause over the 1 retry and 3 first attempts it accepted")

	f.next()
	ls = f.released(ws)
	require.Len(t, ls, 1)
	released := f.b.clock()
	f.answer(ls[0], true)
	assert.Equal(t, time.Second/8, f.h.lane.gap, "probing: halved")
	assert.Equal(t, released+int64(time.Second/8), f.h.lane.next, "the next release a new gap after the latest")
}

// TestLaneAliveByPause: a host whose latest success is long past, but
// that has just answered with a pause, is talking: a waiter in its lane
// stays, for MaxWait and the pause stated from that answer.
func TestLaneAliveByPause(t *testing.T) {
	f := newLaneFixture(t)
	f.clock.advance(10 * time.Second) // no success since long before
	f.b.Settle(f.req, false, true, &Outcome{First: true, Pause: true, Limit: true, Stated: time.Second}, nil)
	w := f.b.laneWaiter(f.h, true, f.clock)
	require.True(t, f.b.enqueue(f.h, w))
	st := w.Check()
	assert.Equal(t, WaitParked, st.State)
	assert.Equal(t, time.Second, st.Sleep, "until the pause runs out, well within its life")
	f.clock.advance(f.b.maxWait + time.Second)
	st = w.Check()
	assert.Equal(t, WaitReleased, st.State, "the pause ran out")
}

// TestLaneProbesAgainOnceThePauseIsOver: once the pace was measured, a
// success shortens the gap by a twentieth while the host still answers
// pauses to anyone; once it has answered none for as long as the pause it
// last stated (a rate limiter refilled: the callers that kept it full are
// gone), each success halves the gap, to find the host's pace again.
func TestLaneProbesAgainOnceThePauseIsOver(t *testing.T) {
	for _, quiet := range []bool{false, true} {
		f := newLaneFixture(t)
		f.h.lock(func() {
			f.h.lane.gap, f.h.lane.probing, f.h.lane.next = 100*time.Millisecond, false, f.b.clock()
		})
		ls := f.released(f.wait(1))
		require.Len(t, ls, 1)
		if quiet {
			f.clock.advance(time.Second + time.Millisecond) // no pause answered for the pause stated
		} else {
			f.clock.advance(500 * time.Millisecond)
		}
		f.answer(ls[0], true)
		want := 95 * time.Millisecond
		if quiet {
			want = 50 * time.Millisecond
		}
		assert.Equal(t, want, f.h.lane.gap, "quiet for the pause stated: %v", quiet)
	}
}

// TestLaneHeldCallersDoNotEndThePause: a host whose callers hold for its
// stated pause (WithHoldDuringPause) answers no pause because nobody asks:
// that quiet does not make the lane probe again.
func TestLaneHeldCallersDoNotEndThePause(t *testing.T) {
	f := newLaneFixture(t)
	f.h.lock(func() {
		f.h.lane.gap, f.h.lane.probing, f.h.lane.next = 100*time.Millisecond, false, f.b.clock()
	})
	w := f.b.laneWaiter(f.h, true, f.clock)
	require.True(t, f.b.enqueue(f.h, w))
	f.clock.advance(time.Second + time.Millisecond) // the pause ran out, none answered since
	f.b.poke(f.h)
	ls := f.released([]*Waiter{w})
	require.Len(t, ls, 1)
	f.answer(ls[0], true)
	assert.Equal(t, 95*time.Millisecond, f.h.lane.gap, "a twentieth, not a half")
}

// TestLaneSlowStartAfterAnUnavailablePause: a host that asked for a pause
// for want of room (a 503 with Retry-After, not a 429) gets its lane's
// releases one, then two, then four at a time as they succeed, until one
// is answered with a pause: a host whose pause is over is not drained one
// answer at a time. A rate limiter's (TestLanePaceLearnedFromAnswers) is
// probed one at a time.
func TestLaneSlowStartAfterAnUnavailablePause(t *testing.T) {
	f := newLaneFixture(t)
	f.b.Settle(f.req, false, true, &Outcome{First: true, Pause: true, Stated: time.Second}, nil) // a 503's pause
	ws := f.wait(20)
	for _, want := range []int{1, 2, 8, 9} { // 9: the rest of the 20
		ls := f.released(ws)
		require.Len(t, ls, want)
		for _, l := range ls {
			f.b.Settle(f.req, true, true, &Outcome{}, &l)
		}
	}
}
