// Package budget is a retry budget (retryhttp.RetryBudget, whose doc has
// the model), and the rule of docs/storms.md's table: Admit decides each
// retry (send now, wait then send, park, refuse) from its response (a
// pause asked, a request to back off), its host's mode (normal, outage,
// recovering, dead: admit.go), whether load hurts the host (pacer.go's
// hurt), its pause (lane.go) and its bucket; Settle records each
// attempt's outcome. Per destination host, it keeps a bucket of tokens,
// the host's recent outcomes (hostStats), the window of parked retries
// with their queue (pacer), and the pause lane. The window, the queue and
// the lane change in one transition function (host.step), under the
// host's lock; the bucket and the statistics with atomic operations. Time
// is lazy (no goroutines, no timers) and read from the Clock given to New.
//
// The caller's side of a wait (its timer, its reports, its stop reasons)
// stays in package retryhttp: a parked retry waits through its Waiter.
package budget

import (
	"math"
	"net/http"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/hostmap"
)

// Clock gives the time. A nil Clock is the real one.
type Clock interface {
	Now() time.Time
}

// Config configures New. Every field must be valid (positive); package
// retryhttp resolves RetryBudgetOptions' defaults.
type Config struct {
	Ratio     float64 // tokens a success deposits, in (0, Capacity]
	Capacity  int     // tokens per host, at most MaxCapacity
	MaxHosts  int
	NoParking bool
	MaxWait   time.Duration
	MaxParked int
}

// MaxCapacity bounds Config.Capacity so that micro-tokens never overflow.
const MaxCapacity = 1 << 30

// tokenScale is the number of micro-tokens in a token: buckets count in
// fixed point so that they can be updated with one atomic operation.
const tokenScale = 1_000_000

// Budget is the state of every host of one retry budget. It is safe for
// concurrent use; a nil *Budget allows everything and records nothing.
type Budget struct {
	ratio    int64 // micro-tokens deposited per success, in [1, capacity]
	capacity int64 // micro-tokens
	hosts    *hostmap.Map[*host]

	noParking bool
	maxWait   time.Duration
	maxParked int

	origin time.Time // the zero of the hosts' clocks
	clk    Clock     // nil: the real clock
}

// New returns a budget configured by cfg, on clk (nil: the real clock).
func New(cfg Config, clk Clock) *Budget {
	capacity := min(cfg.Capacity, MaxCapacity)
	b := &Budget{capacity: int64(capacity) * tokenScale, noParking: cfg.NoParking,
		maxWait: cfg.MaxWait, maxParked: cfg.MaxParked, clk: clk}
	b.origin = b.wall()
	// A tiny ratio still deposits something; a huge one refills at once.
	b.ratio = int64(math.Round(min(cfg.Ratio, float64(capacity)) * tokenScale))
	b.ratio = min(max(b.ratio, 1), b.capacity)
	full := b.capacity
	b.hosts = hostmap.New(cfg.MaxHosts, func(hostmap.Key) *host {
		return newHost(full, b.maxWait, b.clock())
	})
	return b
}

// wall returns the time of b's clock.
func (b *Budget) wall() time.Time {
	if b.clk == nil {
		return time.Now()
	}
	return b.clk.Now()
}

// clock returns the time on b's clock, in nanoseconds since b was made:
// monotonic, and cheap to store in an atomic. On the real clock it reads
// the monotonic clock alone (time.Since), cheaper than time.Now.
func (b *Budget) clock() int64 {
	if b.clk == nil {
		return int64(time.Since(b.origin))
	}
	return int64(b.clk.Now().Sub(b.origin))
}

// Now is the time on b's clock as Outcome.At counts it, and whether that
// is the real clock.
func (b *Budget) Now() (at int64, real bool) { return b.clock(), b.clk == nil }

// Outcome is what Settle needs to know of an attempt besides whether it
// succeeded.
type Outcome struct {
	First   bool          // the request's first attempt
	Latency time.Duration // from sending to the response or error
	Timeout time.Duration // the attempt's timeout, if any
	Refund  bool          // a retry after a connection lost before any response
	Neutral bool          // cancelled: says nothing about the host
	At      int64         // when it ended, on b's clock (Now), if AtKnown
	AtKnown bool          // else Settle reads the clock
	Pause   bool          // its response asked for a pause (a 429, Retry-After, a rate-limit reset)
	Stated  time.Duration // the pause it stated, if any
	Limit   bool          // the pause is a 429's: the server limits the client's rate
}

