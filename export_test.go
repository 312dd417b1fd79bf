package retryhttp

import (
	"net/http"
	"sync"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/budget"
	"github.com/seed2409de8f/retryhttp/internal/hostmap"
	"github.com/seed2409de8f/retryhttp/internal/tail"
)

// Test seams: the few internals the tests of package retryhttp_test reach,
// ten in all. Everything else they check goes through the public API (a
// host's budget state through RetryBudget.Hosts), the internal packages'
// own tests, or internal/testkit.

// DelayWith is the DelayFn of opts with the time and the random number given.
func DelayWith(opts CustomizedDelayFnOptions, a Attempt, now time.Time, r float64) time.Duration {
	return newDelayPolicy(opts).delay(a, func() time.Time { return now }, r)
}

// ResolvedSettings are the settings one RoundTrip runs with: the transport's
// options, with the context's overrides applied and defaults filled in.
type ResolvedSettings struct {
	MaxRetries           int
	ShouldRetry          ShouldRetryFn
	Delay                DelayFn
	PreventRetryWithBody bool
	AttemptTimeout       time.Duration
	MaxDelay             time.Duration
	BodyBufferLimit      int64
	HedgeDelay           time.Duration
	MaxHedges            int
	Budget               *RetryBudget
}

// SettingsFor resolves the settings of t for req.
func SettingsFor(t *Transport, req *http.Request) ResolvedSettings {
	var own settings
	s := t.settings(req, &own)
	return ResolvedSettings{
		HedgeDelay:           s.hedgeDelay,
		MaxHedges:            s.maxHedges,
		Budget:               s.budget,
		MaxRetries:           s.maxRetries,
		ShouldRetry:          s.shouldRetry,
		Delay:                s.delay,
		PreventRetryWithBody: s.preventRetryWithBody,
		AttemptTimeout:       s.attemptTimeout,
		MaxDelay:             s.maxDelay,
		BodyBufferLimit:      s.bodyBufferLimit,
	}
}

// BaseTransport exposes the transport that sends each attempt.
func BaseTransport(t *Transport) http.RoundTripper { return t.baseTransport() }

// SetBase sets the base transport of t.
func SetBase(t *Transport, base http.RoundTripper) { t.transport = base }

// DefaultBudgetOf returns the budget t uses.
func DefaultBudgetOf(t *Transport) *RetryBudget { return t.retryBudget() }

// WithdrawFor takes a token of req's host, as a retry sent at once that
// finds one does.
func WithdrawFor(b *RetryBudget, req *http.Request) bool {
	v := b.inner().Admit(&budget.Retry{Req: req, Bound: budget.NoBound})
	return v.Do == budget.Send && v.Lease != (budget.Lease{}) // sent with a token, not free
}

// DepositFor records the outcome of an attempt that is neither a first
// attempt nor a parked retry: res, or no response (nil).
func DepositFor(b *RetryBudget, req *http.Request, res *http.Response) {
	b.settle(req, success(res), res != nil, &attemptOutcome{}, nil)
}

// HostOf returns the state of req's host (as RetryBudget.Hosts gives it),
// made if it is missing.
func HostOf(b *RetryBudget, req *http.Request) HostBudget {
	want := hostmap.KeyOf(req).String()
	// A first attempt, let go at once, makes its state if it is missing.
	b.inner().Admit(&budget.Retry{Req: req, First: true})
	for h := range b.Hosts() {
		if h.Destination == want {
			return h
		}
	}
	panic("retryhttp: " + want + " was made and is gone")
}

// AdaptiveHedgeDelay returns the hedge delay that adaptive hedging with
// quantile q would give req now, and whether its host's window is warm.
func AdaptiveHedgeDelay(t *Transport, req *http.Request, q float64) (time.Duration, bool) {
	return t.tails.of(req).Delay(t.clock().Now().UnixNano(), tail.ClampQuantile(q))
}

// The helpers of the package's internal tests (unexported).

func mustRequest(rawURL string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		panic(err)
	}
	return req
}

// budgetWithOneToken returns a budget made with opts whose bucket for
// rawURL's host, a host that answered (not in an outage), holds one token
// of its ten, so that what settle deposits afterwards shows in its Tokens:
// Ratio (0.1) per success and per first attempt answered with a failure,
// nothing for a retry that failed, and a retry's token back when it
// succeeds.
func budgetWithOneToken(rawURL string, opts RetryBudgetOptions) *RetryBudget {
	b := NewRetryBudget(opts)
	req := mustRequest(rawURL)
	DepositFor(b, req, &http.Response{StatusCode: http.StatusOK, Header: http.Header{}})
	for HostOf(b, req).Tokens > 1 {
		WithdrawFor(b, req)
	}
	return b
}

// stepClock is a Clock for the package's internal tests, which cannot use
// retryhttptest's: its time moves only with Advance, and its timers never
// fire; but, if jump, a wait (NewTimer) ends at once, moving the time to
// its end.
type stepClock struct {
	mu   sync.Mutex
	now  time.Time
	jump bool
}

func newStepClock(start time.Time) *stepClock { return &stepClock{now: start} }

// withNoWaits puts t on a clock whose waits end at once.
func withNoWaits(t *Transport) { WithClock(&stepClock{now: time.Now(), jump: true})(t) }

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves c's time forward by d.
func (c *stepClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *stepClock) NewTimer(d time.Duration) (<-chan time.Time, Timer) {
	if !c.jump {
		return nil, idleTimer{}
	}
	c.Advance(d)
	fired := make(chan time.Time, 1)
	fired <- c.Now()
	return fired, idleTimer{}
}

func (c *stepClock) AfterFunc(time.Duration, func()) Timer { return idleTimer{} }

// idleTimer is a timer that never fires: Stop always finds it armed.
type idleTimer struct{}

func (idleTimer) Stop() bool               { return true }
func (idleTimer) Reset(time.Duration) bool { return true }

// parks reports whether a retry without a token parks on rawURL's host now
// (it is in an outage, or recovering from one); it spends the host's tokens
// to find out.
func parks(b *RetryBudget, rawURL string) bool {
	req := mustRequest(rawURL)
	for WithdrawFor(b, req) {
	}
	return b.inner().Admit(&budget.Retry{Req: req, Bound: budget.NoBound}).Do == budget.Park
}

// outage puts rawURL's host in an outage: its latest outageStreak (10)
// attempts failed, so retries without a token park there
// (internal/budget/pacer.go, outageStreak).
func outage(b *RetryBudget, rawURL string) {
	for range 10 {
		DepositFor(b, mustRequest(rawURL), nil)
	}
}

// ForgetQuotas empties the process's quota book: a test whose server
// advertised a quota leaves nothing for a later test's server that is
// given the same port (the book is keyed by host and port).
func ForgetQuotas() { processQuotas.Reset() }

// ForgetContacts forgets the hosts the process heard from: a test of the
// first contact's gate whose server is given the port of an earlier
// test's meets the gate all the same.
func ForgetContacts() { processContacts.Reset() }
