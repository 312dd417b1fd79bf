package budget

import (
	"net/http"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/hostmap"
	"github.com/seed2409de8f/retryhttp/internal/respbody"
)

// Retry is one request's claim on its destination's budget, as Admit
// decides it: the caller fills its exported fields for each attempt it
// wants to send beyond the first (or for the first, to hold it; or for a
// hedge), and keeps the same Retry over the request's retries, which
// carries the request's account: the tokens its retries took, owed back if
// one succeeds (Settle).
//
// Durations are on the caller's clock, from the moment Admit is asked:
// Admit never reads it, so that a caller on a clock of its own (a test's)
// keeps its times.
type Retry struct {
	Req *http.Request  // the attempt's request: its host is the budget's
	Res *http.Response // the response retried, if any

	First  bool // a first attempt: Admit holds it while its host's stated pause runs (Hold), or lets it go
	Hedge  bool // a hedge: a token, or a slot of the window, now, or nothing
	Hold   bool // WithHoldDuringPause: also wait, in the lane, for the host's latest stated pause to run out
	Pause  bool // Res asked for a pause (a 429, Retry-After, a rate-limit reset)
	Paced  bool // Res is a 429 whose quota the caller paces to: it holds the retry until the window the 429 states spent turns
	Reused bool // Res is a success (a policy may retry some): the request's debt is cleared

	Delay    time.Duration // the wait the policy chose, before the retry is sent
	Bound    time.Duration // the latest it may be sent: the caller's deadline less an attempt's timeout (NoBound: none)
	MaxDelay time.Duration // the longest wait the caller allows (WithMaxDelay): the pause lane's bound
	Parked   time.Duration // the request's time parked so far, over all its retries

	Owner any // the circuits of its Transport, opaque: a parked retry fails when one opens (FailParked)
	Clock any // the caller's clock (nil: the real one): a lane waiter on another clock than the budget's is released without a gap

	stage stage
	until time.Duration // the bound of the parking to come, from the end of the wait in progress
	kept  int8          // Res was kept in memory (1) or could not be (-1); 0: not tried yet
	owed  int           // tokens the request's retries took, given back if one succeeds
}

// NoBound is Retry.Bound for a request without a deadline.
const NoBound = time.Duration(1<<63 - 1)

// stage is how far Admit's decision of a retry went: a retry that must
// wait its delay before the decision is complete is asked about again
// after it.
type stage uint8

const (
	decide    stage = iota // nothing decided yet
	takeAfter              // a token was free: take it once the delay is waited
	parkAfter              // none: take one if successes brought it, else park
	laneAfter              // a pause: join the lane once the delay is waited
)

// Action is what the caller does with a retry (Verdict.Do).
type Action uint8

const (
	// Send: wait Verdict.After, then send the retry with Verdict.Lease.
	Send Action = iota + 1
	// Wait: wait Verdict.After (the retry's delay: it is under way), then
	// ask Admit again.
	Wait
	// Park: unless the request's circuit is open, wait Verdict.After, not
	// yet under way, and ask Admit again; or, with no After, park
	// Verdict.Waiter (Waiter.Enqueue) for at most Verdict.Until.
	Park
	// Refuse: the budget refuses the retry.
	Refuse
)

// Verdict is Admit's decision about a retry.
type Verdict struct {
	Do     Action
	After  time.Duration
	Lease  Lease         // Send
	Waiter *Waiter       // Park without After
	Until  time.Duration // Park: the longest it may stay parked
}

// mode is a host's state, as far as a retry without a token is concerned:
// the rows of docs/storms.md's table. A host's pause (lane.go) is a state
// beside it: a host answering 429 to everyone is also in an outage.
type mode uint8

const (
	normal     mode = iota // it answers: a retry without a token is sent, unless the host is short of room (decide, 5b)
	outage                 // its latest outageStreak attempts failed, one succeeded within MaxWait: park
	recovering             // the outage ended within probeQuiet, or its parked retries are being released (the gate is open): park
	dead                   // an outage with no success for MaxWait: refused at once, parked retries give up
)

// failing reports whether h's latest outageStreak attempts failed, or it
// never answered (see newHost).
func (h *host) failing() bool { return h.stats.streak.Load() >= outageStreak }

// seenFailing reports whether outageStreak attempts of h were seen to fail
// in a row: a host that never answered has not been seen failing yet.
func (h *host) seenFailing() bool {
	return h.stats.streak.Load()-h.stats.unseen.Load() >= outageStreak
}

