package inbound

import "time"

// Test seams of the LoadShedder.

// SetShedClock makes s read the time from now.
func SetShedClock(s *LoadShedder, now func() time.Time) { s.now = now }

// SetShedRand makes s draw its random numbers, in [0, 1), from r.
func SetShedRand(s *LoadShedder, r func() float64) { s.rand = r }

// SetShedTimer makes s start the timers of its queue with newTimer, which
// returns the timer's channel and its Stop.
func SetShedTimer(s *LoadShedder, newTimer func(time.Duration) (<-chan time.Time, func() bool)) {
	s.newTimer = newTimer
}

// RetryAfterRange exposes retryAfterRange.
func RetryAfterRange(base time.Duration, jitter float64) (lo, hi int) {
	return retryAfterRange(base, jitter)
}

// AdaptiveLimit is the adaptive limit of a LoadShedder, for simulations.
type AdaptiveLimit = adaptiveLimit

// NewAdaptiveLimit exposes newAdaptiveLimit.
func NewAdaptiveLimit(initial, lo, hi int, interval time.Duration) *AdaptiveLimit {
	return newAdaptiveLimit(initial, lo, hi, interval)
}

// Record exposes adaptiveLimit.record.
func (a *AdaptiveLimit) Record(latency time.Duration, inflight int64, epoch uint64, now time.Time, r float64) (int, bool) {
	return a.record(latency, inflight, epoch, now, func() float64 { return r })
}

// Epoch returns the epoch a request admitted now would get.
func (a *AdaptiveLimit) Epoch() uint64 { return a.epoch.Load() }

// Start exposes adaptiveLimit.start.
func (a *AdaptiveLimit) Start() int { return a.start() }
