package retryhttp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
)

// WithHedging turns hedging on: when a request guessed idempotent has had no
// response for delay, the transport sends another attempt in parallel,
// without cancelling the first, and the first final answer wins. Hedging is
// off by default; a delay or a maxHedges of zero or less turns it off.
//
// In short (docs/hedging.md has the rules in full):
//   - only requests guessed idempotent are hedged (GET, HEAD, OPTIONS, TRACE,
//     PUT, DELETE, or the methods of a CustomizedShouldRetryFn that replaces
//     that list; or a caller's Idempotency-Key or X-Idempotency-Key, or an
//     injected key when IdempotencyKeys.Honored says keys are honoured),
//     and only if their body can be replayed; the others take the usual
//     retry path;
//   - the first attempt runs on the caller's goroutine; a goroutine starts
//     only when the delay passes;
//   - at most 1+maxHedges attempts are in flight at once, and at most
//     1+maxRetries are sent in all: hedges and retries share the retry
//     limit, and a request with retries off (WithMaxRetries(0)) is not
//     hedged;
//   - an attempt that the ShouldRetryFn wants retried launches the next one
//     at once, while the limit allows: no backoff, no Retry-After;
//   - the first outcome the ShouldRetryFn does not want retried is returned;
//     every other attempt is cancelled and its response closed. If every
//     attempt fails, the last outcome is returned as the retry loop returns
//     it.
//
// Every attempt after the first counts against the retry budget: it spends
// a token, or, without one, takes a slot of the host's window if one is
// free at once (it never parks), and gives the slot back with its outcome
// as a parked retry does. As in the retry loop, an attempt that replaces
// one that lost its connection gets its token back if it succeeds.
func WithHedging(delay time.Duration, maxHedges int) Option {
	return option(withHedging(delay, maxHedges))
}

func withHedging(delay time.Duration, maxHedges int) patch {
	return func(s *settings) { s.hedgeDelay, s.hedgeQuantile, s.maxHedges = delay, 0, maxHedges }
}

// hedges reports whether a request of idempotency idem and body body is
// hedged: hedging is on, the request may be sent more than once, and it is
// guessed idempotent (idempotency.go).
func (s *settings) hedges(idem idempotency, body *replay) bool {
	if !s.hedgingOn() || s.maxRetries == 0 || !body.replayable() {
		return false
	}
	return idem.guessed
}

// hedgingOn reports whether s hedges at all: with a fixed delay or an
// adaptive one, and at least one hedge.
func (s *settings) hedgingOn() bool {
	return s.maxHedges > 0 && (s.hedgeDelay > 0 || s.hedgeQuantile != 0)
}

// allow reports whether one more attempt of the hedged request may be sent,
// and with what claim on the budget: a hedge, or a retry after a failed
// attempt. Each one spends a token of the destination's retry budget, or
// takes a free slot of its window, without waiting (RetryBudget.takeNow).
func (h *hedge) allow() (lease, bool) {
	return h.s.budget.takeNow(h.body.req)
}

// outcome is the result of one attempt of a hedged request.
type outcome struct {
	n    int           // the attempt's number, 1 for the first
	req  *http.Request // as sent, with the caller's context
	res  *http.Response
	err  error
	took time.Duration // attempt 1's latency, with adaptive hedging
}

// hedge is the state of one hedged request. Attempt 1 runs on the caller's
// goroutine; until it has an outcome, no other goroutine exists unless the
// hedge delay passes first. Then the timer's goroutine (fire) coordinates
// the attempts: the caller's hands it attempt 1's outcome and waits for the
// final one. Otherwise the caller's goroutine coordinates what follows
// attempt 1. One goroutine at a time touches the hedge, then, once it has
// chosen the outcome, collect; attempts report through results.
type hedge struct {
	t      *Transport
	s      settings // copies, so that RoundTrip's own stay on its stack
	body   replay
	idem   idempotency     // the request's, computed once (idempotency.go)
	ctx    context.Context // the caller's
	caller *http.Request   // as passed to RoundTrip

	results  chan outcome         // every attempt after the first sends exactly one, and attempt 1 once fire runs
	wg       sync.WaitGroup       // one per attempt goroutine
	cancels  []context.CancelFunc // cancels[n-1] ends attempt n; len is the attempts sent
	inFlight int
	refused  bool      // the budget refused an attempt: no more are sent
	began    time.Time // attempt 1's start, with adaptive hedging (hedgedelay.go)
	seen1    bool      // attempt 1's outcome has been judged
	why      StopReason

	timer Timer         // runs fire after the hedge delay; made once per hedge value and clock
	clk   Clock         // the timer's
	done  chan hedgeEnd // fire's final outcome, for the caller's goroutine
}

