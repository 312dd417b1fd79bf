package budget

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// admitFixture is one host on a fake clock, as docs/storms.md's table
// sees it.
type admitFixture struct {
	t     *testing.T
	clock *fakeClock
	b     *Budget
	h     *host
	req   *http.Request
}

func newAdmitFixture(t *testing.T) *admitFixture {
	c := newFakeClock()
	b := New(testConfig(), c)
	req := httptest.NewRequest(http.MethodGet, "http://api.test/", nil)
	b.Settle(req, true, true, &Outcome{First: true}, nil) // it answers
	return &admitFixture{t: t, clock: c, b: b, h: b.hostOf(req), req: req}
}

// drain spends the host's tokens.
func (f *admitFixture) drain() {
	for f.h.withdraw() {
	}
}

// fail records n failed attempts the host did not answer.
func (f *admitFixture) fail(n int) {
	for range n {
		f.b.Settle(f.req, false, false, &Outcome{}, nil)
	}
}

// retry returns a retry of a response with status, after delay.
func (f *admitFixture) retry(status int, delay time.Duration) *Retry {
	res := &http.Response{StatusCode: status, Header: http.Header{}, Body: http.NoBody}
	return &Retry{Req: f.req, Res: res, Delay: delay, Bound: NoBound, MaxDelay: time.Minute}
}

