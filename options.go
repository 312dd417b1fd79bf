package retryhttp

import (
	"context"
	"net/http"
	"time"
)

// Option configures a Transport; pass options to New. An Option is a plain
// func(*Transport), so code written for github.com/justinrixx/retryhttp
// compiles unchanged.
type Option = func(*Transport)

const (
	// defaultMaxDelay is the longest wait the transport accepts before a
	// retry; a longer delay (from a Retry-After, say) stops the retries.
	defaultMaxDelay = 60 * time.Second

	// defaultBodyBufferLimit bounds the bytes of a request body without
	// GetBody that are kept in memory to replay it.
	defaultBodyBufferLimit = 1 << 20
)

// WithTransport sets the base transport that sends each attempt. The default,
// used also for nil, is a pooled transport from
// github.com/hashicorp/go-cleanhttp, made once and shared by every Transport
// made without WithTransport in the process (see New).
func WithTransport(transport http.RoundTripper) Option {
	return func(t *Transport) { t.transport = transport }
}

// WithMaxRetries sets how many times a request may be retried after its first
// attempt; 0 disables retries. The default is DefaultMaxRetries. A negative
// value is treated as 0.
func WithMaxRetries(maxRetries int) Option { return option(withMaxRetries(maxRetries)) }

// SetMaxRetries returns a context that makes requests sent with it use
// maxRetries instead of the transport's setting. A negative value is treated
// as 0.
func SetMaxRetries(ctx context.Context, maxRetries int) context.Context {
	return withOverride(ctx, "maxRetries", withMaxRetries(maxRetries))
}

func withMaxRetries(n int) patch {
	n = max(n, 0)
	return func(s *settings) { s.maxRetries = n }
}

// WithShouldRetryFn sets the function that decides whether an attempt is
// retried. The default, used also for nil, is DefaultShouldRetryFn.
//
// The transport cannot see which requests fn treats as idempotent: hedging
// and the watch of writes guess by the default methods (see
// DefaultShouldRetryFn), unless WithCustomizedShouldRetryFn sets the rules.
func WithShouldRetryFn(fn ShouldRetryFn) Option { return option(withShouldRetry(fn, nil)) }

// SetShouldRetryFn returns a context that makes requests sent with it use fn
// instead of the transport's ShouldRetryFn. A nil fn removes an earlier
// override.
func SetShouldRetryFn(ctx context.Context, fn ShouldRetryFn) context.Context {
	if fn == nil {
		return withOverride(ctx, "shouldRetry")
	}
	return withOverride(ctx, "shouldRetry", withShouldRetry(fn, nil))
}

// withShouldRetry sets the policy fn, DefaultShouldRetryFn for nil. rules
// are fn's own when fn is one of this package's policies, nil for any other
// function (settings.rules).
func withShouldRetry(fn ShouldRetryFn, rules *retryPolicy) patch {
	if fn == nil {
		fn, rules = DefaultShouldRetryFn, &defaultRetryPolicy
	}
	return func(s *settings) { s.shouldRetry, s.rules = fn, rules }
}

// withRetryPolicy sets the policy to p's decision, with p's rules.
func withRetryPolicy(p retryPolicy) patch { return withShouldRetry(p.fn(), &p) }

// guessRules returns the rules by which the transport guesses a request's
// idempotency before sending it: the policy's own, or, for a function of
// the caller's, whose rules it cannot see, DefaultShouldRetryFn's.
func (s *settings) guessRules() *retryPolicy {
	if s.rules != nil {
		return s.rules
	}
	return &defaultRetryPolicy
}

// WithDelayFn sets the function that chooses the wait before each retry. The
// default, used also for nil, is DefaultDelayFn. With a retry budget, a
// pause the server stated is a floor whatever fn returns (see DelayFn).
func WithDelayFn(fn DelayFn) Option { return option(withDelay(fn)) }