// errAttemptPanicked is the outcome of attempt 1 when the base transport
// panicked: the panic then goes on up to the caller of RoundTrip.
var errAttemptPanicked = errors.New("retryhttp: the base transport panicked")

// hedgeEnd is how a hedged request ended, as RoundTrip returns it.
type hedgeEnd struct {
	res *http.Response
	end ending
	err error
}

// hedges are recycled when attempt 1 wins before the hedge delay, the usual
// case: nothing else refers to them then.
var hedges = sync.Pool{New: func() any {
	return &hedge{results: make(chan outcome), done: make(chan hedgeEnd, 1)}
}}

// roundTripHedged sends req's attempts in parallel as WithHedging describes,
// with hedge delay d (hedgedelay.go hedging).
func (t *Transport) roundTripHedged(ctx context.Context, caller *http.Request, s settings, d time.Duration, body replay, idem idempotency) (*http.Response, ending, error) {
	s.hedgeDelay = d
	h := hedges.Get().(*hedge)
	h.t, h.s, h.body, h.idem, h.ctx, h.caller = t, s, body, idem, ctx, caller

	// 1. Attempt 1, on this goroutine, with the hedge timer running; held
	// first while its advertised quota is spent (quota.go).
	var q quotaSend
	q.on = s.quotaPacing
	if q.on && (s.quotaScope != nil || !processQuotas.Idle() || processContacts.Cold(caller.URL)) {
		if err := t.quotaHold(ctx, &s, caller, 1, &q); err != nil {
			q.heard()
			h.recycle()
			return nil, quotaEnding(err, 0), err
		}
	}
	sent, err := t.attemptRequest(&h.body, 1)
	if err != nil {
		t.quotaDone(caller, &q, nil)
		q.heard()
		h.recycle()
		return nil, ending{StopError, 0}, err
	}
	actx, cancel := context.WithCancel(ctx)
	h.cancels = append(h.cancels, cancel)
	h.inFlight = 1
	h.began = t.firstStart(&s, 1) // before the timer: fire reads it
	if c := t.clock(); h.timer == nil || h.clk != c {
		h.timer, h.clk = c.AfterFunc(s.hedgeDelay, h.fire), c
	} else {
		h.timer.Reset(s.hedgeDelay)
	}
	req := sent.WithContext(actx)
	sending := true
	defer func() {
		// A base transport that panicked after the hedge delay passed:
		// let fire end the other attempts before the panic goes on up.
		if sending && !h.timer.Stop() {
			h.results <- outcome{n: 1, req: sent, err: errAttemptPanicked}
			<-h.done
		}
	}()
	res, err := t.sendSettled(req, &s, &attemptOutcome{First: true}, nil)
	t.quotaDone(sent, &q, res)
	q.heard()
	sending = false
	o := outcome{n: 1, req: sent, res: res, err: err}
	if !h.began.IsZero() {
		o.took = t.clock().Now().Sub(h.began)
	}

	// 2. The hedge delay passed first: fire coordinates the attempts.
	if !h.timer.Stop() {
		h.results <- o
		e := <-h.done
		return e.res, e.end, e.err
	}

	// 3. Attempt 1 came first: final, or replaced at once by attempt 2.
	h.inFlight--
	if h.replaceOrEnd(&o) {
		res, err := h.win(o)
		e := ending{h.why, len(h.cancels)}
		if len(h.cancels) == 1 {
			h.recycle() // no other attempt: nothing refers to h
		}
		return res, e, err
	}
	return h.loop(true)
}

// fire runs on a goroutine of its own when the hedge delay passes before
// attempt 1 has an outcome: it sends a hedge, coordinates the attempts
// until one is final, and hands that outcome to RoundTrip's goroutine.
func (h *hedge) fire() {
	launched, err := h.hedge()
	if err != nil {
		h.done <- hedgeEnd{nil, ending{StopError, len(h.cancels)}, h.abort(err)}
		return
	}
	res, end, err := h.loop(launched)
	h.done <- hedgeEnd{res, end, err}
}

