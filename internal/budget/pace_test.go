package budget

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPacerReleasesAtAShareOfTraffic: parked retries whose host answers at
// once (their slots come back in no time) leave at most at releaseShare
// per first attempt the host receives (and one per probeQuiet, for a host
// without traffic), not as fast as the window would let them; and one at a
// time: each event of the host (here, a first attempt that succeeds and
// looks at the queue, as Settle's poke does) releases what it earned,
// never a batch saved up. With a share below 2, that is one release per
// first attempt when nothing else happens on the host.
func TestPacerReleasesAtAShareOfTraffic(t *testing.T) {
	for _, rate := range []int{100, 400, 1000} { // first attempts per second (the window of 20 is not the bound)
		f := newPacerFixture(t)
		// 800ms of traffic at rate, all fine: the gate is open.
		f.firsts(8*rate/10, 0, 800*time.Millisecond, time.Millisecond)
		ws := f.park(10_000)
		settle := func() int {
			n := 0
			for _, w := range ws {
				if w.state == WaitReleased {
					n++
					w.state = WaitLeft
					f.step(input{ev: evSettle, out: SlotOK, seq: w.seq, lat: time.Millisecond})
				}
			}
			return n
		}
		require.LessOrEqual(t, settle(), 1, "rate %d/s: a gate long open saves nothing up", rate)
		// 500ms more of the same traffic, each first attempt followed by
		// a poke; every released retry succeeds at once.
		released, most := 0, 0
		for range rate / 2 {
			f.firsts(1, 0, time.Second/time.Duration(rate), time.Millisecond)
			f.step(input{ev: evPoke})
			n := settle()
			released, most = released+n, max(most, n)
		}
		assert.InDelta(t, float64(rate)/2, float64(released), 2, "rate %d/s", rate)
		assert.Equal(t, 1, most, "rate %d/s: never a batch", rate)
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
