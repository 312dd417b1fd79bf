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

	// DefaultRetryBudgetRatio is the default of RetryBudgetOptions.Ratio:
	// the tokens a successful attempt, or a failed first attempt its host
	// answers outside an outage, deposits.
	DefaultRetryBudgetRatio = 0.1

	// DefaultRetryBudgetCapacity is the default of
	// RetryBudgetOptions.Capacity: the size of each host's bucket, and the
	// number of tokens it starts with.
	DefaultRetryBudgetCapacity = 10

	// DefaultMaxParkedWait is the default of RetryBudgetOptions.MaxWait:
	// it bounds the time one request spends parked, in all, so that a
	// blip shorter than this is ridden out.
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
	// Ratio is the number of tokens deposited in a host's bucket by each
	// successful attempt, and by each failed first attempt the host
	// answers outside an outage; each retry sent with a token withdraws
	// one, given back if the request's retry succeeds without queueing
	// (unless the failure it retried asked the client to back off). Where
	// the host is short of room (it asked to back off, or load hurts it),
	// a retry without a token waits for one, or for the host's gate: the
	// retries that spend a token are then about Ratio per request the
	// host answers, plus Capacity. The default is DefaultRetryBudgetRatio.
	Ratio float64

	// Capacity is the size of each host's bucket and the number of tokens
	// it starts with: the number of retries sent with a token in a row
	// before any success. The default is DefaultRetryBudgetCapacity. Values
	// above 2^30 are treated as 2^30.
	Capacity int

	// MaxHosts bounds the number of hosts whose state is kept (to within
	// one per shard of the map, and not counting hosts with retries
	// parked or in flight, which are never forgotten). Past
	// it, a new host evicts another (one whose bucket is full if one is
	// found quickly, else an arbitrary one without parked retries), which
	// starts again with a full bucket when it next fails. The default is
	// 1024.
	MaxHosts int

	// NoParking turns parking off: a retry that would park (into an
	// outage, or without a token where the host is short of room) is sent
	// if it can take a token and dropped at once otherwise, and the retry
	// of a response that asked for a pause takes its token up front
	// instead of waiting in the pause lane. A retry without a token to a
	// host that answers and shows no sign of trouble is still sent. By
	// default (false) retries park, as RetryBudget describes.
	NoParking bool

	// MaxWait bounds the time one request spends parked, over all its
	// retries; and a host in an outage that has had no successful attempt
	// for that long (the first sight of a host counts as one) is dead: its
	// retries are refused at once, and those parked there give up. The
	// default is DefaultMaxParkedWait.
	MaxWait time.Duration

	// MaxParked bounds the retries waiting on one host at once, parked or
	// in its pause lane; past it, a retry that would wait is dropped at
	// once. The default is 10,000.
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

// RetryBudget limits the retries sent to each destination host (scheme,
// host name and port), so that a failing backend sees about as many
// requests as its callers make, not a multiple, while the retries that
// succeed go through: it limits the retries that fail.
//
// Each host has a bucket of Capacity tokens, refilled by Ratio for each
// success and each failed first attempt the host answers outside an
// outage; a retry sent with a token that succeeds without queueing gives
// it back. What it costs a caller:
//   - nothing where a retry costs the host nothing it lacks: a retry with
//     a token is sent after its delay, and so is one without a token to a
//     host that answers, asked for no pause and shows no sign that load
//     hurts it;
//   - a wait: into an outage (the host's latest attempts all failed), or
//     without a token to a host that asked to back off or that load hurts,
//     a retry parks, for at most MaxWait per request, within the caller's
//     deadline; the retry of a 429, or of a Retry-After or rate-limit reset
//     asking a wait, takes no token, waits at least the pause, then in the
//     host's pause lane, up to WithMaxDelay and the caller's deadline;
//   - a refusal: at once on a dead host, or for a pause other than a 429's
//     while the bucket is empty; after a wait that reached its bound.
//
// Transports without WithRetryBudget share one (DefaultRetryBudget);
// WithRetryBudget shares one among Transports, or turns it off (nil). It is
// safe for concurrent use. docs/storms.md has its effects and price under
// each kind of failure, docs/budget-algorithm.md the mechanism.
type RetryBudget struct {
	core *budget.Budget // internal/budget: the hosts, their buckets, statistics and windows; set by NewRetryBudget only

	// A RetryBudget not made by NewRetryBudget (core nil) gets a state
	// with the defaults on first use.
	zero     sync.Once
	zeroCore *budget.Budget
}

// NewRetryBudget returns a budget configured by opts. A RetryBudget not
// made by it (&RetryBudget{}) is one made with the defaults, on first use.
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

// inner returns b's state; nil for a nil b, which allows everything. A
// RetryBudget{} (not made by NewRetryBudget) is made with the defaults on
// first use, as NewRetryBudget(RetryBudgetOptions{}) would make it.
func (b *RetryBudget) inner() *budget.Budget {
	if b == nil {
		return nil
	}
	if b.core != nil {
		return b.core
	}
	return b.made()
}

// made makes the state of a RetryBudget{} with the defaults, once, and
// returns it.
func (b *RetryBudget) made() *budget.Budget {
	b.zero.Do(func() { b.zeroCore = NewRetryBudget(RetryBudgetOptions{}).core })
	return b.zeroCore
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

func withBudget(b *RetryBudget) patch {
	if b != nil && b.core == nil {
		// A RetryBudget{}: its state, made with the defaults, shared
		// with b's own (RetryBudget.Hosts), so that the loop reads core
		// as it is.
		b = &RetryBudget{core: b.made()}
	}
	return func(s *settings) { s.budget = b }
}

// retryBudget returns the budget of t, nil when it is turned off.
func (t *Transport) retryBudget() *RetryBudget { return t.base().budget }

// settle records the outcome of an attempt that sent req (budget.Settle):
// ok if its response is a success (failure.go's success), answered if it
// brought one.
func (b *RetryBudget) settle(req *http.Request, ok, answered bool, o *attemptOutcome, l *lease) {
	b.core.Settle(req, ok, answered, o, l) // set: withBudget resolves a RetryBudget{}
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
