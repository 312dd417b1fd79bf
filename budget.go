package retryhttp

import (
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/budget"
)

// Defaults: of WithMaxRetries, and of RetryBudgetOptions.
const (
	// DefaultMaxRetries is the number of retries (not attempts) made unless
	// told otherwise: a request is sent at most DefaultMaxRetries+1 times.
	DefaultMaxRetries = 3

	// DefaultRetryBudgetRatio is the number of tokens a successful attempt
	// deposits: one retry for every ten successes.
	DefaultRetryBudgetRatio = 0.1

	// DefaultRetryBudgetCapacity is the size of each host's bucket, and the
	// number of tokens it starts with: ten retries sent at once, before any
	// success, on top of the parked retries the host's window releases.
	DefaultRetryBudgetCapacity = 10

	// DefaultMaxParkedWait bounds the time one request spends parked, in
	// all: a blip shorter than this is ridden out.
	DefaultMaxParkedWait = 2 * time.Second
)

// The defaults of RetryBudgetOptions that no other package needs, stated in
// its field docs.
const (
	// defaultRetryBudgetMaxHosts bounds the number of hosts a budget tracks.
	defaultRetryBudgetMaxHosts = 1024

	// defaultMaxParked bounds the retries parked on one host at once.
	defaultMaxParked = 10_000
)

// RetryBudgetOptions configures NewRetryBudget. The zero value of each field
// means its default; so does an invalid value (negative, NaN or infinite).
// docs/budget-algorithm.md has the algorithm and its bounds.
type RetryBudgetOptions struct {
	// Ratio is the number of tokens that a successful attempt deposits in
	// its host's bucket; each retry sent without parking withdraws one. The default
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
	// 1024.
	MaxHosts int

	// NoParking turns parking off: a retry without a token is dropped at
	// once, and the retry of a response that asked for a pause takes its
	// token up front instead of waiting in the pause lane. By default
	// (false) it is parked, as RetryBudget describes.
	NoParking bool

	// MaxWait bounds the time one request spends parked, over all its
	// retries; and a host that has had no successful attempt for that long
	// (the first sight of a host counts as one) refuses parking at once.
	// The default is DefaultMaxParkedWait, 2s.
	MaxWait time.Duration

	// MaxParked bounds the retries parked on one host at once; past it, a
	// retry without a token is dropped at once. The default is 10,000.
	MaxParked int

	// Clock is where the budget reads the time: its hosts' recent
	// outcomes, the pace of parked retries, MaxWait. The default, nil, is
	// the real clock. A budget is shared by Transports (WithRetryBudget),
	// each with its own Clock (WithClock), so it has a clock of its own:
	// a test on a fake clock that parks retries gives its budget the same
	// clock (retryhttptest.Clock), so that the pacing runs without real
	// waiting too.
	Clock Clock
}

