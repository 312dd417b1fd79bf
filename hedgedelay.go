package retryhttp

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/hostmap"
	"github.com/seed2409de8f/retryhttp/internal/tail"
)

// Adaptive hedging (WithAdaptiveHedging): the hedge delay of a request is a
// high quantile of the latency of recent successful first attempts to its
// destination, estimated by a tail.Latency per destination
// (internal/tail), on the transport's clock (clock.go).

// tailMaxHosts bounds the destinations a Transport keeps latencies of
// (about 1.6 KiB each).
const tailMaxHosts = 256

// tailLatency is the tail.Latency of one destination, in the transport's
// host map.
type tailLatency struct{ tail.Latency }

func (*tailLatency) Idle() bool { return false } // dropping one loses its samples
func (*tailLatency) Busy() bool { return false }

// WithAdaptiveHedging turns hedging on as WithHedging does, with a delay
// that follows the destination's latency instead of a fixed one: the
// quantile-th quantile (0.95 for the 95th percentile) of the latency of the
// recent successful first attempts to the request's host, as the transport
// observed them. Everything else is as
// WithHedging says: which requests are hedged, the counting rule, the
// budget's charge on every hedge.
//
// A quantile of zero or less, or NaN, or a maxHedges of zero or less, turns
// hedging off; a quantile is clamped to [0.5, 0.999]. Until the host's
// window holds enough latencies (docs/hedging.md), its requests are not
// hedged, and their first attempts are timed to fill it. A request whose deadline leaves less than twice the
// delay is not hedged, and no hedge is sent with less than the delay left
// before the deadline: it could not come back in time. docs/hedging.md has
// the details.
func WithAdaptiveHedging(quantile float64, maxHedges int) Option {
	return option(withAdaptiveHedging(quantile, maxHedges))
}

func withAdaptiveHedging(quantile float64, maxHedges int) patch {
	q := tail.ClampQuantile(quantile)
	return func(s *settings) { s.hedgeDelay, s.hedgeQuantile, s.maxHedges = 0, q, maxHedges }
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
	d, ok := t.tails.of(req).Delay(t.clock().Now().UnixNano(), s.hedgeQuantile)
	if !ok || t.pastDeadline(ctx, 2*d) {
		return 0, false
	}
	return d, true
}

// firstStart returns when the first attempt (count 1) of a hedged request
// with adaptive hedging starts; the zero time otherwise.
func (t *Transport) firstStart(s *settings, count int) time.Time {
	if count != 1 || s.hedgeQuantile == 0 {
		return time.Time{}
	}
	return t.clock().Now()
}

// firstEnd records the latency of the first attempt of a request that the
// retry loop sends, which took latency (on the transport's clock:
// sendSettled) and ended with res and err, if it was successful: a
// response with an answer (below 400).
func (t *Transport) firstEnd(req *http.Request, latency time.Duration, res *http.Response, err error) {
	if succeeded(res, err) {
		t.tails.of(req).Record(t.clock().Now().UnixNano(), latency)
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
	t.tails.of(req).Record(now.UnixNano(), now.Sub(start))
}

// firstLatency records the latency of attempt 1 of a hedged request, o, if
// it was timed and successful.
func (h *hedge) firstLatency(o *outcome) {
	if o.took > 0 && succeeded(o.res, o.err) {
		h.t.tails.of(h.caller).Record(h.t.clock().Now().UnixNano(), o.took)
	}
}
