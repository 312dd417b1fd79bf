package budget

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestPacerReleasesAtAShareOfTraffic: parked retries whose host answers at
// once (their slots come back in no time) leave at releaseShare per first
// attempt the host receives (and one per probeQuiet, for a host without
// traffic), not as fast as the window would let them.
func TestPacerReleasesAtAShareOfTraffic(t *testing.T) {
	for _, rate := range []int{100, 400, 1000} { // first attempts per second (the window of 20 is not the bound)
		f := newPacerFixture(t)
		// 800ms of traffic at rate, all fine: the gate is open.
		per10ms := rate / 100
		f.firsts(8*rate/10, 0, 800*time.Millisecond, time.Millisecond)
		ws := f.park(10_000)
		released := 0
		// 500ms more of the same traffic; every released retry succeeds
		// at once.
		for range 50 {
			f.firsts(per10ms, 0, 10*time.Millisecond, time.Millisecond)
			f.step(input{ev: evPoke})
			for _, w := range ws {
				if w.state == WaitReleased {
					released++
					w.state = WaitLeft
					f.step(input{ev: evSettle, out: SlotOK, seq: w.seq, lat: time.Millisecond})
				}
			}
		}
		want := (releaseShare*float64(rate) + 1/probeQuiet.Seconds()) * 0.5
		// Up to a window's worth more: the credit is held to the window.
		assert.InDelta(t, want, float64(released), minWindowCap+1, "rate %d/s", rate)
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
	assert.True(t, f.h.parks(at, time.Second), "in an outage")
	f.h.stats.streak.Store(0) // a success: not an outage any more
	assert.False(t, f.h.parks(at, time.Second), "nothing parked: not a recovery")
	ws := f.park(1)
	// Half the first attempts fail, in turn: the gate is closed, and it
	// is not an outage.
	for i := range 100 {
		f.clock.advance(2 * time.Millisecond)
		f.h.stats.record(f.b.clock(), i%2 == 0, true, time.Millisecond)
	}
	f.step(input{ev: evPoke})
	assert.Zero(t, f.h.released(ws))
	assert.False(t, f.h.parks(f.b.clock(), time.Second), "the gate is closed: not a recovery")
	f.firsts(100, 0, 200*time.Millisecond, time.Millisecond) // the host answers again
	assert.True(t, f.h.parks(f.b.clock(), time.Second), "parked retries and an open gate: a recovery")
}