// mode returns h's mode at time at; it takes h.mu to tell a recovery.
func (h *host) mode(at int64) mode {
	failing := h.failing()
	switch alive := at-h.stats.lastOK.Load() <= int64(h.maxWait); {
	case failing && alive:
		return outage
	case failing:
		return dead
	case !alive:
		return normal
	case at-h.stats.outEnd.Load() < int64(probeQuiet):
		// The outage ended less than the gate's span ago: the retries
		// of its failures, whose delays end now, meet an empty bucket
		// and a gate still closed by those failures; they park, and
		// leave when it opens, rather than be refused as the host
		// answers again.
		return recovering
	case h.waiting.Load() == 0:
		return normal
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gate(at) {
		return recovering
	}
	return normal
}

// Admit decides what becomes of the retry r, now. A hedge (Hedge) is sent
// with a token, or with a slot of the window if parking is on, the gate is
// open, the window has room and nothing is parked; or refused. A first
// attempt (First) is let go at once, but held in the lane while its host's
// stated pause runs if it asked for it (Hold). A retry is decided by
// docs/storms.md's table (decide), and, when it must wait its delay before
// the decision is complete, asked about again after it (resume). A nil
// Budget sends everything at once.
func (b *Budget) Admit(r *Retry) Verdict {
	if b == nil {
		return Verdict{Do: Send, After: r.Delay}
	}
	h := b.hosts.GetOrCreate(hostmap.KeyOf(r.Req))
	switch {
	case r.Hedge:
		return b.hedge(h)
	case r.First:
		if !r.Hold || b.noParking || !b.held(h) {
			return Verdict{Do: Send}
		}
		return b.parkIn(h, r, true, min(r.MaxDelay, r.Bound))
	case r.stage != decide:
		return b.resume(h, r)
	}
	r.kept = 0 // a new retry, a new response
	return b.decide(h, r, r.Delay)
}

// decide is docs/storms.md's table, row by row: what becomes of the retry
// r, with wait left of its delay.
func (b *Budget) decide(h *host, r *Retry, wait time.Duration) Verdict {
	at := b.clock()
	m := h.mode(at)
	switch {
	case r.Pause && r.Paced && throttled(r.Res):
		// 1. A 429 of a quota the caller paces to: no token, no lane;
		// its delay (to the turn), then the caller's hold, which lets
		// the window's quota go, no more.
		return Verdict{Do: Send, After: wait}
	case r.Pause && !b.noParking && b.laneInTime(h, r, wait):
		// 1. It asked for a pause: no token; its delay, then the lane.
		return b.pause(h, r, wait)
	case m == dead:
		// 2. No success for MaxWait: refused.
		return Verdict{Do: Refuse}
	case h.seenFailing(), h.parked():
		// 2-3. An outage (a retry sent into it is lost), or retries
		// parked before it (recovering): parked, token or not.
		return b.park(h, r, wait, m)
	case h.hasToken():
		// 4. A token: taken as the retry is sent.
		return b.withToken(h, r, wait)
	case m == normal && !asked(r.Res) && !h.inPause(at) && !h.hurt(at):
		// 5a. None, from a host that answers, asked for no pause and
		// shows no sign that load hurts it: sent without one.
		r.stage = decide
		return Verdict{Do: Send, After: wait}
	default:
		// 5b. None: parked for a token, or the gate.
		return b.park(h, r, wait, m)
	}
}

// resume completes the decision of a retry whose delay has been waited.
func (b *Budget) resume(h *host, r *Retry) Verdict {
	stage := r.stage
	r.stage = decide
	if stage == laneAfter {
		return b.parkIn(h, r, true, r.until)
	}
	if !h.parked() && !h.seenFailing() && h.withdraw() {
		return b.send(h, r, 0) // the token it saw, or one successes brought
	}
	if stage == takeAfter {
		return b.decide(h, r, 0) // its token went meanwhile
	}
	return b.parkIn(h, r, false, r.until)
}

// laneInTime reports whether the pause lane would release r, joining it
// after wait, within its bound (MaxDelay, the caller's Bound).
func (b *Budget) laneInTime(h *host, r *Retry, wait time.Duration) bool {
	return max(wait, b.laneETA(h)) <= min(r.MaxDelay, r.Bound)
}

// pause decides a retry of a response that asked for a pause: it waits
// wait, then joins the lane. A 429 says "later", not "I am sick": its
// retry waits whatever the bucket holds; a server short of room (a 503
// with Retry-After) whose lane's retries failed and spent the bucket gets
// none. A response that cannot be kept over the wait is let go: the retry
// is sent after it.
func (b *Budget) pause(h *host, r *Retry, wait time.Duration) Verdict {
	switch {
	case !h.hasToken() && !throttled(r.Res):
		return Verdict{Do: Refuse}
	case !keep(r):
		return Verdict{Do: Send, After: wait}
	}
	r.stage, r.until = laneAfter, min(r.MaxDelay, r.Bound)-wait
	return Verdict{Do: Wait, After: wait}
}

// withToken decides a retry that sees a token: taken when it is sent,
// after its delay, so that the bucket bounds the retries sent, not those
// that wait; at once for a retry without a delay, with a delay longer than
// MaxWait, of a response that asked the client to back off, or of one
// that cannot be kept over the delay.
func (b *Budget) withToken(h *host, r *Retry, wait time.Duration) Verdict {
	if wait == 0 || wait > b.maxWait || asked(r.Res) || !keep(r) {
		if h.withdraw() {
			return b.send(h, r, wait)
		}
		return b.decide(h, r, wait) // taken meanwhile
	}
	r.stage = takeAfter
	return Verdict{Do: Wait, After: wait}
}

// park parks a retry that has wait left of its delay: after it, for
// MaxWait per request in all, within the caller's Bound. Where it cannot
// (parking off, no time left, a response that cannot be kept), a token
// sends it, if there is one and the host is not dead; else it is refused.
func (b *Budget) park(h *host, r *Retry, wait time.Duration, m mode) Verdict {
	until := min(wait+b.maxWait-r.Parked, r.Bound)
	if b.noParking || until <= wait || !keep(r) {
		if m != dead && h.withdraw() {
			return b.send(h, r, wait)
		}
		return Verdict{Do: Refuse}
	}
	r.stage, r.until = parkAfter, until-wait
	if wait > 0 {
		return Verdict{Do: Park, After: wait}
	}
	return b.resume(h, r) // successes may have refilled the bucket
}

// send returns the verdict of a retry that took a token of h: sent after
// wait, with the request's debt. A token is not owed back when the
// response retried asked the client to back off: a server that says so is
// short of room, and retrying it is not free whatever it answers next.
func (b *Budget) send(h *host, r *Retry, wait time.Duration) Verdict {
	r.stage = decide
	return Verdict{Do: Send, After: wait, Lease: Lease{b: b, host: h, owed: r.owe()}}
}

// owe records that a retry of r took a token, and returns the tokens the
// request owes.
func (r *Retry) owe() int {
	if r.Reused {
		r.owed = 0
	}
	if !asked(r.Res) {
		r.owed++
	}
	return r.owed
}

// parkIn returns the verdict of a retry of r that parks on h, in the
// pause lane (lane) or in the outage's queue, for at most until.
func (b *Budget) parkIn(h *host, r *Retry, lane bool, until time.Duration) Verdict {
	r.stage = decide
	w := &Waiter{ch: make(chan struct{}, 1), b: b, h: h, r: r, owner: r.Owner}
	if lane {
		w.lane = true
		w.timeless = r.Clock != any(b.clk) && (r.Clock != nil || b.clk != nil)
		w.hold = (r.Hold || r.First) && !w.timeless
	}
	return Verdict{Do: Park, Waiter: w, Until: until}
}

// hedge claims a hedge on h without waiting: a token, or else a slot of
// the window if parking is on, the gate is open, the window has room and
// nothing is parked.
func (b *Budget) hedge(h *host) Verdict {
	if h.withdraw() {
		return Verdict{Do: Send, Lease: Lease{b: b, host: h}}
	}
	if b.noParking {
		return Verdict{Do: Refuse}
	}
	h.mu.Lock()
	granted, seq := h.step(b.clock(), input{ev: evTake})
	h.mu.Unlock()
	if !granted {
		return Verdict{Do: Refuse}
	}
	return Verdict{Do: Send, Lease: Lease{b: b, host: h, seq: seq, held: true}}
}

// keep holds r's response over a wait, if it can, and reports whether it
// did: its body is read into memory (respbody.Keep), so that the response
// can be returned after the wait without holding a connection. A retry
// whose response could not be kept is never refused after its wait: the
// response was let go. Admit tries only when the retry may wait for more
// than its delay, and once per retry.
func keep(r *Retry) bool {
	if r.kept == 0 {
		r.kept = -1
		if respbody.Keep(r.Res) {
			r.kept = 1
		}
	}
	return r.kept > 0
}

// throttled reports whether res is a 429: the server limits the client's
// rate, it is not short of room.
func throttled(res *http.Response) bool {
	return res != nil && res.StatusCode == http.StatusTooManyRequests
}

// asked reports whether res asked the client to back off: a 429, or a
// Retry-After. A server that says so is short of room: retrying it is not
// free whatever it answers next.
func asked(res *http.Response) bool {
	return res != nil && (res.StatusCode == http.StatusTooManyRequests || res.Header.Get("Retry-After") != "")
}
