package retryhttp

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/budget"
	"github.com/seed2409de8f/retryhttp/internal/hostmap"
	"github.com/seed2409de8f/retryhttp/internal/respbody"
	"github.com/seed2409de8f/retryhttp/internal/retryafter"
)

// Test seams. Tests in package retryhttp_test reach internals through these.

// DelayWith is the DelayFn of opts with the time and the random number given.
func DelayWith(opts CustomizedDelayFnOptions, a Attempt, now time.Time, r float64) time.Duration {
	return newDelayPolicy(opts).delay(a, func() time.Time { return now }, r)
}

// ParseRetryAfter exposes retryafter.Parse.
func ParseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	return retryafter.Parse(h, func() time.Time { return now })
}

// MaxDrain is the bound on draining a discarded response body.
const MaxDrain = respbody.MaxDrain

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

// Settings resolves the settings of t for a request carrying ctx.
func Settings(t *Transport, ctx context.Context) ResolvedSettings {
	return SettingsFor(t, (&http.Request{URL: &url.URL{}}).WithContext(ctx))
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

// BudgetWithdraw takes a retry token for rawURL's host.
func BudgetWithdraw(b *RetryBudget, rawURL string) bool { return WithdrawFor(b, mustRequest(rawURL)) }

// BudgetParks reports whether a retry without a token parks on rawURL's
// host now (it is in an outage, or recovering from one); it spends the
// host's tokens to find out.
func BudgetParks(b *RetryBudget, rawURL string) bool {
	for BudgetWithdraw(b, rawURL) {
	}
	return b.core.Admit(&budget.Retry{Req: mustRequest(rawURL), Bound: budget.NoBound}).Do == budget.Park
}

// BudgetDeposit credits rawURL's host as an attempt answered with status
// would.
func BudgetDeposit(b *RetryBudget, rawURL string, status int) {
	DepositFor(b, mustRequest(rawURL), &http.Response{StatusCode: status, Header: http.Header{}})
}

// hostBudget returns the state of rawURL's host, made if it is missing.
func hostBudget(b *RetryBudget, rawURL string) HostBudget {
	req := mustRequest(rawURL)
	want := hostmap.KeyOf(req).String()
	// A first attempt, let go at once, makes its state if it is missing.
	b.core.Admit(&budget.Retry{Req: req, First: true})
	for h := range b.Hosts() {
		if h.Destination == want {
			return h
		}
	}
	panic("retryhttp: " + want + " was made and is gone")
}

// BudgetTokens returns the tokens left for rawURL's host.
func BudgetTokens(b *RetryBudget, rawURL string) float64 { return hostBudget(b, rawURL).Tokens }

// BudgetHosts returns the number of hosts whose buckets b keeps.
func BudgetHosts(b *RetryBudget) int {
	n := 0
	for range b.Hosts() {
		n++
	}
	return n
}

func mustRequest(rawURL string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		panic(err)
	}
	return req
}

// SetBase sets the base transport of t.
func SetBase(t *Transport, base http.RoundTripper) { t.transport = base }

// WithdrawFor takes a token of req's host, as a retry sent at once that
// finds one does.
func WithdrawFor(b *RetryBudget, req *http.Request) bool {
	return b.core.Admit(&budget.Retry{Req: req, Bound: budget.NoBound}).Do == budget.Send
}

// DepositFor records the outcome of an attempt that is neither a first
// attempt nor a parked retry, for benchmarks.
func DepositFor(b *RetryBudget, req *http.Request, res *http.Response) {
	b.settle(req, success(res), res != nil, &attemptOutcome{}, nil)
}

// MaxProbes bounds the retries a host's parked retries send as probes while
// it fails everything, per outage: one per probeQuiet for MaxWait, and the
// first.
var MaxProbes = int(DefaultMaxParkedWait/probeQuiet) + 1

// probeQuiet is the pace of the probes of a host without traffic: no
// failure heard for this long lets one parked retry go
// (internal/budget/pacer.go, probeQuiet).
const probeQuiet = 250 * time.Millisecond

// BudgetPacing returns the window of rawURL's host, its slots held and the
// retries parked on it.
func BudgetPacing(b *RetryBudget, rawURL string) (window float64, inFlight, parked int) {
	h := hostBudget(b, rawURL)
	return float64(h.Window), h.InFlight, h.Parked
}

// DefaultBudgetOf returns the budget t uses.
func DefaultBudgetOf(t *Transport) *RetryBudget { return t.retryBudget() }

// BudgetOutage puts rawURL's host in an outage: its latest OutageStreak
// attempts failed, so retries without a token park there.
func BudgetOutage(b *RetryBudget, rawURL string) {
	for range OutageStreak {
		DepositFor(b, mustRequest(rawURL), nil)
	}
}

// OutageStreak is the number of failures in a row that make an outage
// (internal/budget/pacer.go, outageStreak).
const OutageStreak = 10

// HostKey returns the key of rawURL's destination, as a string.
func HostKey(rawURL string) string { return hostmap.KeyOf(mustRequest(rawURL)).String() }

// budgetWithOneToken returns a budget made with opts whose bucket for
// rawURL's host, a host that answered (not in an outage), holds one token
// of its ten, so
// that what settle deposits afterwards shows in BudgetTokens: Ratio (0.1)
// per success and per first attempt answered with a failure, nothing for a
// retry that failed, and a retry's token back when it succeeds.
func budgetWithOneToken(rawURL string, opts RetryBudgetOptions) *RetryBudget {
	b := NewRetryBudget(opts)
	BudgetDeposit(b, rawURL, http.StatusOK)
	for BudgetTokens(b, rawURL) > 1 {
		BudgetWithdraw(b, rawURL)
	}
	return b
}
