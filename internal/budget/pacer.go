package budget

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Parameters of the pacing of parked retries: ten constants (the pause
// lane has an eleventh, lane.go's laneGapShrink), and gateMinSamples,
// probeQuiet and minWindowCap derived from them. docs/budget-algorithm.md
// ("Parameters") states the principle of each.
const (
	statSlot      = 50 * time.Millisecond // resolution of a host's recent outcomes
	statSlots     = 16                    // slots kept: the last 750-800ms, for the rate and latency
	gateSlots     = 4                     // slots the gate judges by: the last 150-200ms
	gateFailShare = 0.2                   // no release while this share of first attempts fail

	// The gate judges by the share of failures only with enough first
	// attempts that, at gateFailShare, each slot of its span holds one
	// failure: fewer cannot show the share (20).
	gateMinSamples = int(gateSlots / gateFailShare)

	// With fewer samples, a lone probe once no failure was heard for
	// probeQuiet: the gate's span and one slot more, so that the latest
	// failure has left every slot the gate judges by (250ms).
	probeQuiet = (gateSlots + 1) * statSlot

	// The window's cap is at least the gate's sample, and the window
	// starts at its cap: the retries it lets go at once, should they all
	// fail, make one sample for the gate to judge by, no more (20).
	minWindowCap = gateMinSamples
	capFactor    = 2                // cap: capFactor × rate × lowest latency
	minLatHold   = 10 * time.Second // the lowest latency is kept this long unless seen again

	// A host whose latest outageStreak attempts in a row failed is in an
	// outage: its retries park, token or not. A host that
	// fails half its requests at random does that once in a thousand runs
	// of ten (0.5^10).
	outageStreak = 10

	// releaseShare bounds the rate of parked retries released through the
	// window: at most this many per first attempt the host received over
	// the statistics' span, so that a recovering host sees at most twice
	// its own traffic, whatever the latency (Little's law would let a
	// window of 10 send 1,000 a second at 10ms). It is also the most
	// credit saved up: the share of one first attempt, so that released
	// retries are interleaved with the host's own traffic rather than
	// sent in batches (a batch the size of the window overflows a host
	// whose headroom is smaller).
	releaseShare = 1.5

	// A successful retry slower than congestionFactor × the lowest latency
	// of the host's first attempts, and than that plus congestionFloor,
	// halves the window as a failure does.
	congestionFactor = 4
	congestionFloor  = 20 * time.Millisecond
)

// pollInterval is how often the first parked retry looks at the gate (its
// host's recent first attempts change with time alone).
const pollInterval = statSlot

// host is the retry state of one destination host: its bucket of
// tokens, its recent outcomes, and its window of parked retries in flight
// with the queue of those waiting for it.
//
// The bucket and the statistics are updated with atomic operations, so that
// an attempt that needs no slot takes no lock. The window and the queue
// change only in step, under mu.
type host struct {
	tokens   atomic.Int64 // micro-tokens
	capacity int64
	maxWait  time.Duration // the budget's MaxWait
	stats    hostStats
	waiting  atomic.Int32 // len of the queue, for readers without mu
	inFlight atomic.Int32 // slots held, for readers without mu
	window   atomic.Int32 // p.window rounded down, for readers without mu

	pause pauseState   // the host's pause answers (lane.go)
	lanes atomic.Int32 // retries waiting in the lane or released by it, for readers without mu
	quiet atomic.Int64 // budget clock until which the client holds its own requests to the host (Quiet)

	mu   sync.Mutex
	p    pacer // guarded by mu
	lane lane  // guarded by mu
}

func newHost(capacity int64, maxWait time.Duration, at int64) *host {
	h := &host{capacity: capacity, maxWait: maxWait}
	h.tokens.Store(capacity)
	// Until its first outcome, the host answers, as far as anyone knows,
	// and never failed.
	h.stats.lastOK.Store(at - 1)
	h.stats.lastFail.Store(math.MinInt64 / 2)
	// Nothing is known to succeed on a host that never answered: its
	// first failure is an outage's.
	h.stats.streak.Store(outageStreak)
	h.stats.unseen.Store(outageStreak)
	h.stats.outEnd.Store(math.MinInt64 / 2)
	h.stats.slowAt.Store(math.MinInt64 / 2)
	// The window starts at its cap: the pace, not a slow start, bounds
	// the first releases.
	h.p.window = float64(minWindowCap)
	h.window.Store(int32(minWindowCap))
	h.p.lastSettle, h.p.creditAt = at, at
	return h
}

// Idle reports whether forgetting the host loses nothing: a full bucket,
// and nothing parked or in flight.
func (h *host) Idle() bool {
	return h.tokens.Load() >= h.capacity && !h.Busy()
}

// Busy reports whether callers wait on the host, or hold its slots: its
// state must then be kept.
func (h *host) Busy() bool {
	return h.waiting.Load() > 0 || h.inFlight.Load() > 0 || h.lanes.Load() > 0
}

// pacer is the window of parked retries of one host and their queue.
type pacer struct {
	window     float64       // parked retries (and slot-taking hedges) allowed in flight
	ssthresh   float64       // below it the window grows by one per success; 0: never halved
	inFlight   int           // slots held
	released   uint64        // slots handed out so far: the number of the latest
	halvedAt   uint64        // released when the window was last halved
	lastSettle int64         // budget clock when a slot was last given back
	lastMinLat time.Duration // the lowest latency seen, held for minLatHold
	lastMinAt  int64         // when it was last seen
	credit     float64       // releases the pace allows now (accrue)
	peak       float64       // the highest rate of first attempts seen, held for minLatHold
	peakAt     int64         // when it was last seen
	creditAt   int64         // budget clock when credit was last brought up to date
	queue      waitQueue
}

// event is what happened to a host's pacing state.
type event uint8

const (
	evPark   event = iota + 1 // a retry without a token joins the queue
	evLeave                   // a parked retry gives up (expired, cancelled)
	evSettle                  // an attempt that held a slot ended
	evTake                    // a hedge asks for a slot without waiting
	evFail                    // a circuit opened: its parked retries fail at once
	evPoke                    // time passed, or a first attempt succeeded
)

// SlotOutcome is the outcome of an attempt that held a slot.
type SlotOutcome uint8

const (
	SlotNeutral SlotOutcome = iota // cancelled: says nothing about the host
	SlotOK
	SlotFailed
)

func outcomeOf(ok bool) SlotOutcome {
	if ok {
		return SlotOK
	}
	return SlotFailed
}

// input is one event with its arguments.
type input struct {
	ev      event
	w       *Waiter       // evPark, evLeave
	out     SlotOutcome   // evSettle
	seq     uint64        // evSettle: the number of the slot
	lat     time.Duration // evSettle: the attempt's latency…
	timeout time.Duration // …and its timeout, if it had one
	owner   any           // evFail: whose parked retries fail
}

// step is the transition function of a host's pacing state: it applies in
// at time at (on the budget's clock), then releases parked retries while
// the gate is open, the pace allows and a slot or a token is free. It
// reports, for evTake,
// whether a slot was granted and its number. It requires h.mu held, and
// wakes the waiters it releases or fails without blocking.
func (h *host) step(at int64, in input) (granted bool, seq uint64) {
	p := &h.p
	head := p.queue.head
	// Lazy time: a window unused for longer than a retry may park (the
	// budget's MaxWait) served another episode: its halvings are
	// forgotten, and it starts again at its cap.
	if p.inFlight == 0 && at-p.lastSettle > int64(h.maxWait) {
		p.window, _, _ = h.windowCap(at)
		p.ssthresh = 0
	}
	switch in.ev {
	case evPark:
		h.queueOf(in.w).push(in.w)
	case evLeave:
		if in.w.state == WaitParked {
			h.queueOf(in.w).remove(in.w)
			in.w.state = WaitLeft
		}
	case evSettle:
		h.settleSlot(at, in)
	case evTake:
		if limit, _, _ := h.windowCap(at); p.queue.n == 0 && float64(p.inFlight) < min(p.window, limit) && h.gate(at) {
			granted, seq = true, p.take()
		}
	case evFail:
		h.failOwner(in.owner)
	case evPoke:
	}
	// Release, first come first served, while the gate is open, at the
	// pace the host's traffic allows (accrue): with a slot of the window,
	// or a token.
	if p.queue.n > 0 {
		limit := h.accrue(at)
		for p.queue.n > 0 && p.credit >= 1 && h.gate(at) && h.release(limit) {
		}
	}
	// A new first waiter watches the gate (park.go).
	if p.queue.head != head && p.queue.head != nil {
		p.queue.head.ring()
	}
	h.laneStep(at)
	h.waiting.Store(int32(p.queue.n))
	h.inFlight.Store(int32(p.inFlight))
	h.lanes.Store(int32(h.lane.queue.n + h.lane.inFlight))
	h.window.Store(int32(p.window))
	return granted, seq
}

// queueOf returns the queue w waits in: the pause lane's, or the outage's.
// Requires h.mu.
func (h *host) queueOf(w *Waiter) *waitQueue {
	if w.lane {
		return &h.lane.queue
	}
	return &h.p.queue
}

// settleSlot gives back the slot of an attempt that held one (evSettle),
// and moves the window with its outcome: it grows with a success, and
// halves, once per round, with a failure or a success that queued.
// Requires h.mu.
func (h *host) settleSlot(at int64, in input) {
	p := &h.p
	p.inFlight--
	p.lastSettle = at
	limit, _, _ := h.windowCap(at) // also refreshes p.lastMinLat
	if in.out == SlotOK && p.lastMinLat > 0 && in.lat > congested(p.lastMinLat, in.timeout) {
		in.out = SlotFailed // a success, but queued: the host is full
	}
	switch {
	case in.out == SlotOK:
		p.grow(limit)
		// While the host's own traffic is too thin to pace by (the
		// gate's sample: a closed loop whose callers all wait sends
		// none), the answer releases the next: parked retries drain as
		// fast as the host answers them.
		if h.thin(at) {
			p.credit = min(p.credit+1, releaseShare)
		}
	case in.out == SlotFailed && in.seq > p.halvedAt:
		// Halve once per round: retries released before the last
		// halving were sent into the old window.
		p.ssthresh = max(p.window/2, 1)
		p.window = p.ssthresh
		p.halvedAt = p.released
	}
}

// failOwner fails at once the waiters of owner, in both queues: their
// circuit opened (evFail). Requires h.mu.
func (h *host) failOwner(owner any) {
	for _, q := range []*waitQueue{&h.p.queue, &h.lane.queue} {
		for w := q.head; w != nil; {
			next := w.next
			if w.owner == owner {
				q.remove(w)
				w.state = WaitFailed
				w.ring()
			}
			w = next
		}
	}
}

// congested returns the latency above which a successful retry counts as
// a failure for the window: it waited in a queue of the host, which has no
// room for more retries. That is congestionFactor × the host's lowest
// latency, at least that plus congestionFloor, and at least half the
// attempt's timeout (a success that took longer was close to failing).
func congested(minLat, timeout time.Duration) time.Duration {
	return max(congestionFactor*minLat, minLat+congestionFloor, timeout/2)
}

// thin reports whether the host's recent first attempts are too few to
// pace parked retries by (fewer than the gate's sample).
func (h *host) thin(at int64) bool {
	ok, fail, _, _ := h.stats.recent(at)
	return ok+fail < int64(gateMinSamples)
}

// take hands out a slot and returns its number.
func (p *pacer) take() uint64 {
	p.inFlight++
	p.released++
	return p.released
}

// grow widens the window after a successful retry: by one while below the
// threshold (or never halved: up to a cap that grew with the host's
// traffic), then by one per window's worth of successes.
func (p *pacer) grow(limit float64) {
	if p.ssthresh == 0 || p.window < p.ssthresh {
		p.window++
	} else {
		p.window += 1 / p.window
	}
	p.window = min(p.window, limit)
}

// release releases the first parked retry, if it can have a slot of the
// window (limit: the most in flight), else a token of the bucket, which
// successes may have refilled; it reports whether it did. The caller
// checked the gate and the pace. Requires h.mu.
func (h *host) release(limit float64) bool {
	p := &h.p
	var seq uint64 // 0: a token, no slot to give back
	switch {
	case float64(p.inFlight) < limit:
		seq = p.take()
	case h.withdraw():
	default:
		return false
	}
	p.credit--
	h.releaseHead(seq)
	return true
}

// releaseHead releases the first parked retry with the slot seq (0: a
// token). Requires h.mu.
func (h *host) releaseHead(seq uint64) {
	w := h.p.queue.pop()
	w.seq = seq
	w.state = WaitReleased
	w.ring()
}

// accrue brings the credit of releases up to date, at releaseShare of the
// host's rate of first attempts (at least one per probeQuiet), and returns
// the most parked retries the window lets be in flight now. The credit is
// held to releaseShare (one first attempt's share), so that neither a gate closed for long nor a pause
// between events lets a batch through at once. Requires h.mu.
func (h *host) accrue(at int64) float64 {
	limit, rate, peak := h.windowCap(at)
	p := &h.p
	// At releaseShare of the host's first attempts; at least what the
	// host carried lately beyond them (a closed loop whose callers wait
	// on their parked retries sends no first attempts: the retries are
	// its traffic); at least a probe's pace, for a host without traffic.
	pace := max(releaseShare*rate, peak-rate, 1/probeQuiet.Seconds())
	if at > p.creditAt {
		p.credit += pace * time.Duration(at-p.creditAt).Seconds()
		p.creditAt = at
	}
	// Never saved up beyond one first attempt's share, or what the
	// traffic the host lost brings between two looks of the first parked
	// retry: releases go out between the host's own first attempts, not
	// in a batch that a host with little headroom would shed.
	p.credit = min(p.credit, max(releaseShare, (peak-rate)*pollInterval.Seconds()))
	return min(p.window, limit)
}

// windowCap returns the most the window may be: capFactor × the host's
// rate of first attempts × their lowest latency (the first attempts it has
// in flight when it is fast), and at least minWindowCap; and that rate,
// per second. The lowest latency is held for minLatHold, so that a queue
// which builds up during an outage does not pass for the host's speed.
// Requires h.mu.
func (h *host) windowCap(at int64) (limit, rate, peak float64) {
	_, _, rate, lat := h.stats.recent(at)
	lat = h.minLatency(at, lat)
	peak = h.peakRate(at, rate)
	return max(float64(minWindowCap), capFactor*max(rate, peak)*lat.Seconds()), rate, peak
}

// peakRate returns the highest rate of first attempts the host received
// lately, held for minLatHold as its lowest latency is (minLatency),
// given rate, its rate now. Requires h.mu.
func (h *host) peakRate(at int64, rate float64) float64 {
	p := &h.p
	if rate >= p.peak || at-p.peakAt > int64(minLatHold) {
		p.peak, p.peakAt = rate, at
	}
	return p.peak
}

// minLatency returns the host's lowest latency held for minLatHold, given
// lat, the lowest of its recent first attempts. Requires h.mu.
func (h *host) minLatency(at int64, lat time.Duration) time.Duration {
	p := &h.p
	if lat > 0 && (lat <= p.lastMinLat || p.lastMinLat == 0 || at-p.lastMinAt > int64(minLatHold)) {
		p.lastMinLat, p.lastMinAt = lat, at
	}
	return p.lastMinLat
}

// queued reports whether a success that took lat, with the attempt timeout
// timeout, waited in a queue of the host (see congested): a sign that it
// has no room for more. It takes h.mu.
func (h *host) queued(at int64, lat, timeout time.Duration) bool {
	_, _, _, recent := h.stats.recent(at)
	h.mu.Lock()
	defer h.mu.Unlock()
	minLat := h.minLatency(at, recent)
	return minLat > 0 && lat > congested(minLat, timeout)
}

// hurt reports whether the host shows that load may hurt it: within the
// statistics' span, an attempt failed after half its timeout or more (it
// waited in a queue of the host, or the host is stuck). A host that
// answers, failures included, within its time shows no such sign: a retry
// there has the chance of a first attempt. (Latency alone is no sign: the
// endpoints of one host differ.)
func (h *host) hurt(at int64) bool {
	return at-h.stats.slowAt.Load() < int64(statSlots*statSlot)
}

// gate reports whether parked retries may be released: with enough recent
// first attempts, while less than gateFailShare of them fail, by a margin
// of one standard deviation (20% of 20 less 1.8, of 80 less 3.6); with
// fewer, once no failure was heard for probeQuiet, while the latest
// outcome was a success, else for one probe at a time. Requires h.mu.
func (h *host) gate(at int64) bool {
	// The outage's own failures say nothing of the recovery: the gate
	// judges the first attempts since the latest outage ended.
	ok, fail := h.stats.since(at, h.stats.outEnd.Load())
	if n := float64(ok + fail); n >= float64(gateMinSamples) {
		// Below the share by one standard deviation of a sample of n, so
		// that a host failing more than gateFailShare at random does not
		// open the gate by the luck of a short sample.
		return below(float64(fail), n)
	}
	lastOK, lastFail := h.stats.lastOK.Load(), h.stats.lastFail.Load()
	if at-lastFail < int64(probeQuiet) {
		return false
	}
	return lastOK > lastFail || h.p.inFlight == 0
}

// below reports whether fail failures of n attempts are below
// gateFailShare by a margin of one standard deviation (see gate).
func below(fail, n float64) bool {
	margin := math.Sqrt(n * gateFailShare * (1 - gateFailShare))
	return fail+margin < gateFailShare*n
}
