package budget

import (
	"sync/atomic"
	"time"
)

// The pause lane: the retries of responses that asked for a pause (a 429,
// a Retry-After, a rate-limit reset header). Such a response is an
// instruction about the host, not a refusal of the request: its retry
// waits the pause it was given (the caller's side, in package retryhttp),
// then queues here, first come first served, and is released at the pace
// the host accepts, not refused for want of tokens. The pause is the
// request's (a later 429 does not hold the others back); the pace is the
// host's, learned from its answers to the lane's releases:
//
//   - Until one of them is answered with a pause, one at a time: each
//     answer releases the next, so that a closed loop whose every caller
//     waits drains as fast as the host answers; for a host that asked for
//     a pause for want of room (a 503, not a 429), twice as many in
//     flight with each success (laneRoom).
//   - At the first pause answer, the host accepted the retries released so
//     far in the pause it stated, and the first attempts it let through
//     meanwhile (as far back as its statistics go: the callers the lane
//     freed took its tokens too): releases are spaced by the pause over
//     their number (the gap), which then halves with each success (a rate
//     limiter refilled more than it let through at once) until the next
//     pause answer.
//   - At each later one, the host's pace is what it accepted between two
//     pause answers: the gap is their interval over the successes in it
//     (with fewer than two, the gap doubles); each success shortens it by
//     a twentieth, to find out whether the host accepts more.
//   - Once the host has answered no pause, to anyone, for as long as the
//     pause it last stated, it has room again (a rate limiter refilled:
//     the callers that kept it full are gone; unless they held for the
//     pause, Waiter.hold, which silences it): each success halves the
//     gap again until the next pause answer, so that a queue built up
//     while the host was full drains at the host's pace, not at the
//     twentieth's.
//
// A gap shortened by a success counts from the latest release, not from
// the release it was set at. A pause answer slows the pace at most once
// per round: the retries released before it were sent at the old pace.
// The gap never exceeds the
// pause stated. The lane's retries that slow the pace spend a token of the
// bucket (Settle): a host that answers a pause other than a 429 to
// everything gets fewer and fewer of them, as Admit refuses the retries of
// such a pause while the bucket is empty (a 429's wait in the lane all the
// same: it says "later", not "I am sick"). A waiter that asked for it (Waiter.hold) is not
// released before the host's latest stated pause has run out.
type lane struct {
	queue    waitQueue
	inFlight int
	gap      time.Duration // the spacing of releases once the pace is known; 0: not yet
	next     int64         // budget clock before which no retry is released
	last     int64         // budget clock of the latest release
	released uint64        // lane slots handed out so far
	slowedAt uint64        // released when the pace was last slowed down
	probing  bool          // the gap halves with each success until the next pause
	mark     int64         // budget clock of the latest pause answer to a released retry
	markOK   int           // released retries that succeeded since mark
}

// laneGapShrink is what a released retry's success multiplies the gap by,
// once the pace was measured: the host may accept more than it did.
const laneGapShrink = 0.95

// inPause reports whether the host is in a pause episode: it answered
// with a pause within the budget's MaxWait, or retries wait in its lane.
func (h *host) inPause(at int64) bool {
	since := h.pause.since.Load()
	return since != 0 && (at-h.pause.last.Load() <= int64(h.maxWait)+h.pause.stated.Load() || h.lanes.Load() > 0)
}

// pauseState is what a host's answers say of its pauses, kept with atomic
// operations so that an attempt outside a pause episode takes no lock.
type pauseState struct {
	since  atomic.Int64 // budget clock of the episode's first pause answer; 0: none
	last   atomic.Int64 // of the latest pause answer
	until  atomic.Int64 // when the latest stated pause runs out (Waiter.hold)
	stated atomic.Int64 // the latest stated pause, nanoseconds
	limit  atomic.Bool  // the latest pause answer was a 429: the server limits the rate
}

// held reports whether h's server stated a pause that has not run out
// yet, or requests wait in its lane for one (WithHoldDuringPause).
func (b *Budget) held(h *host) bool {
	return h.lanes.Load() > 0 || h.pause.until.Load() > b.clock()
}

// laneETA returns when a retry that joins h's lane now would be released,
// at the earliest, at the pace the lane keeps (the gap between releases);
// now when the pace is not known yet.
func (b *Budget) laneETA(h *host) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := &h.lane
	at := b.clock()
	if l.gap == 0 {
		return 0
	}
	return max(time.Duration(l.next-at), 0) + time.Duration(l.queue.n)*l.gap
}

// paused records that an attempt of h was answered with a pause of stated
// (zero: none stated) at time at.
func (h *host) paused(at int64, stated time.Duration, limit bool) {
	ps := &h.pause
	ps.limit.Store(limit)
	if ps.since.Load() == 0 || !h.inPause(at) {
		ps.since.Store(max(at, 1))
	}
	ps.last.Store(at)
	ps.stated.Store(int64(stated))
	if u := at + int64(stated); u > ps.until.Load() {
		ps.until.Store(u)
	}
}