// SetDelayFn returns a context that makes requests sent with it use fn
// instead of the transport's DelayFn. A nil fn removes an earlier override.
// With a retry budget, a pause the server stated is a floor whatever fn
// returns (see DelayFn).
func SetDelayFn(ctx context.Context, fn DelayFn) context.Context {
	if fn == nil {
		return withOverride(ctx, "delay")
	}
	return withOverride(ctx, "delay", withDelay(fn))
}

func withDelay(fn DelayFn) patch {
	own := fn != nil
	if fn == nil {
		fn = DefaultDelayFn
	}
	return func(s *settings) { s.delay, s.ownDelay = fn, own }
}

// WithPreventRetryWithBody, when true, disables retries for every request
// that has a body. The default is false.
func WithPreventRetryWithBody(preventRetryWithBody bool) Option {
	return option(withPreventRetryWithBody(preventRetryWithBody))
}

// SetPreventRetryWithBody returns a context that makes requests sent with it
// use preventRetryWithBody instead of the transport's setting.
func SetPreventRetryWithBody(ctx context.Context, preventRetryWithBody bool) context.Context {
	return withOverride(ctx, "preventRetryWithBody", withPreventRetryWithBody(preventRetryWithBody))
}

func withPreventRetryWithBody(prevent bool) patch {
	return func(s *settings) { s.preventRetryWithBody = prevent }
}

// WithAttemptTimeout bounds each attempt, from sending the request to
// receiving the response headers. It does not bound reading the body of the
// response returned to the caller. An attempt cut by this timeout fails with
// ErrAttemptTimeout and is retried like any timeout (for requests guessed
// idempotent, by default). Zero or negative, the default, means no
// per-attempt timeout.
func WithAttemptTimeout(timeout time.Duration) Option { return option(withAttemptTimeout(timeout)) }

// SetAttemptTimeout returns a context that makes requests sent with it use
// timeout per attempt instead of the transport's setting; zero or negative
// means no per-attempt timeout.
func SetAttemptTimeout(ctx context.Context, timeout time.Duration) context.Context {
	return withOverride(ctx, "attemptTimeout", withAttemptTimeout(timeout))
}

func withAttemptTimeout(timeout time.Duration) patch {
	timeout = max(timeout, 0)
	return func(s *settings) { s.attemptTimeout = timeout }
}

// WithMaxDelay sets the longest wait accepted before a retry. When the delay
// chosen for a retry is longer (a Retry-After of an hour, say), the transport
// does not wait: it returns the last response, or error, at once. It also
// bounds the wait of a pause's retry in the host's pause lane (RetryBudget).
// Zero or negative means the default, 60s.
func WithMaxDelay(maxDelay time.Duration) Option {
	if maxDelay <= 0 {
		maxDelay = defaultMaxDelay
	}
	return option(func(s *settings) { s.maxDelay = maxDelay })
}

// WithHoldDuringPause, when true, holds every request to a destination
// host, first attempts included, while the pause that host's server last
// stated runs (a 429 or another failed response with Retry-After or a
// rate-limit reset header, docs/ratelimit.md): the request waits in the
// host's pause lane until the pause is over, then leaves at the pace the
// host accepts, so that it does not meet the limit a 429 announced. For
// APIs that ask for it (GitHub's "continuing to make requests while you
// are rate limited may result in the banning of your integration"). Off by
// default: a limit may be per endpoint or per model, and the pause of one
// request then says nothing of the others'. It needs the retry budget
// (the default one, or WithRetryBudget's), which keeps the host's state;
// with the budget off, or NoParking, it does nothing. A held request waits
// as a parked retry does: within its deadline less one attempt timeout,
// and the maximum delay (WithMaxDelay); past them it is sent.
func WithHoldDuringPause(hold bool) Option {
	return option(func(s *settings) { s.holdDuringPause = hold })
}