// loop coordinates the attempts in flight until one is final: it sends
// hedges when the hedge delay passes (armed: the delay runs from now),
// replaces failures, and ends the attempts on the caller's cancellation.
func (h *hedge) loop(armed bool) (*http.Response, ending, error) {
	fire, timer := h.t.clock().NewTimer(h.s.hedgeDelay)
	defer timer.Stop()
	if !armed {
		timer.Stop()
	}
	for {
		sent := len(h.cancels)
		select {
		case <-h.ctx.Done():
			// 1. The caller gave up: end every attempt.
			return nil, ending{StopCanceled, len(h.cancels)}, h.abort(h.ctx.Err())
		case <-fire:
			// 2. No answer within the hedge delay: one more in parallel.
			if _, err := h.hedge(); err != nil {
				return nil, ending{StopError, len(h.cancels)}, h.abort(err)
			}
		case o := <-h.results:
			// 3. An answer: final, or a failure replaced at once.
			h.inFlight--
			if h.replaceOrEnd(&o) {
				res, err := h.win(o)
				return res, ending{h.why, len(h.cancels)}, err
			}
		}
		// 4. The hedge delay runs from the latest attempt.
		if len(h.cancels) > sent {
			timer.Reset(h.s.hedgeDelay)
		}
	}
}

// hedge sends one more attempt in parallel, if fewer than 1+maxHedges are
// in flight and the limit and the budget allow it, and reports whether it
// did.
func (h *hedge) hedge() (bool, error) {
	inFlight := h.inFlight
	if inFlight > min(h.s.maxHedges, h.s.maxRetries) {
		return false, nil
	}
	// With adaptive hedging the delay is the destination's latency: a
	// hedge sent with less time left could not come back in time.
	if h.s.hedgeQuantile > 0 && h.t.pastDeadline(h.ctx, h.s.hedgeDelay) {
		return false, nil
	}
	launched, err := h.next(false)
	if launched {
		// As documented for Decision: the attempts in flight and the
		// caller's request.
		h.t.obs.reportRetry(Attempt{Count: inFlight, Req: h.caller}, h.s.maxRetries, h.s.hedgeDelay, true)
	}
	return launched, err
}

// recycle puts h back in the pool, when nothing else refers to it: its
// timer stopped before it fired, and no attempt goroutine was started.
func (h *hedge) recycle() {
	clear(h.cancels)
	*h = hedge{cancels: h.cancels[:0], results: h.results, done: h.done, timer: h.timer, clk: h.clk}
	hedges.Put(h)
}

// replaceOrEnd decides what one attempt's outcome means, and acts on it. It
// reports whether o ends the request, changed as RoundTrip must return it;
// otherwise o has been replaced by a new attempt if the limit and the budget
// allowed it, and let go of.
func (h *hedge) replaceOrEnd(o *outcome) bool {
	a := h.attempt(o)
	h.t.obs.reportAttempt(&a, h.s.maxRetries, true)
	if o.n == 1 {
		h.seen1 = true
		h.firstLatency(o)
	}
	// 1. Judge the outcome (judge.go), as the retry loop does; a hedged
	// request's body is replayable (hedges), and the limit counts every
	// attempt sent, those still in flight included.
	why := h.s.judge(&a, &h.body, len(h.cancels))
	if why != 0 && why != StopRetriesExhausted {
		h.why = why
		return true
	}
	// 2. Worth another attempt: launch it at once, if the limit and the
	// budget allow it. As in the retry loop, a retry after a lost
	// connection gets its token back if it succeeds (budget.go settle).
	launched := false
	if why == 0 {
		var err error
		if launched, err = h.next(o.res == nil && isConnLost(o.err)); err != nil {
			discard(o.res)
			o.res, o.err = nil, err
			h.why = StopError
			return true
		}
	}
	if launched {
		h.t.obs.reportRetry(a, h.s.maxRetries, 0, false)
	}
	// 3. Another attempt runs: let this one go.
	if launched || h.inFlight > 0 {
		discard(o.res)
		h.cancels[o.n-1]()
		return false
	}
	// 4. Nothing left to wait for: the last outcome, as the retry loop
	// returns it, marked with why the transport gave up.
	h.why = StopRetriesExhausted
	if h.refused {
		h.why = StopBudgetRefused
	}
	o.err = markGiveUp(h.why, len(h.cancels), o.err)
	return true
}

// attempt is the Attempt of outcome o.
func (h *hedge) attempt(o *outcome) Attempt {
	return h.t.newAttempt(&h.s, h.idem, o.n, o.req, o.res, o.err)
}

