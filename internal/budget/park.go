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

// Waiter is one parked retry. Its fields but ch are guarded by its host's
// mu.
type Waiter struct {
	ch         chan struct{} // rung, without blocking, when state changes or it becomes first
	state      WaitState
	seq        uint64 // the slot's number, once released; 0: released with a token
	owner      any    // the circuits of its Transport (evFail), opaque
	lane       bool   // waits in the pause lane (lane.go), not the outage's queue
	hold       bool   // in the lane: not released before the host's stated pause ran out
	timeless   bool   // in the lane: its caller waits on another clock than the budget's
	prev, next *Waiter
}

// NewWaiter returns a retry about to park, which fails at once when a
// circuit of owner opens (FailParked); owner may be nil.
func NewWaiter(owner any) *Waiter {
	return &Waiter{ch: make(chan struct{}, 1), owner: owner}
}

// NewLaneWaiter returns a retry about to wait in the pause lane, as
// NewWaiter; hold: not released before the host's latest stated pause has
// run out; clock: the clock its caller waits on (nil: the real one). A
// caller on another clock than b's cannot wait for a time on b's: the
// lane releases it as the host answers, without the pace's gap or the
// hold.
func (b *Budget) NewLaneWaiter(owner any, hold bool, clock any) *Waiter {
	timeless := clock != any(b.clk) && (clock != nil || b.clk != nil)
	return &Waiter{ch: make(chan struct{}, 1), owner: owner, lane: true, hold: hold && !timeless, timeless: timeless}
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

// Parked reports whether retries are parked on h, without its lock.
func (h *Host) Parked() bool { return h.waiting.Load() > 0 }

// Parks reports whether a retry without a token parks on h now: parking is
// on, and h is in an outage or in the recovery from one (Host.parks).
func (b *Budget) Parks(h *Host) bool {
	return !b.noParking && h.parks(b.clock(), b.maxWait)
}

// Enqueue parks w on h, unless MaxParked retries are parked there already.
func (b *Budget) Enqueue(h *Host, w *Waiter) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.p.queue.n+h.lane.queue.n >= b.maxParked {
		return false
	}
	h.step(b.clock(), input{ev: evPark, w: w})
	return true
}

// Check returns where w, parked on h, stands, how long it may sleep before
// it looks again on its own (0: until it is rung), and, once released, its
// lease. The first in the outage's queue looks every PollInterval (the
// gate changes with time alone); the first in the lane when the pace
// allows its release.
func (b *Budget) Check(h *Host, w *Waiter) (WaitState, time.Duration, Lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var wake time.Duration
	switch {
	case w.state != WaitParked:
	case w.lane && h.lane.queue.head == w:
		if at := h.laneWake(w); at > 0 {
			wake = max(time.Duration(at-b.clock()), time.Microsecond)
		}
	case !w.lane && h.p.queue.head == w:
		wake = PollInterval
	}
	return w.state, wake, b.leaseOf(h, w)
}

// leaseOf returns the lease of w, released on h: a slot, or a token.
func (b *Budget) leaseOf(h *Host, w *Waiter) Lease {
	return Lease{b: b, host: h, seq: w.seq, held: w.seq != 0, lane: w.lane}
}

// Alive returns how long h may go on without a success before w, parked
// on it, gives up: MaxWait since its latest success, and for a retry in
// the lane the host's latest stated pause on top.
func (b *Budget) Alive(h *Host, w *Waiter) time.Duration {
	d := b.maxWait - time.Duration(b.clock()-h.stats.lastOK.Load())
	if w.lane {
		d += time.Duration(h.pause.stated.Load())
	}
	return d
}

// Poke lets h look at the time: the gate may have opened.
func (b *Budget) Poke(h *Host) {
	h.mu.Lock()
	h.step(b.clock(), input{ev: evPoke})
	h.mu.Unlock()
}

// Leave takes w out of h's queue. If the window released it meanwhile, it
// reports true with the lease it holds.
func (b *Budget) Leave(h *Host, w *Waiter) (Lease, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.state == WaitParked {
		h.step(b.clock(), input{ev: evLeave, w: w})
	}
	return b.leaseOf(h, w), w.state == WaitReleased
}

// Pacing returns h's window, the slots held and the retries parked.
func (h *Host) Pacing() (window, inFlight, parked int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return int(h.p.window), h.p.inFlight, h.p.queue.n
}

// Parked reports whether retries are parked on the host of k: b is a place
// where the retries of circuits park (internal/breaker's Parking).
func (b *Budget) Parked(k hostmap.Key) bool {
	h, ok := b.hosts.Get(k)
	return ok && h.Parked()
}

// FailParked fails at once the retries parked on the host of k by
// Transports whose circuits are owner: their circuit opened.
func (b *Budget) FailParked(k hostmap.Key, owner any) {
	h, ok := b.hosts.Get(k)
	if !ok || !h.Parked() {
		return
	}
	h.mu.Lock()
	h.step(b.clock(), input{ev: evFail, owner: owner})
	h.mu.Unlock()
}
