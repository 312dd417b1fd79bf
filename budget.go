package retryhttp

import (
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/hostmap"
)

// Defaults of RetryBudgetOptions.
const (
	// DefaultRetryBudgetRatio is the number of tokens a successful attempt
	// deposits: one retry for every ten successes.
	DefaultRetryBudgetRatio = 0.1

	// DefaultRetryBudgetCapacity is the size of each host's bucket, and the
	// number of tokens it starts with: ten retries sent at once, before any
	// success, on top of the parked retries the host's window releases.
	DefaultRetryBudgetCapacity = 10

	// DefaultRetryBudgetMaxHosts bounds the number of hosts a budget tracks.
	DefaultRetryBudgetMaxHosts = 1024

	// DefaultMaxParkedWait bounds the time one request spends parked, in
	// all: a blip shorter than this is ridden out.
	DefaultMaxParkedWait = 2 * time.Second

	// DefaultMaxParked bounds the retries parked on one host at once.
	DefaultMaxParked = 10_000
)

// RetryBudgetOptions configures NewRetryBudget. The zero value of each field
// means its default; so does an invalid value (negative, NaN or infinite).
// docs/storms.md has the algorithm and its bounds.
type RetryBudgetOptions struct {
	// Ratio is the number of tokens that a successful attempt deposits in
	// its host's bucket; each retry sent at once withdraws one. The default
	// is DefaultRetryBudgetRatio, 0.1: in the long run, retries sent at once
	// are at most a tenth of the successes, plus Capacity.
	Ratio float64

	// Capacity is the size of each host's bucket and the number of tokens
	// it starts with: the number of retries sent at once in a row before
	// any success. The default is DefaultRetryBudgetCapacity, 10. Values
	// above 2^30 are treated as 2^30.
	Capacity int

	// MaxHosts bounds the number of hosts whose state is kept (to within
	// one per shard of the map, at most 31 more, and not counting hosts
	// with retries parked or in flight, which are never forgotten). Past
	// it, a new host evicts another (one whose bucket is full if one is
	// found quickly, else an arbitrary one without parked retries), which
	// starts again with a full bucket when it next fails. The default is
	// DefaultRetryBudgetMaxHosts, 1024.
	MaxHosts int

	// NoParking turns parking off: a retry without a token is dropped at
	// once, as the budget did before parking existed. By default (false)
	// it is parked, as RetryBudget describes.
	NoParking bool

	// MaxWait bounds the time one request spends parked, over all its
	// retries; and a host that has had no successful attempt for that long
	// (the first sight of a host counts as one) refuses parking at once.
	// The default is DefaultMaxParkedWait, 2s.
	MaxWait time.Duration

	// MaxParked bounds the retries parked on one host at once; past it, a
	// retry without a token is dropped at once. The default is
	// DefaultMaxParked, 10,000.
	MaxParked int
}

