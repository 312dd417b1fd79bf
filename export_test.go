package retryhttp

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"time"

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

// FullJitter exposes fullJitter.
func FullJitter(base, ceil time.Duration, n int, r float64) time.Duration {
	return fullJitter(base, ceil, n, r)
}

// MaxDrain is the bound on draining a discarded response body.
const MaxDrain = maxDrain

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

// SetHedgeGate makes t ask allow, instead of the retry budget, before every
// attempt of a hedged request after the first.
func SetHedgeGate(t *Transport, allow func(req *http.Request) bool) { t.hedgeGate = allow }

// BudgetWithdraw takes a retry token for rawURL's host.
func BudgetWithdraw(b *RetryBudget, rawURL string) bool { return b.withdraw(mustRequest(rawURL)) }

// BudgetDeposit credits rawURL's host as an attempt answered with status
// would.
func BudgetDeposit(b *RetryBudget, rawURL string, status int) {
	b.deposit(mustRequest(rawURL), &http.Response{StatusCode: status, Header: http.Header{}})
}

// BudgetTokens returns the tokens left for rawURL's host.
func BudgetTokens(b *RetryBudget, rawURL string) float64 {
	bk, ok := b.hosts.get(keyOf(mustRequest(rawURL)))
	if !ok {
		return float64(b.capacity) / tokenScale
	}
	return float64(bk.tokens.Load()) / tokenScale
}

// BudgetHosts returns the number of hosts whose buckets b keeps.
func BudgetHosts(b *RetryBudget) int { return b.hosts.len() }

// HostKey returns the key of rawURL's destination, as a string.
func HostKey(rawURL string) string { return keyOf(mustRequest(rawURL)).String() }

func mustRequest(rawURL string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		panic(err)
	}
	return req
}

// SetBase sets the base transport of t.
func SetBase(t *Transport, base http.RoundTripper) { t.transport = base }

// Evict fills a one-shard map with one bucket per element of idle (full
// when true, empty when false), evicts one and returns its index.
func Evict(idle []bool) int {
	h := newHostMap(len(idle), func(hostKey) *hostState { return &hostState{capacity: tokenScale} })
	h.shards = h.shards[:1]
	h.chains = 1
	for h.chains < len(idle) {
		h.chains *= 2
	}
	for i, full := range idle {
		if h.getOrCreate(hostKey{"http", strconv.Itoa(i)}); full {
			v, _ := h.get(hostKey{"http", strconv.Itoa(i)})
			v.tokens.Store(tokenScale)
		}
	}
	s := &h.shards[0]
	s.mu.Lock()
	s.evict(*s.table.Load(), rand.Uint64())
	s.mu.Unlock()
	for i := range idle {
		if _, ok := h.get(hostKey{"http", strconv.Itoa(i)}); !ok {
			return i
		}
	}
	return -1
}

// WithdrawFor exposes the budget's withdraw, for benchmarks.
func WithdrawFor(b *RetryBudget, req *http.Request) bool { return b.withdraw(req) }

// DepositFor exposes the budget's deposit, for benchmarks.
func DepositFor(b *RetryBudget, req *http.Request, res *http.Response) { b.deposit(req, res) }

// MaxProbes bounds the retries a host's parked retries send as probes while
// it fails everything, per outage: one per probeQuiet for MaxWait, and the
// first.
var MaxProbes = int(DefaultMaxParkedWait/probeQuiet) + 1

// BudgetPacing returns the window of rawURL's host, its slots held and the
// retries parked on it.
func BudgetPacing(b *RetryBudget, rawURL string) (window float64, inFlight, parked int) {
	h, ok := b.hosts.get(keyOf(mustRequest(rawURL)))
	if !ok {
		return initialWindow, 0, 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.p.window, h.p.inFlight, h.p.queue.n
}

// DefaultBudgetOf returns the budget t uses.
func DefaultBudgetOf(t *Transport) *RetryBudget { return t.retryBudget() }

// BudgetGateClosed reports whether rawURL's host has enough recent first
// attempts for its gate to judge, and the gate is closed.
func BudgetGateClosed(b *RetryBudget, rawURL string) bool {
	h, ok := b.hosts.get(keyOf(mustRequest(rawURL)))
	if !ok {
		return false
	}
	at := b.clock()
	okN, fail, _, _ := h.stats.recent(at)
	h.mu.Lock()
	defer h.mu.Unlock()
	return okN+fail >= gateMinSamples && !h.gate(at)
}

// LookupDestination reports whether a policy of d (a destination's or the
// defaults) applies to req.
func LookupDestination(d *Destinations, req *http.Request) bool { return d.lookup(req) != nil }

// BudgetOutage puts rawURL's host in an outage, as if its latest
// outageStreak attempts had failed: retries without a token park there.
func BudgetOutage(b *RetryBudget, rawURL string) {
	b.hosts.getOrCreate(keyOf(mustRequest(rawURL))).stats.streak.Store(outageStreak)
}

// OutageStreak is the number of failures in a row that make an outage.
const OutageStreak = outageStreak
