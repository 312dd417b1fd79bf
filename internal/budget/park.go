package budget

import (
	"time"

	"github.com/seed2409de8f/retryhttp/internal/hostmap"
)

// WaitState is where a parked retry stands.
type WaitState uint8

// The states of a parked retry.
const (
	WaitParked   WaitState = iota // in the queue
	WaitReleased                  // given a slot, or a token
	WaitFailed                    // its circuit opened
	WaitLeft                      // gave up
)

// Waiter is one parked retry (Verdict.Waiter). Its fields but ch, b, h
// and r are guarded by its host's mu.
type Waiter struct {
	ch         chan struct{} // rung, without blocking, when state changes or it becomes first
	b          *Budget
	h          *host
	r          *Retry // its request's account: a release with a token is owed
	state      WaitState
	seq        uint64 // the slot's number, once released; 0: released with a token
	owner      any    // the circuits of its Transport (evFail), opaque
	lane       bool   // waits in the pause lane (lane.go), not the outage's queue
	hold       bool   // in the lane: not released before the host's stated pause ran out
	timeless   bool   // in the lane: its caller waits on another clock than the budget's
	owes       bool   // released with a token, which its request owes…
	owed       int    // …with the tokens of its earlier retries
	prev, next *Waiter
}

// Rung is rung when w's state changes or it becomes the first in its
// queue.
func (w *Waiter) Rung() <-chan struct{} { return w.ch }

// ring wakes w up, if it is not awake already.
func (w *Waiter) ring() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// waitQueue is a first-in first-out list of parked retries.
type waitQueue struct {
	head, tail *Waiter
	n          int
}

func (q *waitQueue) push(w *Waiter) {
	w.prev, w.next = q.tail, nil
	if q.tail != nil {
		q.tail.next = w
	} else {
		q.head = w
	}
	q.tail = w
	q.n++
}

func (q *waitQueue) pop() *Waiter {
	w := q.head
	q.remove(w)
	return w
}

func (q *waitQueue) remove(w *Waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		q.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		q.tail = w.prev
	}
	w.prev, w.next = nil, nil
	q.n--
}

// parked reports whether retries are parked on h, without its lock.
func (h *host) parked() bool { return h.waiting.Load() > 0 }

// Enqueue parks w on its host, unless MaxParked retries are parked there
// already.
func (w *Waiter) Enqueue() bool {
	h := w.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.p.queue.n+h.lane.queue.n >= w.b.maxParked {
		return false
	}
	h.step(w.b.clock(), input{ev: evPark, w: w})
	return true
}

// Stand is where a parked retry stands (Waiter.Check, Waiter.Leave), with
// its host's pacing, for reports.
type Stand struct {
	State WaitState
	// Sleep is how long the retry may sleep before it looks again on its
	// own, unless it is rung first; at most until its host has had no
	// success for too long (MaxWait; for a retry in the lane, no success
	// nor pause answer for MaxWait and the host's latest stated pause),
	// not counting a silence the client keeps (Quiet).
	// Zero or less: that time has come, and the retry must leave.
	Sleep time.Duration
	Lease Lease // once released

	Window, InFlight, Parked int // the host's window, its slots held, the retries parked on it
}

// Check lets w's host look at the time (the gate may have opened, the
// lane's gap run out), and returns where w stands. The first in the
// outage's queue looks every pollInterval (the gate changes with time
// alone); the first in the lane when the pace allows its release; the
// others wait to be rung.
func (w *Waiter) Check() Stand {
	b, h := w.b, w.h
	h.mu.Lock()
	defer h.mu.Unlock()
	at := b.clock()
	h.step(at, input{ev: evPoke})
	// A silence the client keeps (Quiet) is not the host's: it counts
	// from its end.
	last := max(h.stats.lastOK.Load(), h.quiet.Load())
	alive := b.maxWait - time.Duration(at-last)
	if w.lane {
		// A pause answer is a sign of life too: the host is talking,
		// and the lane's own gap is a silence it chose.
		last = max(last, h.pause.last.Load())
		alive = b.maxWait + h.lane.gap - time.Duration(at-last) + time.Duration(h.pause.stated.Load())
	}
	st := w.stand()
	st.Sleep = alive
	switch {
	case w.state != WaitParked || alive <= 0:
	case w.lane && h.lane.queue.head == w:
		if next := h.laneWake(w); next > 0 {
			st.Sleep = min(alive, max(time.Duration(next-at), time.Microsecond))
		}
	case !w.lane && h.p.queue.head == w:
		st.Sleep = min(alive, pollInterval)
	}
	return st
}

// Leave takes w out of its host's queue. If it was released meanwhile, its
// state says so, with the lease it holds.
func (w *Waiter) Leave() Stand {
	h := w.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.state == WaitParked {
		h.step(w.b.clock(), input{ev: evLeave, w: w})
	}
	return w.stand()
}

// stand returns where w stands, its lease once released: a slot, or a
// token, which its request owes. Requires h.mu.
func (w *Waiter) stand() Stand {
	h := w.h
	st := Stand{State: w.state, Window: int(h.p.window), InFlight: h.p.inFlight, Parked: h.p.queue.n}
	if w.state == WaitReleased {
		st.Lease = Lease{b: w.b, host: h, seq: w.seq, held: w.seq != 0, lane: w.lane, hold: w.hold}
		if !st.Lease.held && !w.lane { // released with a token
			if !w.owes {
				w.owes, w.owed = true, w.r.owe()
			}
			st.Lease.owed = w.owed
		}
	}
	return st
}

// Quiet records that the client holds its own requests to the host of k
// for d from now: the quota book holds them until an advertised quota's
// window turns (package retryhttp's quotaHold). Until then the host is
// silent because the client is, and a parked retry does not take it for
// a host that stopped answering (Check): in the lane, the retry released
// before it may be the one held, and the answer it waits for comes after
// the hold. A hold of one of the host's scopes quiets the whole host: its
// other requests' answers, if any, count all the same. Only a host the
// budget knows.
func (b *Budget) Quiet(k hostmap.Key, d time.Duration) {
	h, ok := b.hosts.Get(k)
	if !ok || d <= 0 {
		return
	}
	until := b.clock() + int64(d)
	for {
		old := h.quiet.Load()
		if until <= old || h.quiet.CompareAndSwap(old, until) {
			return
		}
	}
}

// Parked reports whether retries are parked on the host of k, or wait in
// its pause lane: b is a place where the retries of circuits park
// (internal/breaker's Parking).
func (b *Budget) Parked(k hostmap.Key) bool {
	h, ok := b.hosts.Get(k)
	return ok && (h.parked() || h.lanes.Load() > 0)
}

// FailParked fails at once the retries parked on the host of k, or waiting
// in its pause lane, by Transports whose circuits are owner: their circuit
// opened.
func (b *Budget) FailParked(k hostmap.Key, owner any) {
	h, ok := b.hosts.Get(k)
	if !ok || !h.parked() && h.lanes.Load() == 0 {
		return
	}
	h.mu.Lock()
	h.step(b.clock(), input{ev: evFail, owner: owner})
	h.mu.Unlock()
}