// RetryBudget decides which retries are sent to each destination host, so
// that a failing backend sees about as many requests as its callers make,
// not four times as many, while the retries that succeed are let through.
// Its rule: limit the retries that fail, not the retries that succeed.
//
// It keeps a state per host (scheme, host name and port) with two parts:
//
//   - A token bucket: it starts full with Capacity tokens; a retry that
//     sees a token waits its delay, then withdraws one as it is sent (a
//     delay longer than MaxWait, or a response body over 4 KiB, withdraws
//     it before the wait), so that the bucket bounds the retries sent, not
//     those waiting; if the token is gone by then, the retry ends as one
//     that found none; a successful attempt deposits Ratio tokens, up to
//     Capacity. When a request's retry
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
//     per first attempt the host receives, one by one as the host's events
//     come (never a batch saved up), with a slot of a window (the
//     parked retries in flight: it starts at its cap, is halved when a
//     retry fails or queued, at most once per round, grows back by one per
//     round of successful retries, and is capped at
//     max(20, 2 × the host's rate of first attempts × its lowest latency))
//     or with a token; none while 20% or more of the host's recent first
//     attempts fail. A parked retry gives up, ending as a refused one does,
//     at the caller's deadline less one attempt timeout, after MaxWait in
//     all, when the host has had no success for MaxWait, or when MaxParked
//     retries are already waiting. Outside an outage, a retry without a
//     token is refused at once: it would wait for nothing.
//   - The pause lane, for the retry of a response that asked for a pause
//     (a 429, or a Retry-After or rate-limit reset asking a wait): it takes
//     no token. With the default DelayFn it waits at least the pause
//     stated; then it queues, first come first served, and is released at
//     the pace the host accepts, learned from the host's answers to the
//     lane's releases (one at a time until one is answered with a pause
//     again, then spaced by what the host accepted between pauses). It
//     gives up at the caller's deadline less one attempt timeout, after
//     the transport's maximum delay, or when the host has had no success
//     for MaxWait and the pause stated; one the lane would not release
//     before its bound needs a token, as any retry. The lane's releases
//     that fail spend a token each, and a pause's retry is refused when
//     the bucket is empty. WithHoldDuringPause holds every request to the
//     host, first attempts included, while its stated pause runs.
//
// An attempt is successful when it brings a response with a status below
// 500 other than 429, and, for a 4xx status, without a Retry-After header: a
// response that tells the client the server is answering and not asking to
// be left alone. A failed first attempt that brought a response outside an
// outage deposits Ratio too (retries are a share of the requests the host
// answers); errors and other responses deposit nothing.
//
// So a dead backend gets Capacity retries and then none (its parked retries
// wait for a success that does not come); a host failing a share of its
// requests at random gets the retries that succeed, as without a budget,
// and its failed ones at about Ratio per success; a blip shorter than
// MaxWait gets its retries after it, at the pace of the host's own traffic.
// The price is waiting, in an outage only: a failed request waits up to
// MaxWait before it fails, instead of failing at once. docs/budget-algorithm.md gives
// the arithmetic.
//
// Transports without WithRetryBudget share one budget with the defaults,
// for the whole process, as http.DefaultTransport shares connections: a
// Transport made per call is then as storm-safe as one shared. A
// RetryBudget can be shared by several Transports that call the same
// backends (WithRetryBudget). It is safe for concurrent use; a successful
// attempt takes no lock and allocates nothing.
type RetryBudget struct {
	core *budget.Budget // internal/budget: the hosts, their buckets, statistics and windows
}

// NewRetryBudget returns a budget configured by opts.
func NewRetryBudget(opts RetryBudgetOptions) *RetryBudget {
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
	cfg := budget.Config{
		Ratio:     ratio,
		Capacity:  capacity,
		MaxHosts:  positiveOr(opts.MaxHosts, defaultRetryBudgetMaxHosts),
		NoParking: opts.NoParking,
		MaxWait:   positiveOr(opts.MaxWait, DefaultMaxParkedWait),
		MaxParked: positiveOr(opts.MaxParked, defaultMaxParked),
	}
	var clk budget.Clock // nil: the real clock, read cheaply
	if opts.Clock != nil {
		clk = opts.Clock
	}
	return &RetryBudget{core: budget.New(cfg, clk)}
}

// positiveOr returns v, or def when v is zero or negative.
func positiveOr[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// maxBudgetCapacity bounds Capacity so that the buckets never overflow.
const maxBudgetCapacity = budget.MaxCapacity

// inner returns b's state; nil for a nil b, which allows everything.
func (b *RetryBudget) inner() *budget.Budget {
	if b == nil {
		return nil
	}
	return b.core
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

// settle records the outcome of an attempt that sent req (budget.Settle):
// ok if its response is a success (failure.go's success), answered if it
// brought one.
func (b *RetryBudget) settle(req *http.Request, ok, answered bool, o *attemptOutcome, l *lease) {
	b.inner().Settle(req, ok, answered, o, l)
}

// takeNow claims a hedge of req without waiting (budget.Admit): a token,
// or a free slot of its host's window.
func (b *RetryBudget) takeNow(req *http.Request) (lease, bool) {
	v := b.inner().Admit(&budget.Retry{Req: req, Hedge: true})
	return v.Lease, v.Do == budget.Send
}

// The budget's types, as the loop knows them.
type (
	lease          = budget.Lease   // a retry's claim on its host
	attemptOutcome = budget.Outcome // what settle needs to know of an attempt
)

// outNeutral is the outcome of an attempt cancelled: it says nothing about
// the host (Lease.End).
const outNeutral = budget.SlotNeutral