// more reports whether the retry limit and the budget may still allow an
// attempt.
func (h *hedge) more() bool {
	return !h.refused && len(h.cancels) <= h.s.maxRetries
}

// next launches one more attempt if the limit and the budget allow it, and
// reports whether it did; refund says it retries a lost connection.
func (h *hedge) next(refund bool) (bool, error) {
	if !h.more() {
		return false, nil
	}
	l, ok := h.allow()
	if !ok {
		h.refused = true
		return false, nil
	}
	return h.launch(l, refund)
}

// launch sends the next attempt, holding l, in a goroutine of its own, with
// a body of its own and a context of its own, derived from the caller's,
// and reports whether it did: not when the request's advertised quota has
// no room for it at once (quota.go quotaTry).
func (h *hedge) launch(l lease, refund bool) (bool, error) {
	var q quotaSend
	if !h.t.quotaTry(&h.s, h.caller, &q) {
		l.End(outNeutral, 0, 0)
		return false, nil
	}
	n := len(h.cancels) + 1
	sent, err := h.t.attemptRequest(&h.body, n)
	if err != nil {
		l.End(outNeutral, 0, 0)
		h.t.quotaDone(h.caller, &q, nil)
		return true, err
	}
	ctx, cancel := context.WithCancel(h.ctx)
	h.cancels = append(h.cancels, cancel)
	h.inFlight++
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		req := sent.WithContext(ctx)
		res, err := h.t.sendSettled(req, &h.s, &attemptOutcome{Refund: refund}, &l)
		h.t.quotaDone(sent, &q, res)
		h.results <- outcome{n: n, req: sent, res: res, err: err}
	}()
	return true, nil
}

// win returns o to the caller and cancels every other attempt. The attempts'
// goroutines are waited for, and the responses they still bring closed,
// before win returns, or, when o has a body, before that body's Close
// returns: o's attempt stays alive until then, so the body can be read.
func (h *hedge) win(o outcome) (*http.Response, error) {
	if !h.seen1 && !h.began.IsZero() {
		// Beaten by a hedge: attempt 1 took longer than this, at least.
		h.t.tailSince(h.caller, h.began)
	}
	for i, cancel := range h.cancels {
		if i != o.n-1 {
			cancel()
		}
	}
	own := h.cancels[o.n-1]
	if o.err != nil || o.res.Body == nil || o.res.Body == http.NoBody {
		own()
		h.collect()
		return o.res, o.err
	}
	if len(h.cancels) == 1 {
		// Attempt 1 alone, on the caller's goroutine: nothing to wait for.
		o.res.Body = newHedgeBody(o.res.Body, own)
		return o.res, nil
	}
	done := make(chan struct{})
	go func() {
		h.collect()
		close(done)
	}()
	o.res.Body = newHedgeBody(o.res.Body, func() {
		own()
		<-done
	})
	return o.res, nil
}

// abort cancels every attempt, waits for them and returns err.
func (h *hedge) abort(err error) error {
	for _, cancel := range h.cancels {
		cancel()
	}
	h.collect()
	return err
}

// collect waits for the outcomes of the attempts still in flight, closing
// their responses (they have all been cancelled: nothing is worth draining),
// and for the attempts' goroutines to end.
func (h *hedge) collect() {
	for ; h.inFlight > 0; h.inFlight-- {
		o := <-h.results
		a := h.attempt(&o)
		h.t.obs.reportAttempt(&a, h.s.maxRetries, true)
		if o.res != nil && o.res.Body != nil {
			o.res.Body.Close()
		}
	}
	h.wg.Wait()
}

// newHedgeBody wraps the winner's body so that closing it also runs release
// (once). A body that is also an io.Writer (that of a 101 Switching
// Protocols response) stays one.
func newHedgeBody(body io.ReadCloser, release func()) io.ReadCloser {
	b := &hedgeBody{ReadCloser: body, release: release}
	if rwc, ok := body.(io.ReadWriteCloser); ok {
		return &hedgeRWCBody{b, rwc}
	}
	return b
}

// hedgeBody is the body of a hedged request's winning response.
type hedgeBody struct {
	io.ReadCloser
	release func() // cancels the winner's attempt, waits for the others
	once    sync.Once
}

func (b *hedgeBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}

// hedgeRWCBody is a hedgeBody that can also be written to.
type hedgeRWCBody struct {
	*hedgeBody
	rwc io.ReadWriteCloser
}

func (b *hedgeRWCBody) Write(p []byte) (int, error) { return b.rwc.Write(p) }