// RetryBudget decides which retries are sent to each destination host, so
// that a failing backend sees about as many requests as its callers make,
// not four times as many, while the retries that succeed are let through.
// Its rule: limit the retries that fail, not the retries that succeed.
//
// It keeps a state per host (scheme, host name and port) with two parts:
//
//   - A token bucket: it starts full with Capacity tokens; a retry is sent
//     at once (after its delay) if it can withdraw one token; a successful
//     attempt deposits Ratio tokens, up to Capacity. When a request's retry
//     succeeds without queueing at the host (a latency within 4× the
//     host's lowest, or 20ms more, or half the attempt timeout), the
//     tokens its retries took go back to the bucket, unless
//     the failures they retried asked the client to back off (429 or
//     Retry-After). So retries that pay are free, and only the retries of
//     requests that fail in the end, or of a host short of room, spend the
//     bucket.
//   - Parking, for a retry that finds no token while the host is in an
//     outage (its latest 10 attempts failed, or none succeeded since the
//     budget first saw it): it waits, inside the caller's RoundTrip, first
//     for its own delay, then in a first-come first-served queue, until the
//     host answers again. Parked retries are then released at most at 1.5
//     per first attempt the host receives (one at a time when none is in
//     flight, whatever the rate), with a slot of a window (the
//     parked retries in flight: it starts at 4, grows by one per successful
//     retry up to a threshold, then by one per round, is halved when a
//     retry fails or queued, at most once per round, and is capped at
//     max(10, 2 × the host's rate of first attempts × its lowest latency))
//     or with a token; none while 20% or more of the host's recent first
//     attempts fail. A parked retry gives up, ending as a refused one does,
//     at the caller's deadline less one attempt timeout, after MaxWait in
//     all, when the host has had no success for MaxWait, or when MaxParked
//     retries are already waiting. Outside an outage, a retry without a
//     token is refused at once: it would wait for nothing.
//
// An attempt is successful when it brings a response with a status below
// 500 other than 429, and, for a 4xx status, without a Retry-After header: a
// response that tells the client the server is answering and not asking to
// be left alone. Errors and other responses deposit nothing.
//
// So a dead backend gets Capacity retries and then none (its parked retries
// wait for a success that does not come); a host failing a share of its
// requests at random gets the retries that succeed, as without a budget,
// and its failed ones at about Ratio per success; a blip shorter than
// MaxWait gets its retries after it, at the pace of the host's own traffic.
// The price is waiting, in an outage only: a failed request waits up to
// MaxWait before it fails, instead of failing at once. docs/storms.md gives
// the arithmetic.
//
// Transports without WithRetryBudget share one budget with the defaults,
// for the whole process, as http.DefaultTransport shares connections: a
// Transport made per call is then as storm-safe as one shared. A
// RetryBudget can be shared by several Transports that call the same
// backends (WithRetryBudget). It is safe for concurrent use; a successful
// attempt takes no lock and allocates nothing.
type RetryBudget struct {
	ratio    int64 // micro-tokens deposited per success, in [1, capacity]
	capacity int64 // micro-tokens
	hosts    *hostmap.Map[*hostState]

	noParking bool
	maxWait   time.Duration
	maxParked int

	origin time.Time        // the zero of the hosts' clocks
	now    func() time.Time // time.Now, but for tests
	real   bool             // now is time.Now: a reading of the real clock may stand in for it
}

// tokenScale is the number of micro-tokens in a token: buckets count in
// fixed point so that they can be updated with one atomic operation.
const tokenScale = 1_000_000

// maxBudgetCapacity bounds Capacity so that micro-tokens never overflow.
const maxBudgetCapacity = 1 << 30

// NewRetryBudget returns a budget configured by opts.
func NewRetryBudget(opts RetryBudgetOptions) *RetryBudget {
	b := newRetryBudget(opts, time.Now)
	b.real = true
	return b
}

func newRetryBudget(opts RetryBudgetOptions, now func() time.Time) *RetryBudget {
	capacity := opts.Capacity
	switch {
	case capacity <= 0:
		capacity = DefaultRetryBudgetCapacity
	case capacity > maxBudgetCapacity:
		capacity = maxBudgetCapacity
	}
	ratio := opts.Ratio
	if ratio <= 0 || math.IsNaN(ratio) || math.IsInf(ratio, 0) {
		ratio = DefaultRetryBudgetRatio
	}
	b := &RetryBudget{capacity: int64(capacity) * tokenScale, noParking: opts.NoParking,
		maxWait: opts.MaxWait, maxParked: opts.MaxParked, origin: now(), now: now}
	// A tiny ratio still deposits something; a huge one refills at once.
	b.ratio = int64(math.Round(min(ratio, float64(capacity)) * tokenScale))
	b.ratio = min(max(b.ratio, 1), b.capacity)
	if b.maxWait <= 0 {
		b.maxWait = DefaultMaxParkedWait
	}
	if b.maxParked <= 0 {
		b.maxParked = DefaultMaxParked
	}
	maxHosts := opts.MaxHosts
	if maxHosts <= 0 {
		maxHosts = DefaultRetryBudgetMaxHosts
	}
	full := b.capacity
	b.hosts = hostmap.New(maxHosts, func(hostmap.Key) *hostState {
		return newHostState(full, b.clock())
	})
	return b
}

// defaultBudget is the budget of every Transport without WithRetryBudget.
var defaultBudget = sync.OnceValue(func() *RetryBudget { return NewRetryBudget(RetryBudgetOptions{}) })