// TestAdmitTheTable: each row of docs/storms.md's table, as Admit decides
// it.
func TestAdmitTheTable(t *testing.T) {
	t.Run("a token: taken when sent, after the delay", func(t *testing.T) {
		f := newAdmitFixture(t)
		r := f.retry(http.StatusServiceUnavailable, 100*time.Millisecond)
		v := f.b.Admit(r)
		require.Equal(t, Wait, v.Do)
		assert.Equal(t, 100*time.Millisecond, v.After)
		assert.InDelta(t, 10, float64(f.h.tokens.Load())/tokenScale, 1e-9, "not taken during the delay")
		v = f.b.Admit(r)
		require.Equal(t, Send, v.Do)
		assert.Zero(t, v.After)
		assert.Equal(t, 1, v.Lease.owed, "owed back if the retry succeeds")
		assert.InDelta(t, 9, float64(f.h.tokens.Load())/tokenScale, 1e-9)

		r.Delay = 0 // the request's next retry, sent at once
		v = f.b.Admit(r)
		require.Equal(t, Send, v.Do)
		assert.Equal(t, 2, v.Lease.owed, "the request owes both")
	})
	t.Run("asked to back off: taken as decided, not owed", func(t *testing.T) {
		f := newAdmitFixture(t)
		r := f.retry(http.StatusServiceUnavailable, time.Second)
		r.Res.Header.Set("Retry-After", "0")
		v := f.b.Admit(r)
		require.Equal(t, Send, v.Do)
		assert.Equal(t, time.Second, v.After)
		assert.Zero(t, v.Lease.owed)
	})
	t.Run("no token, the host answers fast: sent without a token", func(t *testing.T) {
		f := newAdmitFixture(t)
		f.drain()
		assert.Equal(t, normal, f.h.mode(f.b.clock()))
		v := f.b.Admit(f.retry(http.StatusServiceUnavailable, 0))
		require.Equal(t, Send, v.Do)
		assert.Equal(t, Lease{}, v.Lease, "no token, nothing owed")
	})
	t.Run("no token, a host that load hurts: parked for a token", func(t *testing.T) {
		f := newAdmitFixture(t)
		f.drain()
		f.h.stats.slowAt.Store(f.b.clock()) // an attempt just timed out
		v := f.b.Admit(f.retry(http.StatusServiceUnavailable, 0))
		require.Equal(t, Park, v.Do)
		require.NotNil(t, v.Waiter)
		assert.Equal(t, f.b.maxWait, v.Until)
		f.clock.advance(statSlots * statSlot) // the sign is old
		assert.Equal(t, Send, f.b.Admit(f.retry(http.StatusServiceUnavailable, 0)).Do)
	})
	t.Run("no token, asked to back off: parked for a token", func(t *testing.T) {
		f := newAdmitFixture(t)
		f.drain()
		r := f.retry(http.StatusServiceUnavailable, 0)
		r.Res.Header.Set("Retry-After", "0") // asks, but states no pause
		assert.Equal(t, Park, f.b.Admit(r).Do)
	})
	t.Run("a token, an outage: parked all the same", func(t *testing.T) {
		f := newAdmitFixture(t)
		f.fail(outageStreak)
		assert.InDelta(t, 10, float64(f.h.tokens.Load())/tokenScale, 1e-9)
		v := f.b.Admit(f.retry(http.StatusServiceUnavailable, 0))
		require.Equal(t, Park, v.Do, "a retry sent into an outage is lost")
		assert.InDelta(t, 10, float64(f.h.tokens.Load())/tokenScale, 1e-9, "no token taken")
	})
	t.Run("no token, an outage: parked after its delay, for MaxWait", func(t *testing.T) {
		f := newAdmitFixture(t)
		f.drain()
		f.fail(outageStreak)
		assert.Equal(t, outage, f.h.mode(f.b.clock()))
		r := f.retry(http.StatusServiceUnavailable, 300*time.Millisecond)
		r.Parked = 500 * time.Millisecond // parked so far, by earlier retries
		v := f.b.Admit(r)
		require.Equal(t, Park, v.Do)
		require.Nil(t, v.Waiter, "its delay first")
		assert.Equal(t, 300*time.Millisecond, v.After)
		v = f.b.Admit(r)
		require.Equal(t, Park, v.Do)
		require.NotNil(t, v.Waiter)
		assert.Equal(t, f.b.maxWait-r.Parked, v.Until, "MaxWait per request, in all")
		require.True(t, v.Waiter.Enqueue())
		st := v.Waiter.Check()
		assert.Equal(t, WaitParked, st.State)
		assert.Equal(t, 1, st.Parked)
		assert.Equal(t, WaitLeft, v.Waiter.Leave().State)
	})
	t.Run("no token, an outage, a deadline too close: refused", func(t *testing.T) {
		f := newAdmitFixture(t)
		f.drain()
		f.fail(outageStreak)
		r := f.retry(http.StatusServiceUnavailable, 300*time.Millisecond)
		r.Bound = 300 * time.Millisecond
		assert.Equal(t, Refuse, f.b.Admit(r).Do)
	})
	t.Run("no token, an outage just ended: parked until the gate opens", func(t *testing.T) {
		f := newAdmitFixture(t)
		f.drain()
		f.fail(outageStreak)
		f.clock.advance(10 * time.Millisecond)
		f.b.Settle(f.req, true, true, &Outcome{First: true}, nil) // the host answers again
		assert.Equal(t, recovering, f.h.mode(f.b.clock()), "within the gate's span of the outage's end")
		v := f.b.Admit(f.retry(http.StatusServiceUnavailable, 0))
		require.Equal(t, Park, v.Do, "a retry of the outage, whose delay ends now")
		f.clock.advance(probeQuiet)
		assert.Equal(t, normal, f.h.mode(f.b.clock()), "the gate's span later: the host answers")
		assert.Equal(t, Send, f.b.Admit(f.retry(http.StatusServiceUnavailable, 0)).Do, "fast: without a token")
	})
	t.Run("a first success long after failures ends no outage", func(t *testing.T) {
		f := newAdmitFixture(t)
		f.drain()
		f.fail(outageStreak)
		f.clock.advance(probeQuiet) // quiet: the failures are old
		f.b.Settle(f.req, true, true, &Outcome{First: true}, nil)
		assert.Equal(t, normal, f.h.mode(f.b.clock()))
	})
	t.Run("dead for MaxWait: refused", func(t *testing.T) {
		f := newAdmitFixture(t)
		f.drain()
		f.fail(outageStreak)
		f.clock.advance(f.b.maxWait + time.Millisecond)
		assert.Equal(t, dead, f.h.mode(f.b.clock()))
		assert.Equal(t, Refuse, f.b.Admit(f.retry(http.StatusServiceUnavailable, 0)).Do)
	})
	t.Run("parking off: refused", func(t *testing.T) {
		f := newAdmitFixture(t)
		f.b.noParking = true
		f.drain()
		f.fail(outageStreak)
		assert.Equal(t, Refuse, f.b.Admit(f.retry(http.StatusServiceUnavailable, 0)).Do)
	})
	t.Run("released with a token: owed", func(t *testing.T) {
		f := newAdmitFixture(t)
		f.drain()
		f.fail(outageStreak)
		v := f.b.Admit(f.retry(http.StatusServiceUnavailable, 0))
		require.NotNil(t, v.Waiter)
		require.True(t, v.Waiter.Enqueue())
		f.h.lock(func() {
			f.h.deposit(tokenScale)
			f.h.p.window = 0 // no slot: a release takes the token
			f.h.p.credit = 1
			f.h.stats.lastFail.Store(0)
			f.h.stats.lastOK.Store(f.b.clock())
		})
		f.clock.advance(time.Second)
		st := v.Waiter.Check()
		require.Equal(t, WaitReleased, st.State)
		assert.False(t, st.Lease.held, "a token, not a slot")
		assert.Equal(t, 1, st.Lease.owed)
	})
}