// WithBodyBufferLimit sets how many bytes of a request body without GetBody
// are kept in memory so that the request can be retried. Such a body is
// streamed to the first attempt as it comes, as net/http would send it, and
// the bytes read are copied on the way; a retry sends the copy, then the
// rest. Once a body outgrows the limit, its copy is dropped and its request
// is not retried (ErrBodyNotReplayable); zero or negative means such bodies
// are never copied (and never retried). The default is 1 MiB. Bodies with
// GetBody (those of http.NewRequest with a *bytes.Buffer, *bytes.Reader or
// *strings.Reader) are never copied: each retry gets a fresh copy from
// GetBody.
func WithBodyBufferLimit(limit int64) Option {
	limit = max(limit, 0)
	return option(func(s *settings) { s.bodyBufferLimit = limit })
}

// Configuration has one shape: settings, the values one request runs with,
// and patches to them. The transport's options (With…) are patches, kept in
// order and applied once per Transport, on first use, to the defaults
// (base). A Policy (policy.go) is the patches of its options, and so are a
// context's options (SetOptions, Set…). A request runs with the transport's
// settings as they are, unless a Policy applies to it or its context carries
// options: then with a copy of them, patched by the policy and then by the
// context's (policy.go).
//
// An option is added in one place, the file of its concept: a field of
// settings (and its default in defaultSettings when that is not its zero
// value), a function that makes its patch (which clamps or replaces invalid
// values), and WithX (option(patch)). NewPolicy and SetOptions take it as
// they are.

// settings are what one request runs with.
type settings struct {
	maxRetries           int
	shouldRetry          ShouldRetryFn
	rules                *retryPolicy // shouldRetry's, when it is this package's (shouldretry.go); nil: the caller's function
	delay                DelayFn
	ownDelay             bool // delay is the caller's (WithDelayFn, SetDelayFn): its wait is not cut to a quota's turn (quota.go)
	holdDuringPause      bool // WithHoldDuringPause (pause.go)
	preventRetryWithBody bool
	attemptTimeout       time.Duration
	maxDelay             time.Duration
	bodyBufferLimit      int64
	errorOnGiveUp        bool // giveup.go

	idempotencyKeys        bool // idempotency.go
	idempotencyKeyHeader   string
	idempotencyKeysHonored bool
	retrySignal            bool // crosshop.go
	attemptHeader          bool

	hedgeDelay    time.Duration // hedge.go; hedging is on when maxHedges and one of these are positive
	hedgeQuantile float64       // hedgedelay.go; 0: the fixed hedgeDelay
	maxHedges     int
	budget        *RetryBudget // budget.go; nil: no budget

	quotaPacing bool                       // WithQuotaPacing (quota.go)
	quotaScope  func(*http.Request) string // WithQuotaScope; nil: the host's
}

// defaultSettings are the settings of a Transport without options.
func defaultSettings() settings {
	return settings{
		maxRetries:      DefaultMaxRetries,
		shouldRetry:     DefaultShouldRetryFn,
		rules:           &defaultRetryPolicy,
		delay:           DefaultDelayFn,
		maxDelay:        defaultMaxDelay,
		bodyBufferLimit: defaultBodyBufferLimit,

		idempotencyKeys:      true,
		idempotencyKeyHeader: DefaultIdempotencyKeyHeader,
		retrySignal:          true,
		attemptHeader:        true,

		budget:      defaultBudget(),
		quotaPacing: true,
	}
}

// A patch changes some of the settings. It is never modified once made,
// and may be applied to the settings of any number of requests at once.
type patch func(*settings)

// option returns the Option that adds p to the transport's patches.
func option(p patch) Option {
	return func(t *Transport) {
		t.patches = append(t.patches, p)
		t.resolved.Store(nil) // resolved again on next use
	}
}

// base returns the transport's own settings: the defaults patched by its
// options, resolved on first use. They must not be modified.
func (t *Transport) base() *settings {
	if s := t.resolved.Load(); s != nil {
		return s // inline: resolved already
	}
	return t.resolve()
}

// resolve is base on first use.
func (t *Transport) resolve() *settings {
	s := defaultSettings()
	for _, p := range t.patches {
		p(&s)
	}
	t.resolved.Store(&s) // two first uses at once store equal settings
	return &s
}