// laneStep releases the lane's waiters the pace allows at time at.
// Requires h.mu.
func (h *host) laneStep(at int64) {
	l := &h.lane
	if l.queue.n == 0 && l.inFlight == 0 && !h.inPause(at) {
		// The episode is over: the next one learns the pace again.
		l.gap, l.next, l.probing, l.markOK = 0, 0, false, 0
	}
	for l.queue.n > 0 {
		w := l.queue.head
		switch {
		case w.hold && at < h.pause.until.Load(),
			at < l.next && !w.timeless,
			l.gap == 0 && l.inFlight >= h.laneRoom():
			return
		}
		l.queue.pop()
		l.inFlight++
		l.released++
		w.seq = l.released
		w.state = WaitReleased
		w.ring()
		l.next = at + int64(l.gap)
		l.last = at
		if l.queue.head != nil {
			l.queue.head.ring() // the new head computes its own wait
		}
	}
}

// laneWake returns when the head of the lane should look again, on its
// own: when the gap, or the pause it holds for, runs out; 0 if an answer
// is what it waits for. Requires h.mu.
func (h *host) laneWake(w *Waiter) int64 {
	l := &h.lane
	if w.timeless {
		return 0
	}
	wake := l.next
	if w.hold {
		wake = max(wake, h.pause.until.Load())
	}
	if l.gap == 0 && l.inFlight >= h.laneRoom() && !w.hold {
		return 0
	}
	return wake
}

// laneRoom returns how many of the lane's releases may be in flight while
// its pace is not known. A rate limiter's (the latest pause answer was a
// 429): one, each answer releasing the next, so that it is probed, not
// flooded. A host that asked for a pause for want of room (a 503 with
// Retry-After): one, doubling with each success since its latest pause
// answer, so that a host whose pause is over is not drained
// one answer at a time. Requires h.mu.
func (h *host) laneRoom() int {
	if h.pause.limit.Load() {
		return 1
	}
	return 1 << min(h.lane.markOK, 10)
}

// laneSettle records the answer to a retry the lane released at time at:
// out says whether it succeeded (SlotNeutral: cancelled, it says nothing
// of the host), pause whether the host asked for a pause again, hold
// whether its caller held for the host's stated pause (then no answer
// says the pause is over: the caller held everyone). It
// reports whether the answer slowed the pace down: the lane's retries
// that do so are those the bucket pays for. Requires h.mu.
func (h *host) laneSettle(at int64, seq uint64, out SlotOutcome, pause, hold bool) (slowed bool) {
	l := &h.lane
	l.inFlight--
	switch {
	case out == SlotNeutral:
	case seq <= l.slowedAt:
		// Released before the pace was last slowed down: sent at the
		// old pace, it says nothing of the new one.
	case out == SlotOK:
		h.laneSped(at, hold)
	default:
		slowed = true
		l.slowedAt = l.released
		if pause { // else the outage's rules, not the lane's pace
			h.laneSlowed(at)
		}
	}
	return slowed
}

// laneSped shortens the lane's gap after a released retry succeeded at
// time at (hold: its caller held for the stated pause). Requires h.mu.
func (h *host) laneSped(at int64, hold bool) {
	l := &h.lane
	l.markOK++
	if stated := h.pause.stated.Load(); l.gap > 0 && !l.probing && !hold && at-h.pause.last.Load() > stated {
		// No pause answered to anyone for as long as the latest pause
		// stated: the host has room again (a rate limiter refilled);
		// find its pace again, halving per success.
		l.probing = true
	}
	switch {
	case l.gap == 0:
	case l.probing:
		l.gap = max(l.gap/2, time.Millisecond)
	default:
		l.gap = max(time.Duration(float64(l.gap)*laneGapShrink), time.Millisecond)
	}
	if l.gap > 0 {
		l.next = min(l.next, l.last+int64(l.gap))
	}
}

// laneSlowed sets the lane's gap after a released retry was answered with
// a pause at time at: the pace the host accepted. Requires h.mu.
func (h *host) laneSlowed(at int64) {
	l := &h.lane
	span := time.Duration(at - l.mark)
	switch {
	case l.gap == 0:
		// The host accepted markOK retries after the pause it stated
		// (or since it first asked for one).
		span = time.Duration(h.pause.stated.Load())
		if span <= 0 {
			span = time.Duration(at - h.pause.since.Load())
		}
		l.gap = span / time.Duration(max(l.markOK+h.firstOKSince(at-int64(span), at), 1))
		l.probing = true
	case l.markOK >= 2:
		// What the host accepted between two pauses: its pace.
		l.gap = span / time.Duration(l.markOK)
		l.probing = false
	default:
		l.gap *= 2
		l.probing = false
	}
	// The gap never exceeds the pause stated; a host that states none (a
	// bare 429) is probed at least once per MaxWait: its 429 says
	// "later", and the lane's pace finds when.
	if stated := time.Duration(h.pause.stated.Load()); stated > 0 {
		l.gap = min(l.gap, stated)
	} else {
		l.gap = min(l.gap, h.maxWait)
	}
	l.gap = max(l.gap, time.Millisecond)
	l.next = at + int64(l.gap)
	l.mark, l.markOK = at, 0
}

// firstOKSince counts the first attempts of h that succeeded from time
// from to at, as far back as the host's statistics go.
func (h *host) firstOKSince(from, at int64) int {
	e0, e := from/int64(statSlot), at/int64(statSlot)
	n := int64(0)
	for i := range h.stats.slots {
		s := &h.stats.slots[i]
		se := s.epoch.Load()
		if se > e || se < e0 || e-se >= statSlots {
			continue
		}
		n += s.ok.Load()
	}
	return int(n)
}
