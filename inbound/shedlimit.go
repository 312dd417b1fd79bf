package inbound

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// The adaptive concurrency limit of a LoadShedder, in the spirit of Netflix
// concurrency-limits' gradient limit, Envoy's adaptive concurrency filter
// and failsafe-go's adaptive limiter. Little's law: a server that does its
// work without queueing keeps its latency at its minimum whatever its
// concurrency; once requests queue inside it (for a CPU, a pool, a lock),
// latency grows in proportion to the excess. So the limit grows while the
// latency stays near the no-load latency, and shrinks in proportion when it
// rises. The no-load latency is measured, not guessed: at the start and
// every ProbeInterval, the limit drops to MinLimit for one window. The
// arithmetic, with a worked example: docs/shedding.md.

const (
	defaultShedLimit         = 100 // fixed limit
	defaultShedInitialLimit  = 20  // adaptive
	defaultShedMinLimit      = 2
	defaultShedMaxLimit      = 1000
	defaultShedProbeInterval = 30 * time.Second
	maxShedLimit             = 1 << 20

	// shedMinWindow is the fewest samples in a window.
	shedMinWindow = 10
	// shedSmoothing is the share of the way to its target the limit moves
	// at the end of a window.
	shedSmoothing = 0.2
	// shedMinGradient bounds how far a single window can pull the target
	// down: a burst of slow requests halves it at most.
	shedMinGradient = 0.5
)

// adaptiveLimit is the state of an adaptive limit. It is safe for concurrent
// use: epoch is read without a lock, the rest under mu.
type adaptiveLimit struct {
	min, max float64
	interval time.Duration // between probes

	// epoch changes when a probe begins and when it ends: a request
	// admitted in another epoch does not count for the probe.
	epoch atomic.Uint64

	mu        sync.Mutex
	estimate  float64   // the limit, before rounding down
	baseline  float64   // no-load latency, in nanoseconds; 0 until the first probe ends
	probing   bool      // measuring the baseline at min concurrency
	nextProbe time.Time // when the next probe begins
	n         int       // samples in the window
	sum       float64   // of their latencies, in nanoseconds
	peak      int64     // the most requests in flight seen by the window
}

// newAdaptiveLimit returns a limit that starts with a probe, and then goes
// on from initial.
func newAdaptiveLimit(initial, lo, hi int, interval time.Duration) *adaptiveLimit {
	return &adaptiveLimit{
		min: float64(lo), max: float64(hi), interval: interval,
		estimate: float64(initial), probing: true,
	}
}

// current returns the limit in force.
func (a *adaptiveLimit) currentLocked() int {
	if a.probing {
		return int(a.min)
	}
	return int(a.estimate)
}

// start returns the limit to begin with: MinLimit, for the first probe.
func (a *adaptiveLimit) start() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.currentLocked()
}

// record adds the latency of one admitted request, admitted in epoch with
// inflight requests in flight (itself included), that ended at now; rand
// returns a uniform random number in [0, 1), for the jitter of the probe
// interval, and is called only when a probe ends. It returns the limit in
// force, with changed true if it moved.
func (a *adaptiveLimit) record(latency time.Duration, inflight int64, epoch uint64, now time.Time, rand func() float64) (limit int, changed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	before := a.currentLocked()
	switch {
	case a.probing:
		a.probe(latency, epoch, now, rand)
	case !now.Before(a.nextProbe):
		// Time to measure the baseline again: drop to MinLimit, and count
		// only the requests admitted from now on.
		a.probing = true
		a.epoch.Add(1)
		a.n, a.sum, a.peak = 0, 0, 0
	default:
		a.n++
		a.sum += float64(max(latency, 1))
		a.peak = max(a.peak, inflight)
		if a.n >= max(shedMinWindow, int(a.estimate)) {
			a.update(a.sum/float64(a.n), a.peak)
			a.n, a.sum, a.peak = 0, 0, 0
		}
	}
	after := a.currentLocked()
	return after, after != before
}

// probe adds a sample to a probe, and ends it after a window of samples
// admitted during it: their mean latency is the new baseline. Requires that
// mu is held.
func (a *adaptiveLimit) probe(latency time.Duration, epoch uint64, now time.Time, rand func() float64) {
	if epoch != a.epoch.Load() {
		return // admitted before the probe, at a higher concurrency
	}
	a.n++
	a.sum += float64(max(latency, 1))
	if a.n < shedMinWindow {
		return
	}
	a.baseline = a.sum / float64(a.n)
	a.probing = false
	a.epoch.Add(1)
	a.n, a.sum, a.peak = 0, 0, 0
	// Probes of a fleet's servers should not fall together: the interval
	// is drawn from [0.75, 1.25]·ProbeInterval.
	a.nextProbe = now.Add(time.Duration(float64(a.interval) * (0.75 + 0.5*rand())))
}

// update ends a window whose mean latency was mean, with at most peak
// requests in flight. Requires that mu is held.
func (a *adaptiveLimit) update(mean float64, peak int64) {
	// A window faster than the baseline lowers it at once.
	a.baseline = min(a.baseline, mean)
	// Not using half of the limit: the window says nothing about what a
	// higher concurrency would do, so the limit does not grow.
	if float64(peak) < a.estimate/2 {
		return
	}
	// The gradient is the share of the latency that is work rather than
	// queueing: at twice the baseline, half the requests in flight were
	// waiting. The target keeps those doing work, plus a headroom of
	// √limit to probe for more.
	gradient := min(1, max(shedMinGradient, a.baseline/mean))
	target := a.estimate*gradient + math.Sqrt(a.estimate)
	a.estimate += (target - a.estimate) * shedSmoothing
	a.estimate = min(a.max, max(a.min, a.estimate))
}
