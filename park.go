package retryhttp

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/breaker"
	"github.com/seed2409de8f/retryhttp/internal/hostmap"
)

// maxParkedBody bounds the body of a response that a parked retry keeps
// while it waits: the response is returned as it is if the retry gives up,
// and reading its body lets its connection go back to the pool meanwhile. A
// longer body (or one that fails to read) is not parked: the retry is
// refused at once, as without parking, with the response untouched but for
// the bytes read, which are read again first.
const maxParkedBody = 4 << 10

// Parking reads the time and waits on the Transport's clock (clock.go),
// the host's state on the budget's; both are the real clock but in tests.
// WithClock governs only the retry's delay (waited with its Clock) and the
// deadline check before it.

// awaitRetry gets the retry of attempt a under way, once the policy chose
// it and its delay d. With a token of the destination's budget (or no
// budget), it reports the retry, lets go of a's response and waits d.
// Without one, it parks the retry: it keeps a's response, waits d, then
// queues for a slot of the host's window until the host answers again,
// within the bounds of RetryBudget; waited is the request's time parked so
// far. It returns the retry's lease, or why to stop and the error to
// return with a's response: the response is returned as it is, or the
// error joined with the sentinel of the reason.
func (t *Transport) awaitRetry(ctx context.Context, s *settings, a Attempt, d time.Duration, acct *retryAccount) (lease, StopReason, error) {
	b := s.budget
	if b == nil {
		return t.proceed(ctx, b, lease{}, a, s.maxRetries, d, d)
	}
	// While retries are parked on the host, a retry queues behind them
	// even with a token: they leave in turn, at the host's pace.
	h := b.hosts.GetOrCreate(hostmap.KeyOf(a.Req))
	if h.waiting.Load() == 0 && h.withdraw() {
		return t.proceed(ctx, b, acct.owe(h, a), a, s.maxRetries, d, d)
	}
	until, ok := t.parkable(ctx, s, h, a, d, acct.waited)
	switch {
	case !ok && h.withdraw():
		return t.proceed(ctx, b, acct.owe(h, a), a, s.maxRetries, d, d)
	case !ok:
		return lease{}, StopBudgetRefused, markGiveUp(StopBudgetRefused, a.Count, a.Err)
	}
	if t.breakers.isOpen(a.Req) {
		return lease{}, StopCircuitOpen, markGiveUp(StopCircuitOpen, a.Count, a.Err)
	}
	if err := t.wait(ctx, d); err != nil {
		discard(a.Res)
		return lease{}, StopCanceled, err
	}
	if h.waiting.Load() == 0 && h.withdraw() { // successes may have refilled the bucket meanwhile
		return t.proceed(ctx, b, acct.owe(h, a), a, s.maxRetries, d, 0)
	}
	start := t.clock().Now()
	l, why := t.park(ctx, b, h, a, until)
	acct.waited += t.clock().Now().Sub(start)
	switch {
	case why == 0 && !l.held: // released with a token
		return t.proceed(ctx, b, acct.owe(h, a), a, s.maxRetries, d, 0)
	case why == 0:
		return t.proceed(ctx, b, l, a, s.maxRetries, d, 0)
	case why == StopCanceled:
		discard(a.Res)
		return lease{}, why, ctx.Err()
	}
	return lease{}, why, markGiveUp(why, a.Count, a.Err) // budget refused, circuit open
}

// retryAccount is what one request has spent of its destination's budget
// so far: its time parked, over all its retries, and the tokens its retries
// took after failures that did not ask the client to back off, which a
// success gives back (settle).
type retryAccount struct {
	waited time.Duration
	owed   int
}

// owe records that the retry of a took a token of h, and returns the
// retry's lease, which carries the tokens the request owes. They go back
// to the bucket if the retry succeeds without queueing at the host
// (settle). A token is not owed back when a's response asked the client to
// back off (429, or Retry-After): a server that says so is short of room,
// and retrying it is not free whatever it answers next. A success of a
// (settled already: a policy may retry some of them) cleared the debt.
func (acct *retryAccount) owe(h *hostState, a Attempt) lease {
	if success(a.Res) {
		acct.owed = 0
	}
	if a.Res == nil || a.Res.StatusCode != http.StatusTooManyRequests && a.Res.Header.Get("Retry-After") == "" {
		acct.owed++
	}
	return lease{host: h, owed: acct.owed}
}

