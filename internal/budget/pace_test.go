package budget

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPacerReleasesAsTheHostAnswers: parked retries leave one at a time,
// never in a batch saved up: a gate long open releases one; while the host
// receives too few first attempts to pace by (a closed loop, whose callers
// all wait), each answer of the host releases the next, and the traffic it
// lost a few more, so that the queue drains as fast as the host answers;
// and
// retries the host does not answer yet leave at most at releaseShare per
// first attempt it receives, within the window.
func TestPacerReleasesAsTheHostAnswers(t *testing.T) {
	for _, rate := range []int{100, 400, 1000} { // first attempts per second
		f := newPacerFixture(t)
		// 800ms of traffic at rate, all fine: the gate is open.
		f.firsts(8*rate/10, 0, 800*time.Millisecond, time.Millisecond)
		ws := f.park(10_000)
		released := func() []*Waiter {
			var rs []*Waiter
			for _, w := range ws {
				if w.state == WaitReleased {
					rs = append(rs, w)
					w.state = WaitLeft
				}
			}
			return rs
		}
		rs := released()
		require.Len(t, rs, 1, "rate %d/s: a gate long open saves nothing up", rate)
		// Once the first attempts stop (a closed loop whose callers all
		// wait: none in the gate's span), each answer releases the next
		// one, with no time passing, and the traffic the host lost may
		// release a few more: its releases are the host's traffic now.
		f.clock.advance(gateSlots * statSlot)
		for range 100 {
			f.step(input{ev: evSettle, out: SlotOK, seq: rs[0].seq, lat: time.Millisecond})
			rs = released()
			require.NotEmpty(t, rs, "rate %d/s: an answer releases the next", rate)
			require.LessOrEqual(t, len(rs), max(2, rate/20), "rate %d/s: at most the lost traffic of a poll interval", rate)
			for _, w := range rs[1:] { // they come back at once
				f.step(input{ev: evSettle, out: SlotOK, seq: w.seq, lat: time.Millisecond})
			}
		}
		// Unanswered, they leave at the pace of the first attempts, one
		// per event (a share below 2 releases one per first attempt when
		// nothing else happens on the host), or a few while the host's
		// traffic is below what it carried lately, until the window is
		// full.
		n, most := 0, 0
		for range rate / 10 {
			f.firsts(1, 0, time.Second/time.Duration(rate), time.Millisecond)
			f.step(input{ev: evPoke})
			k := len(released())
			n, most = n+k, max(most, k)
		}
		window, inFlight, _ := f.h.pacing()
		assert.LessOrEqual(t, most, max(1, rate/20), "rate %d/s: never a batch beyond a poll interval of the host's traffic", rate)
		assert.LessOrEqual(t, inFlight, window, "rate %d/s", rate)
		assert.InDelta(t, min(rate/10, window-1), n, 1, "rate %d/s", rate)
	}
}

// TestPacerRecoveryParks: a retry without a token parks in an outage, and
// in the recovery from one: while retries are parked and the gate is open.
// Otherwise it is refused at once.
func TestPacerRecoveryParks(t *testing.T) {
	f := newPacerFixture(t)
	f.firsts(100, 100, 100*time.Millisecond, time.Millisecond) // an outage
	f.h.stats.streak.Store(outageStreak)
	at := f.b.clock()
	assert.True(t, f.h.parks(at), "in an outage")
	f.h.stats.streak.Store(0) // a success: not an outage any more
	assert.False(t, f.h.parks(at), "nothing parked: not a recovery")
	ws := f.park(1)
	// Half the first attempts fail, in turn: the gate is closed, and it
	// is not an outage.
	for i := range 100 {
		f.clock.advance(2 * time.Millisecond)
		f.h.stats.record(f.b.clock(), i%2 == 0, true, time.Millisecond)
	}
	f.step(input{ev: evPoke})
	assert.Zero(t, f.h.released(ws))
	assert.False(t, f.h.parks(f.b.clock()), "the gate is closed: not a recovery")
	f.firsts(100, 0, 200*time.Millisecond, time.Millisecond) // the host answers again
	assert.True(t, f.h.parks(f.b.clock()), "parked retries and an open gate: a recovery")
}