// WithRetryBudget sets the retry budget of the transport. A non-nil budget
// is used as it is and may be shared with other Transports; nil turns the
// budget off, so that retries are limited only by the retry count and the
// policy, and are never parked. Without this option, a Transport uses the
// process's default budget, made on first use with the defaults of
// RetryBudgetOptions and shared by every Transport without this option.
func WithRetryBudget(b *RetryBudget) Option { return option(withBudget(b)) }

func withBudget(b *RetryBudget) patch { return func(s *settings) { s.budget = b } }

// retryBudget returns the budget of t, nil when it is turned off.
func (t *Transport) retryBudget() *RetryBudget { return t.base().budget }

// clock returns the time on the budget's clock, in nanoseconds since it was
// made: monotonic, and cheap to store in an atomic.
func (b *RetryBudget) clock() int64 { return int64(b.now().Sub(b.origin)) }

// since is clock on the real clock, from its monotonic reading alone
// (time.Since): cheaper than time.Now. Only for a budget whose clock is
// real (b.real).
func (b *RetryBudget) since() int64 { return int64(time.Since(b.origin)) }

// withdraw takes one token from the bucket of req's host and reports
// whether it could: whether one more attempt (a retry, or a hedge) may be
// sent at once. A nil budget allows everything.
func (b *RetryBudget) withdraw(req *http.Request) bool {
	if b == nil {
		return true
	}
	return b.hosts.GetOrCreate(hostmap.KeyOf(req)).withdraw()
}

// deposit records the outcome of an attempt that sent req, not a first
// attempt's nor a parked retry's: see settle.
func (b *RetryBudget) deposit(req *http.Request, res *http.Response) {
	b.settle(req, res, &attemptOutcome{}, nil)
}

// attemptOutcome is what settle needs to know of an attempt besides its
// response.
type attemptOutcome struct {
	first   bool          // the request's first attempt
	latency time.Duration // from sending to the response or error
	timeout time.Duration // the attempt's timeout, if any
	refund  bool          // a retry after a connection lost before any response
	neutral bool          // cancelled: says nothing about the host
	at      int64         // when it ended, on the budget's clock, if atKnown
	atKnown bool          // else settle reads the clock
}

// settle records the outcome of an attempt that sent req: a success
// credits the host's bucket, and gives back the token of a retry after a
// lost connection (which says nothing about the server's load; a server
// that keeps breaking connections gets nothing back). A first attempt's
// outcome feeds the host's recent statistics, for the pacing of parked
// retries; an attempt that held a slot of the host's window (l not nil and
// held) gives it back and moves the window. A failure makes the host's
// state if it has none; a success does only while the budget tracks fewer
// than MaxHosts hosts (a host without a state has a full bucket and nothing
// parked). Without a slot, settle takes no lock, and once the host has a
// state it does not allocate.
func (b *RetryBudget) settle(req *http.Request, res *http.Response, o *attemptOutcome, l *lease) {
	if b == nil {
		return
	}
	ok := success(res)
	var h *hostState
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
	at := o.at
	if !o.atKnown {
		at = b.clock()
	}
	switch {
	case !ok && o.first && res != nil && h.stats.streak.Load() < outageStreak:
		// A failure the host answered, outside an outage: retries are a
		// share of the requests it answers, not only of its successes.
		h.deposit(b.ratio)
	case ok:
		h.deposit(b.ratio)
		if o.refund {
			h.deposit(tokenScale)
		}
		if l != nil && l.owed > 0 && !h.queued(at, o.latency, o.timeout) {
			// The request's retries paid: their tokens go back.
			h.deposit(int64(l.owed) * tokenScale)
			l.owed = 0
		}
	}
	if o.neutral || res == nil && req.Context().Err() != nil {
		l.end(b, outNeutral, 0, 0) // cancelled: says nothing of the host
		return
	}
	h.stats.record(at, ok, o.first, o.latency)
	switch {
	case l != nil && l.held:
		l.end(b, outcomeOf(ok), o.latency, o.timeout)
	case ok && h.waiting.Load() > 0:
		// A success may open the gate for the parked retries.
		h.mu.Lock()
		h.step(b, at, input{ev: evPoke})
		h.mu.Unlock()
	}
}

// withdraw takes one token if there is one.
func (h *hostState) withdraw() bool {
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
func (h *hostState) deposit(n int64) {
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
