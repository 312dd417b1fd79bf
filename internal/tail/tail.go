// Package tail estimates a high quantile of recent latencies, for adaptive
// hedging (retryhttp's WithAdaptiveHedging): the hedge delay of a request
// is a high quantile of the latency of recent successful first attempts to
// its destination, as Finagle's backup requests choose theirs. Each
// destination's latencies go to a small histogram of fixed size (Latency):
// recording one is three atomic operations, and the quantile is computed
// again at most every tailRefresh, so that the hot path of a request reads
// one atomic pointer. No goroutine, no timer: the window moves lazily, when
// a latency is recorded or the quantile is asked for, at the time the
// caller passes (nanoseconds of the transport's clock).
package tail

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

const (
	// The histogram's buckets: tailSubBits bits below the leading one, so
	// 8 buckets per doubling (each at most 12.5% wider than its lower
	// bound), from 2^tailMinShift ns (8.2 µs; below it, the first bucket)
	// over tailOctaves doublings (up to 2^37 ns, 137 s; above it, the
	// last bucket).
	tailSubBits  = 3
	tailMinShift = 13
	tailOctaves  = 24
	tailBuckets  = tailOctaves << tailSubBits

	// tailEpoch is the length of one slot of the window: the window holds
	// the current slot and the one before, the latencies of the last
	// tailEpoch to 2*tailEpoch.
	tailEpoch = 10 * time.Second

	// tailRefresh is how long a computed quantile is used before it is
	// computed again.
	tailRefresh = 50 * time.Millisecond

	// The bounds of the quantile: ClampQuantile clamps to them (for
	// retryhttp's WithAdaptiveHedging), a destination policy must be
	// within them.
	MinQuantile = 0.5
	MaxQuantile = 0.999
)

// ClampQuantile returns q clamped to [MinQuantile, MaxQuantile]; a
// q that is zero or less, or NaN, is 0: adaptive hedging off.
func ClampQuantile(q float64) float64 {
	if !(q > 0) {
		return 0
	}
	return min(max(q, MinQuantile), MaxQuantile)
}

// tailMinSamples is how many latencies the window must hold before its
// q-quantile is used: 4/(1-q), at least 20 (80 for the 95th percentile, 400
// for the 99th), so that a few samples lie above the quantile.
func tailMinSamples(q float64) uint64 {
	return max(20, uint64(math.Ceil(4/(1-q)-1e-9))) // 1e-9: 1-0.9 is not 0.1 in floating point
}

// tailBucket returns the bucket of latency d.
func tailBucket(d time.Duration) int {
	ns := uint64(max(d, 0))
	if ns < 1<<tailMinShift {
		return 0
	}
	octave := bits.Len64(ns) - 1
	sub := int(ns>>(octave-tailSubBits)) & (1<<tailSubBits - 1)
	return min((octave-tailMinShift)<<tailSubBits+sub, tailBuckets-1)
}

// tailUpper returns the upper bound of bucket i: the latency a quantile
// that falls in it is taken to be, never below the latencies it holds
// (but those of the last bucket, which has none).
func tailUpper(i int) time.Duration {
	octave := i>>tailSubBits + tailMinShift
	sub := i & (1<<tailSubBits - 1)
	return time.Duration((1<<tailSubBits + sub + 1) << (octave - tailSubBits))
}

// tailSlot counts the latencies of one epoch of the window.
type tailSlot struct {
	epoch  atomic.Int64 // the epoch counted; its counts are cleared when it changes
	counts [tailBuckets]atomic.Uint32
}

// Latency is the recent latency of one destination's successful first
// attempts: two slots, the current epoch's and the one before's. Safe for
// concurrent use; the zero value is empty and ready. A latency recorded while its slot is being cleared for a
// new epoch may be lost, which moves a quantile by less than a bucket.
type Latency struct {
	slots    [2]tailSlot
	estimate atomic.Pointer[tailEstimate] // the last quantile computed; nil: none yet
}

// tailEstimate is a quantile as computed at some time.
type tailEstimate struct {
	q     float64
	at    int64         // when, in nanoseconds of the transport's clock
	delay time.Duration // positive
}

// Record adds latency d, measured at now (nanoseconds of the caller's clock).
func (l *Latency) Record(now int64, d time.Duration) {
	e := now / int64(tailEpoch)
	s := &l.slots[e&1]
	if old := s.epoch.Load(); old != e && s.epoch.CompareAndSwap(old, e) {
		for i := range s.counts {
			s.counts[i].Store(0)
		}
	}
	s.counts[tailBucket(d)].Add(1)
}

// Delay returns the q-quantile of the window at now, and whether the window
// holds enough samples for one (tailMinSamples). It computes the quantile
// again if the last one is of another q or older than tailRefresh. A window
// with too few samples is not cached: the next request looks again, so that
// hedging starts with the sample that completes the window.
func (l *Latency) Delay(now int64, q float64) (time.Duration, bool) {
	if c := l.estimate.Load(); c != nil && c.q == q && now >= c.at && now-c.at < int64(tailRefresh) {
		return c.delay, true
	}
	d := l.quantile(now, q)
	if d == 0 {
		return 0, false
	}
	l.estimate.Store(&tailEstimate{q: q, at: now, delay: d})
	return d, true
}

// quantile returns the q-quantile of the window at now, as the upper bound
// of its bucket: between the true one and 12.5% above it. It returns 0 when
// the window holds fewer than tailMinSamples(q) samples.
func (l *Latency) quantile(now int64, q float64) time.Duration {
	e := now / int64(tailEpoch)
	var live [len(l.slots)]bool // the slots of epochs e and e-1
	for j := range l.slots {
		at := l.slots[j].epoch.Load()
		live[j] = at == e || at == e-1
	}
	count := func(i int) (n uint64) {
		for j := range l.slots {
			if live[j] {
				n += uint64(l.slots[j].counts[i].Load())
			}
		}
		return n
	}
	var total uint64
	for i := range tailBuckets {
		total += count(i)
	}
	if total == 0 || total < tailMinSamples(q) {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i := range tailBuckets {
		if seen += count(i); seen >= rank {
			return tailUpper(i)
		}
	}
	return tailUpper(tailBuckets - 1) // counts that moved while read
}
