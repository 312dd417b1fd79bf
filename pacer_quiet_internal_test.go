package retryhttp

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestPacerQuietHostFailingAtRandomReleasesOneAtATime(t *testing.T) {
	run := func(failed int) (released, inFlight int) {
		f := newPacerFixture(t)
		// 100 first attempts over 400ms, failed of them failing; then
		// the callers pause, longer than the gate's slots and probeQuiet.
		f.firsts(100, failed, 400*time.Millisecond, 5*time.Millisecond)
		f.clock.advance(probeQuiet)
		ws := f.park(3)
		f.step(input{ev: evPoke})
		// The first released retry succeeds.
		for _, w := range ws {
			if w.state == waitReleased {
				f.h.stats.record(f.b.clock(), true, false, 5*time.Millisecond)
				f.step(input{ev: evSettle, out: outOK, seq: w.seq, lat: 5 * time.Millisecond})
				break
			}
		}
		_, inFlight, _ = f.pacing()
		return f.h.released(ws), inFlight
	}
	released, inFlight := run(30)
	assert.Equal(t, 2, released, "30% of what the host answered failed: one at a time")
	assert.Equal(t, 1, inFlight)
	released, inFlight = run(0)
	assert.Equal(t, 3, released, "a healthy host that went quiet: the window")
	assert.Equal(t, 2, inFlight)
}

func TestPacerQuietGateCountsRetries(t *testing.T) {
	// The first attempts were fine, but the retries heard since fail: they
	// count too once the callers pause.
	f := newPacerFixture(t)
	f.firsts(20, 0, 100*time.Millisecond, 5*time.Millisecond)
	for range 20 {
		f.clock.advance(5 * time.Millisecond)
		f.h.stats.record(f.b.clock(), false, false, 0)
	}
	f.h.stats.record(f.b.clock(), true, false, 5*time.Millisecond)
	f.clock.advance(probeQuiet)
	ok, fail := f.h.stats.everything(f.b.clock())
	assert.Equal(t, [2]int64{21, 21}, [2]int64{ok, fail}, "the fixture's own failed retry included")
	ws := f.park(3)
	f.step(input{ev: evPoke})
	assert.Equal(t, 1, f.h.released(ws), "half of what the host answered failed: one at a time")
}