// TestAdmitPauses: a retry of a response that asked for a pause waits its
// delay, then the lane; it needs a token when the lane would not release
// it before its bound; with the bucket empty, a 429's waits in the lane
// all the same, a 503's is refused.
func TestAdmitPauses(t *testing.T) {
	f := newAdmitFixture(t)
	r := f.retry(http.StatusTooManyRequests, time.Second)
	r.Pause = true
	v := f.b.Admit(r)
	require.Equal(t, Wait, v.Do)
	assert.Equal(t, time.Second, v.After)
	v = f.b.Admit(r)
	require.Equal(t, Park, v.Do)
	require.NotNil(t, v.Waiter)
	assert.True(t, v.Waiter.lane)
	assert.Equal(t, time.Minute-time.Second, v.Until, "WithMaxDelay, from the end of its delay")
	assert.InDelta(t, 10, float64(f.h.tokens.Load())/tokenScale, 1e-9, "no token")

	f.h.lock(func() { f.h.lane.gap, f.h.lane.next = time.Hour, f.b.clock()+int64(time.Hour) })
	r = f.retry(http.StatusTooManyRequests, time.Second)
	r.Pause = true
	v = f.b.Admit(r)
	assert.Equal(t, Send, v.Do, "the lane is too slow for WithMaxDelay: a token")
	assert.Zero(t, v.Lease.owed, "a 429's token is not owed back")

	f.h.lock(func() { f.h.lane.gap = 0 })
	f.drain()
	r = f.retry(http.StatusTooManyRequests, time.Second)
	r.Pause = true
	require.Equal(t, Wait, f.b.Admit(r).Do, "a 429 says later: an empty bucket does not refuse it")
	assert.Equal(t, Park, f.b.Admit(r).Do)
	r = f.retry(http.StatusServiceUnavailable, time.Second)
	r.Res.Header.Set("Retry-After", "1")
	r.Pause = true
	assert.Equal(t, Refuse, f.b.Admit(r).Do, "a 503 with a pause, an empty bucket: the lane's failures spent it")
}

// TestAdmitPaced: a 429 of a quota the caller paces to (Paced: its quota
// book holds the retry until the turn) is sent after its delay, with no
// lane and no token, whatever the lane's pace or the bucket; a pause other
// than a 429's, Paced or not, takes the lane.
func TestAdmitPaced(t *testing.T) {
	f := newAdmitFixture(t)
	f.h.lock(func() { f.h.lane.gap, f.h.lane.next = time.Hour, f.b.clock()+int64(time.Hour) })
	f.drain()
	r := f.retry(http.StatusTooManyRequests, time.Second)
	r.Pause, r.Paced = true, true
	v := f.b.Admit(r)
	require.Equal(t, Send, v.Do)
	assert.Equal(t, time.Second, v.After, "its delay")
	assert.Nil(t, v.Waiter)
	assert.Zero(t, v.Lease.owed, "no token")

	f.h.lock(func() { f.h.lane.gap = 0 })
	r = f.retry(http.StatusServiceUnavailable, time.Second)
	r.Res.Header.Set("Retry-After", "1")
	r.Pause, r.Paced = true, true
	assert.Equal(t, Refuse, f.b.Admit(r).Do, "a 503's pause: the rows as before (an empty bucket refuses it)")
}

// TestAdmitFirstAndHedge: a first attempt goes at once unless it holds for
// its host's stated pause; a hedge takes a token, else a free slot.
func TestAdmitFirstAndHedge(t *testing.T) {
	f := newAdmitFixture(t)
	first := &Retry{Req: f.req, First: true, Hold: true, Bound: NoBound, MaxDelay: time.Minute, Clock: f.clock}
	assert.Equal(t, Send, f.b.Admit(first).Do, "no pause stated")
	f.b.Settle(f.req, false, true, &Outcome{First: true, Pause: true, Stated: time.Second}, nil)
	v := f.b.Admit(first)
	require.Equal(t, Park, v.Do)
	require.NotNil(t, v.Waiter)
	assert.True(t, v.Waiter.hold, "until the stated pause runs out")
	first.Hold = false
	assert.Equal(t, Send, f.b.Admit(first).Do, "not asked to hold")

	hedge := &Retry{Req: f.req, Hedge: true}
	v = f.b.Admit(hedge)
	require.Equal(t, Send, v.Do)
	assert.False(t, v.Lease.held, "a token")
	f.drain()
	f.clock.advance(time.Second) // the gate: no failure heard for a while
	v = f.b.Admit(hedge)
	require.Equal(t, Send, v.Do)
	assert.True(t, v.Lease.held, "a slot of the window")
	v.Lease.End(SlotOK, time.Millisecond, 0)
	f.b.noParking = true
	assert.Equal(t, Refuse, f.b.Admit(hedge).Do)
}
