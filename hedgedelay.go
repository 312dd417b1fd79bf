package retryhttp

import (
	"context"
	"math"
	"math/bits"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/hostmap"
)

// Adaptive hedging (WithAdaptiveHedging): the hedge delay of a request is a
// high quantile of the latency of recent successful first attempts to its
// destination, as Finagle's backup requests choose theirs. Each
// destination's latencies go to a small histogram of fixed size
// (tailLatency): recording one is three atomic operations, and the quantile
// is computed again at most every tailRefresh, so that the hot path of a
// request reads one atomic pointer. No goroutine, no timer: the window
// moves lazily, when an attempt is recorded or the quantile is asked for,
// on the transport's clock (clock.go).

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

	// tailMaxHosts bounds the destinations a Transport keeps latencies of
	// (about 1.6 KiB each).
	tailMaxHosts = 256

	// The bounds of the quantile: WithAdaptiveHedging clamps to them, a
	// destination policy must be within them.
	minTailQuantile = 0.5
	maxTailQuantile = 0.999
)

// WithAdaptiveHedging turns hedging on as WithHedging does, with a delay
// that follows the destination's latency instead of a fixed one: the
// quantile-th quantile (0.95 for the 95th percentile) of the latency of the
// recent successful first attempts to the request's host, as the transport
// observed them (the last 10 to 20 seconds). Everything else is as
// WithHedging says: which requests are hedged, the counting rule, the
// budget's charge on every hedge.
//
// A quantile of zero or less, or NaN, or a maxHedges of zero or less, turns
// hedging off; a quantile is clamped to [0.5, 0.999]. Until the host's
// window holds enough latencies (4/(1-quantile), at least 20: 80 for the
// 95th percentile), its requests are not hedged, and their first attempts
// are timed to fill it. A request whose deadline leaves less than twice the
// delay is not hedged, and no hedge is sent with less than the delay left
// before the deadline: it could not come back in time. docs/hedging.md has
// the details.
func WithAdaptiveHedging(quantile float64, maxHedges int) Option {
	return option(withAdaptiveHedging(quantile, maxHedges))
}

// SetAdaptiveHedging returns a context that makes requests sent with it
// hedge as WithAdaptiveHedging(quantile, maxHedges) says, whatever the
// transport's setting; a quantile or a maxHedges of zero or less turns
// hedging off for them.
func SetAdaptiveHedging(ctx context.Context, quantile float64, maxHedges int) context.Context {
	return withOverride(ctx, "hedging", withAdaptiveHedging(quantile, maxHedges))
}

func withAdaptiveHedging(quantile float64, maxHedges int) patch {
	q := tailQuantile(quantile)
	return func(s *settings) { s.hedgeDelay, s.hedgeQuantile, s.maxHedges = 0, q, maxHedges }
}

// tailQuantile returns q clamped to [minTailQuantile, maxTailQuantile]; a
// q that is zero or less, or NaN, is 0: adaptive hedging off.
func tailQuantile(q float64) float64 {
	if !(q > 0) {
		return 0
	}
	return min(max(q, minTailQuantile), maxTailQuantile)
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

// tailLatency is the recent latency of one destination's successful first
// attempts: two slots, the current epoch's and the one before's. Safe for
// concurrent use; a latency recorded while its slot is being cleared for a
// new epoch may be lost, which moves a quantile by less than a bucket.
type tailLatency struct {
	slots    [2]tailSlot
	estimate atomic.Pointer[tailEstimate] // the last quantile computed; nil: none yet
}

// tailEstimate is a quantile as computed at some time.
type tailEstimate struct {
	q     float64
	at    int64         // when, in nanoseconds of the transport's clock
	delay time.Duration // positive
}

func (*tailLatency) Idle() bool { return false } // dropping one loses its samples
func (*tailLatency) Busy() bool { return false }

// record adds latency d, measured at now (nanoseconds of the transport's
// clock).
func (l *tailLatency) record(now int64, d time.Duration) {
	e := now / int64(tailEpoch)
	s := &l.slots[e&1]
	if old := s.epoch.Load(); old != e && s.epoch.CompareAndSwap(old, e) {
		for i := range s.counts {
			s.counts[i].Store(0)
		}
	}
	s.counts[tailBucket(d)].Add(1)
}

// delay returns the q-quantile of the window at now, and whether the window
// holds enough samples for one (tailMinSamples). It computes the quantile
// again if the last one is of another q or older than tailRefresh. A window
// with too few samples is not cached: the next request looks again, so that
// hedging starts with the sample that completes the window.
func (l *tailLatency) delay(now int64, q float64) (time.Duration, bool) {
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
func (l *tailLatency) quantile(now int64, q float64) time.Duration {
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

// tailLatencies are a Transport's tailLatency per destination, made on
// first use. The zero value is ready to use.
type tailLatencies struct {
	once  sync.Once
	hosts *hostmap.Map[*tailLatency]
}

// of returns the latencies of req's destination, made if missing.
func (t *tailLatencies) of(req *http.Request) *tailLatency {
	t.once.Do(func() {
		t.hosts = hostmap.New(tailMaxHosts, func(hostmap.Key) *tailLatency { return new(tailLatency) })
	})
	return t.hosts.GetOrCreate(hostmap.KeyOf(req))
}

// hedging returns the hedge delay of a request, and whether it is hedged
// (settings.hedges): the fixed delay of WithHedging, or, with adaptive
// hedging, the quantile of its destination's recent first attempts, if
// there are enough of them and the request's deadline leaves time for a
// hedge sent after that delay to take as long (else it is not hedged).
func (t *Transport) hedging(ctx context.Context, req *http.Request, s *settings, idem idempotency, body *replay) (time.Duration, bool) {
	switch {
	case !s.hedges(idem, body):
		return 0, false
	case s.hedgeQuantile == 0:
		return s.hedgeDelay, true
	}
	d, ok := t.tails.of(req).delay(t.clock().Now().UnixNano(), s.hedgeQuantile)
	if !ok || t.pastDeadline(ctx, 2*d) {
		return 0, false
	}
	return d, true
}

// firstStart returns when the first attempt (count 1) of a request with
// adaptive hedging starts, for firstEnd; the zero time otherwise.
func (t *Transport) firstStart(s *settings, count int) time.Time {
	if count != 1 || s.hedgeQuantile == 0 {
		return time.Time{}
	}
	return t.clock().Now()
}

// firstEnd records the latency of a first attempt that started at start
// (firstStart) and ended with res and err, if it was successful: a
// response with an answer (below 400).
func (t *Transport) firstEnd(req *http.Request, start time.Time, res *http.Response, err error) {
	if !start.IsZero() && succeeded(res, err) {
		t.tailSince(req, start)
	}
}

// succeeded reports whether an attempt that ended with res and err is one
// whose latency counts: a response with an answer (below 400).
func succeeded(res *http.Response, err error) bool {
	return err == nil && res != nil && answered(res.StatusCode)
}

// tailSince records the latency of a first attempt to req's destination
// that started at start and has ended (or, for one that a hedge beat, was
// cancelled: it took longer than that, at least).
func (t *Transport) tailSince(req *http.Request, start time.Time) {
	now := t.clock().Now()
	t.tails.of(req).record(now.UnixNano(), now.Sub(start))
}

// firstLatency records the latency of attempt 1 of a hedged request, o, if
// it was timed and successful.
func (h *hedge) firstLatency(o *outcome) {
	if o.took > 0 && succeeded(o.res, o.err) {
		h.t.tails.of(h.caller).record(h.t.clock().Now().UnixNano(), o.took)
	}
}