// proceed reports the retry of a after delay d, lets go of its response
// and waits wait (d, or nothing when it was waited already). It returns l,
// or StopCanceled, giving l's slot back, if the caller gave up meanwhile.
func (t *Transport) proceed(ctx context.Context, b *RetryBudget, l lease, a Attempt, maxRetries int, d, wait time.Duration) (lease, StopReason, error) {
	t.obs.reportRetry(a, maxRetries, d, false)
	discard(a.Res)
	if err := t.wait(ctx, wait); err != nil {
		l.end(b, outNeutral, 0, 0)
		return lease{}, StopCanceled, err
	}
	return l, 0, nil
}

// parkable reports whether the retry of a, after d, may be parked on h, and
// until when: parking is on, the host had a success within MaxWait, the
// bounds leave time to wait after d, and a's response, if any, could be
// kept (its body read into memory).
func (t *Transport) parkable(ctx context.Context, s *settings, h *hostState, a Attempt, d, waited time.Duration) (time.Time, bool) {
	b := s.budget
	if b.noParking || !h.parks(b.clock(), b.maxWait) {
		return time.Time{}, false
	}
	now := t.clock().Now()
	until := now.Add(d + b.maxWait - waited)
	if deadline, ok := ctx.Deadline(); ok && deadline.Add(-s.attemptTimeout).Before(until) {
		until = deadline.Add(-s.attemptTimeout)
	}
	if !until.After(now.Add(d)) {
		return time.Time{}, false
	}
	return until, keepResponse(a.Res)
}

// keepResponse reads res's body into memory, up to maxParkedBody, and
// closes it, so that res can wait without holding a connection. It
// reports false, leaving res readable as it was, if the body is longer or
// fails to read. A nil res is kept.
func keepResponse(res *http.Response) bool {
	if res == nil || res.Body == nil || res.Body == http.NoBody {
		return true
	}
	body := res.Body
	buf, err := io.ReadAll(io.LimitReader(body, maxParkedBody+1))
	if err != nil || len(buf) > maxParkedBody {
		res.Body = &prefixedBody{Reader: io.MultiReader(bytes.NewReader(buf), body), body: body}
		return false
	}
	body.Close()
	res.Body = io.NopCloser(bytes.NewReader(buf))
	return true
}

// prefixedBody is a body whose first bytes were read already.
type prefixedBody struct {
	io.Reader
	body io.ReadCloser
}

func (p *prefixedBody) Close() error { return p.body.Close() }

// park queues the retry of a on h and waits until the window releases it
// (a nil reason and a held lease), until, the caller's cancellation, or an
// open circuit, whichever comes first. Only the first retry in the queue
// wakes up on its own, every pollInterval, to look at the gate (the host's
// recent first attempts change with time alone); the others sleep until
// their bound, or until a change of state wakes them.
func (t *Transport) park(ctx context.Context, b *RetryBudget, h *hostState, a Attempt, until time.Time) (lease, StopReason) {
	w := &waiter{ch: make(chan struct{}, 1), owner: t.breakers.owner()}
	if !t.breakers.park(a.Req, b, func() bool { return b.enqueue(h, w) }) {
		return lease{}, StopBudgetRefused
	}
	c := t.clock()
	start := c.Now()
	t.obs.reportPark(ParkEvent{Kind: ParkParked, Attempt: a}, h)

	var timer clockTimer
	var fire <-chan time.Time
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		h.mu.Lock()
		state, first := w.state, h.p.queue.head == w
		h.mu.Unlock()
		switch state {
		case waitReleased:
			t.obs.reportPark(ParkEvent{Kind: ParkReleased, Attempt: a, Waited: c.Now().Sub(start)}, h)
			return lease{host: h, seq: w.seq, held: w.seq != 0}, 0
		case waitFailed:
			t.obs.reportPark(ParkEvent{Kind: ParkDropped, Attempt: a, Waited: c.Now().Sub(start), Reason: StopCircuitOpen}, h)
			return lease{}, StopCircuitOpen
		}
		// The bound of the request, or the host's: no success for MaxWait.
		sleep := min(until.Sub(c.Now()), b.maxWait-time.Duration(b.clock()-h.stats.lastOK.Load()))
		if sleep <= 0 {
			if _, released := t.leave(b, h, w); released {
				continue // released as it gave up: take the slot
			}
			t.obs.reportPark(ParkEvent{Kind: ParkDropped, Attempt: a, Waited: c.Now().Sub(start), Reason: StopBudgetRefused}, h)
			return lease{}, StopBudgetRefused
		}
		if first {
			sleep = min(sleep, pollInterval)
		}
		if timer == nil {
			fire, timer = c.NewTimer(sleep)
		} else {
			timer.Reset(sleep)
		}
		select {
		case <-w.ch:
		case <-fire:
			h.mu.Lock()
			h.step(b, b.clock(), input{ev: evPoke})
			h.mu.Unlock()
		case <-ctx.Done():
			if l, ok := t.leave(b, h, w); ok {
				l.end(b, outNeutral, 0, 0)
			}
			t.obs.reportPark(ParkEvent{Kind: ParkDropped, Attempt: a, Waited: c.Now().Sub(start), Reason: StopCanceled}, h)
			return lease{}, StopCanceled
		}
	}
}