// Settle records the outcome of an attempt that sent req: ok if it
// succeeded (retryhttp's success), answered if it brought a response. A
// success credits the host's bucket, and gives back the token of a retry
// after a lost connection (which says nothing about the server's load; a
// server that keeps breaking connections gets nothing back). A first
// attempt's outcome feeds the host's recent statistics, for the pacing of
// parked retries; an attempt that held a slot of the host's window (l not
// nil and held) gives it back and moves the window. A failure makes the
// host's state if it has none; a success does only while the budget tracks
// fewer than MaxHosts hosts (a host without a state has a full bucket and
// nothing parked). Without a slot, Settle takes no lock, and once the host
// has a state it does not allocate.
func (b *Budget) Settle(req *http.Request, ok, answered bool, o *Outcome, l *Lease) {
	if b == nil {
		return
	}
	var h *host
	switch {
	case l != nil && l.host != nil:
		h = l.host
	case !ok:
		h = b.hosts.GetOrCreate(hostmap.KeyOf(req))
	default:
		var found bool
		if h, found = b.hosts.LastOf(req.URL); found {
			break // the host of the previous lookup, found without its key
		}
		if h, found = b.hosts.GetIfRoom(hostmap.KeyOf(req)); !found {
			return // a host of many, with a full bucket: nothing to record
		}
	}
	at := o.At
	if !o.AtKnown {
		at = b.clock()
	}
	if o.Pause {
		h.paused(at, o.Stated, o.Limit) // lane.go
	}
	if l != nil && l.lane && l.held {
		h.laneAnswered(at, l, ok, o.Neutral || !answered && req.Context().Err() != nil, o.Pause)
	}
	switch {
	case !ok && o.First && answered && h.stats.streak.Load() < outageStreak:
		// A failure the host answered, outside an outage: retries are a
		// share of the requests it answers, not only of its successes.
		h.deposit(b.ratio)
	case ok:
		h.deposit(b.ratio)
		if o.Refund {
			h.deposit(tokenScale)
		}
		if l != nil && l.owed > 0 && !h.queued(at, o.Latency, o.Timeout) {
			// The request's retries paid: their tokens go back.
			h.deposit(int64(l.owed) * tokenScale)
			l.owed = 0
		}
	}
	if o.Neutral || !answered && req.Context().Err() != nil {
		l.End(SlotNeutral, 0, 0) // cancelled: says nothing of the host
		return
	}
	if !ok && o.Timeout > 0 && o.Latency >= o.Timeout/2 {
		h.stats.slowAt.Store(at) // a failure that took most of its time: the host may be full
	}
	h.stats.record(at, ok, o.First, o.Latency)
	switch {
	case l != nil && l.held:
		l.End(outcomeOf(ok), o.Latency, o.Timeout)
	case ok && h.waiting.Load() > 0:
		// A success may open the gate for the parked retries.
		h.mu.Lock()
		h.step(at, input{ev: evPoke})
		h.mu.Unlock()
	}
}

// laneAnswered records the answer to a retry the pause lane released
// with l (lane.go laneSettle): ok if it succeeded, neutral if cancelled
// (it says nothing of the host), pause if the host asked for a pause
// again. The lane's retries that slow its pace spend a token.
func (h *host) laneAnswered(at int64, l *Lease, ok, neutral, pause bool) {
	l.held = false
	out := outcomeOf(ok)
	if neutral {
		out = SlotNeutral
	}
	h.mu.Lock()
	slowed := h.laneSettle(at, l.seq, out, pause, l.hold)
	h.step(at, input{ev: evPoke})
	h.mu.Unlock()
	if slowed {
		h.withdraw() // the lane's retries that fail spend the bucket
	}
}

// withdraw takes one token if there is one.
func (h *host) withdraw() bool {
	for {
		v := h.tokens.Load()
		if v < tokenScale {
			return false
		}
		if h.tokens.CompareAndSwap(v, v-tokenScale) {
			return true
		}
	}
}

// deposit adds n micro-tokens, up to the capacity. A full bucket, the usual
// state of a healthy host, is only read, so that goroutines depositing to
// the same host do not fight over its cache line.
func (h *host) deposit(n int64) {
	for {
		v := h.tokens.Load()
		if v >= h.capacity {
			return
		}
		if h.tokens.CompareAndSwap(v, min(v+n, h.capacity)) {
			return
		}
	}
}

// HostState is a host's state as Each reports it.
type HostState struct {
	Tokens                   float64
	Capacity                 int
	Window, InFlight, Parked int
}

// Each calls fn with every host b tracks and its state, until fn returns
// false. It takes no lock: each value is read with one atomic load.
func (b *Budget) Each(fn func(hostmap.Key, HostState) bool) {
	if b == nil {
		return
	}
	b.hosts.Each(func(k hostmap.Key, h *host) bool {
		return fn(k, HostState{
			Tokens:   float64(h.tokens.Load()) / tokenScale,
			Capacity: int(h.capacity / tokenScale),
			Window:   int(h.window.Load()),
			InFlight: int(h.inFlight.Load()),
			Parked:   int(h.waiting.Load()),
		})
	})
}

// hasToken reports whether h has a token now, without taking it: a retry
// that sees one waits its delay and then withdraws it (withdraw), when it
// is sent.
func (h *host) hasToken() bool { return h.tokens.Load() >= tokenScale }