// leave takes w out of h's queue. If the window released it meanwhile, it
// reports true with the slot it holds.
func (t *Transport) leave(b *RetryBudget, h *hostState, w *waiter) (lease, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.state == waitParked {
		h.step(b, b.clock(), input{ev: evLeave, w: w})
	}
	return lease{host: h, seq: w.seq, held: w.seq != 0}, w.state == waitReleased
}

// waitState is where a parked retry stands.
type waitState uint8

const (
	waitParked   waitState = iota // in the queue
	waitReleased                  // given a slot
	waitFailed                    // its circuit opened
	waitLeft                      // gave up
)

// waiter is one parked retry. Its fields but ch are guarded by its host's
// mu.
type waiter struct {
	ch         chan struct{} // rung, without blocking, when state changes or it becomes first
	state      waitState
	seq        uint64       // the slot's number, once released; 0: released with a token
	owner      *breaker.Set // the circuits of its Transport (evFail)
	prev, next *waiter
}

// ring wakes w up, if it is not awake already.
func (w *waiter) ring() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// waitQueue is a first-in first-out list of parked retries.
type waitQueue struct {
	head, tail *waiter
	n          int
}

func (q *waitQueue) push(w *waiter) {
	w.prev, w.next = q.tail, nil
	if q.tail != nil {
		q.tail.next = w
	} else {
		q.head = w
	}
	q.tail = w
	q.n++
}

func (q *waitQueue) pop() *waiter {
	w := q.head
	q.remove(w)
	return w
}

func (q *waitQueue) remove(w *waiter) {
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

// enqueue parks w on h, unless MaxParked retries are parked there already.
func (b *RetryBudget) enqueue(h *hostState, w *waiter) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.p.queue.n >= b.maxParked {
		return false
	}
	h.step(b, b.clock(), input{ev: evPark, w: w})
	return true
}

// park calls enqueue, which parks a retry of req in budget in, under the
// circuit of req's destination (internal/breaker Set.Park), so that the
// retry fails at once when the circuit opens. Without breakers, it only
// calls enqueue.
func (b *breakers) park(req *http.Request, in *RetryBudget, enqueue func() bool) bool {
	if b == nil {
		return enqueue()
	}
	return b.set.Park(req, budgetParking{in}, enqueue)
}

// owner returns the circuits whose opening fails a parked retry of this
// Transport (evFail): nil without breakers.
func (b *breakers) owner() *breaker.Set {
	if b == nil {
		return nil
	}
	return b.set
}

// budgetParking is a budget as the circuits see it: a place where their
// retries park (breaker.Parking).
type budgetParking struct{ b *RetryBudget }

// Parked reports whether retries are parked on the host of k.
func (p budgetParking) Parked(k hostmap.Key) bool {
	h, ok := p.b.hosts.Get(k)
	return ok && h.waiting.Load() > 0
}

// FailParked fails at once the retries parked on the host of k by
// Transports whose circuits are owner: their circuit opened.
func (p budgetParking) FailParked(k hostmap.Key, owner *breaker.Set) {
	h, ok := p.b.hosts.Get(k)
	if !ok || h.waiting.Load() == 0 {
		return
	}
	h.mu.Lock()
	h.step(p.b, p.b.clock(), input{ev: evFail, owner: owner})
	h.mu.Unlock()
}
