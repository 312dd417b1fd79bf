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

// DefaultMaxRetries is the number of retries (not attempts) made unless told
// otherwise: a request is sent at most DefaultMaxRetries+1 times.
const DefaultMaxRetries = 3

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
func WithMaxRetries(maxRetries int) Option {
	return func(t *Transport) {
		t.maxRetries = max(maxRetries, 0)
		t.maxRetriesSet = true
	}
}

// WithShouldRetryFn sets the function that decides whether an attempt is
// retried. The default, used also for nil, is DefaultShouldRetryFn.
func WithShouldRetryFn(fn ShouldRetryFn) Option {
	return func(t *Transport) { t.shouldRetryFn = fn }
}

// WithDelayFn sets the function that chooses the wait before each retry. The
// default, used also for nil, is DefaultDelayFn.
func WithDelayFn(fn DelayFn) Option {
	return func(t *Transport) { t.delayFn = fn }
}

// WithPreventRetryWithBody, when true, disables retries for every request
// that has a body. The default is false.
func WithPreventRetryWithBody(preventRetryWithBody bool) Option {
	return func(t *Transport) { t.preventRetryWithBody = preventRetryWithBody }
}

// WithAttemptTimeout bounds each attempt, from sending the request to
// receiving the response headers. It does not bound reading the body of the
// response returned to the caller. An attempt cut by this timeout fails with
// ErrAttemptTimeout and is retried like any timeout (for requests guessed
// idempotent, by default). Zero or negative, the default, means no
// per-attempt timeout.
func WithAttemptTimeout(timeout time.Duration) Option {
	return func(t *Transport) { t.attemptTimeout = max(timeout, 0) }
}

// WithMaxDelay sets the longest wait accepted before a retry. When the delay
// chosen for a retry is longer (a Retry-After of an hour, say), the transport
// does not wait: it returns the last response, or error, at once. Zero or
// negative means the default, 60s.
func WithMaxDelay(maxDelay time.Duration) Option {
	return func(t *Transport) { t.maxDelay = maxDelay }
}

// WithBodyBufferLimit sets how many bytes of a request body without GetBody
// are kept in memory so that the request can be retried. A body larger than
// this is streamed once, unchanged, and its request is not retried; zero or
// negative means such bodies are never buffered (and never retried). The
// default is 1 MiB. Bodies with GetBody (those of http.NewRequest with a
// *bytes.Buffer, *bytes.Reader or *strings.Reader) are never buffered: each
// retry gets a fresh copy from GetBody.
func WithBodyBufferLimit(limit int64) Option {
	return func(t *Transport) {
		t.bodyBufferLimit = max(limit, 0)
		t.bodyBufferLimitSet = true
	}
}

// settings are what one RoundTrip runs with: the transport's options, with the
// request context's overrides applied and defaults filled in.
type settings struct {
	maxRetries           int
	shouldRetry          ShouldRetryFn
	delay                DelayFn
	preventRetryWithBody bool
	attemptTimeout       time.Duration
	maxDelay             time.Duration
	bodyBufferLimit      int64

	idempotencyKeys        bool
	idempotencyKeyHeader   string
	idempotencyKeysHonored bool
	attemptHeader          bool

	hedgeDelay time.Duration // hedging is on when both are positive
	maxHedges  int
	budget     *RetryBudget // nil: no budget
}

// settings resolves what req runs with. Each setting comes from the first
// of: req's context override (Set…), the destination policy that matches
// req (WithDestinations), the transport's option, the default.
func (t *Transport) settings(req *http.Request) settings {
	ctx := req.Context()
	s := settings{
		maxRetries:           DefaultMaxRetries,
		shouldRetry:          t.shouldRetryFn,
		delay:                t.delayFn,
		preventRetryWithBody: t.preventRetryWithBody,
		attemptTimeout:       t.attemptTimeout,
		maxDelay:             t.maxDelay,
		bodyBufferLimit:      defaultBodyBufferLimit,

		idempotencyKeys:        !t.noIdempotencyKeys,
		idempotencyKeyHeader:   t.idempotencyKeyHeader,
		idempotencyKeysHonored: t.idempotencyKeysHonored,
		attemptHeader:          !t.noAttemptHeader,

		hedgeDelay: t.hedgeDelay,
		maxHedges:  t.maxHedges,
		budget:     t.retryBudget(),
	}
	if t.maxRetriesSet {
		s.maxRetries = t.maxRetries
	}
	if t.bodyBufferLimitSet {
		s.bodyBufferLimit = t.bodyBufferLimit
	}
	if t.destinations != nil {
		if p := t.destinations.lookup(req); p != nil {
			p.apply(&s)
		}
	}
	if o, ok := ctx.Value(overridesKey{}).(*overrides); ok {
		o.apply(&s)
	}
	if s.shouldRetry == nil {
		s.shouldRetry = DefaultShouldRetryFn
	}
	if s.delay == nil {
		s.delay = DefaultDelayFn
	}
	if s.maxDelay <= 0 {
		s.maxDelay = defaultMaxDelay
	}
	if s.idempotencyKeyHeader == "" {
		s.idempotencyKeyHeader = DefaultIdempotencyKeyHeader
	}
	return s
}

// overridesKey is the context key of the per-request overrides.
type overridesKey struct{}

// overrides are a patch to a request's settings: those carried by a
// context, and those of a destination's policy (destination.go). All of a
// context's live in one value, so a request costs one context lookup however
// many are set. A stored *overrides is never modified.
type overrides struct {
	set                  overrideSet
	maxRetries           int
	shouldRetry          ShouldRetryFn
	delay                DelayFn
	preventRetryWithBody bool
	attemptTimeout       time.Duration

	idempotencyKeys        bool
	idempotencyKeysHonored bool

	hedgeDelay time.Duration
	maxHedges  int
	budget     *RetryBudget // with setBudget: nil means off
}

type overrideSet uint8

const (
	setMaxRetries overrideSet = 1 << iota
	setPreventRetryWithBody
	setAttemptTimeout
	setIdempotencyKeys
	setIdempotencyKeysHonored
	setHedging
	setBudget // only a destination's policy sets it
)

func (o *overrides) apply(s *settings) {
	if o.set&setMaxRetries != 0 {
		s.maxRetries = o.maxRetries
	}
	if o.shouldRetry != nil {
		s.shouldRetry = o.shouldRetry
	}
	if o.delay != nil {
		s.delay = o.delay
	}
	if o.set&setPreventRetryWithBody != 0 {
		s.preventRetryWithBody = o.preventRetryWithBody
	}
	if o.set&setAttemptTimeout != 0 {
		s.attemptTimeout = o.attemptTimeout
	}
	if o.set&setIdempotencyKeys != 0 {
		s.idempotencyKeys = o.idempotencyKeys
	}
	if o.set&setIdempotencyKeysHonored != 0 {
		s.idempotencyKeysHonored = o.idempotencyKeysHonored
	}
	if o.set&setHedging != 0 {
		s.hedgeDelay, s.maxHedges = o.hedgeDelay, o.maxHedges
	}
	if o.set&setBudget != 0 {
		s.budget = o.budget
	}
}

// withOverride returns a context carrying a copy of ctx's overrides changed
// by f.
func withOverride(ctx context.Context, f func(*overrides)) context.Context {
	var o overrides
	if prev, ok := ctx.Value(overridesKey{}).(*overrides); ok {
		o = *prev
	}
	f(&o)
	return context.WithValue(ctx, overridesKey{}, &o)
}

// SetMaxRetries returns a context that makes requests sent with it use
// maxRetries instead of the transport's setting. A negative value is treated
// as 0.
func SetMaxRetries(ctx context.Context, maxRetries int) context.Context {
	return withOverride(ctx, func(o *overrides) {
		o.maxRetries = max(maxRetries, 0)
		o.set |= setMaxRetries
	})
}

// SetShouldRetryFn returns a context that makes requests sent with it use fn
// instead of the transport's ShouldRetryFn. A nil fn removes an earlier
// override.
func SetShouldRetryFn(ctx context.Context, fn ShouldRetryFn) context.Context {
	return withOverride(ctx, func(o *overrides) { o.shouldRetry = fn })
}

// SetDelayFn returns a context that makes requests sent with it use fn
// instead of the transport's DelayFn. A nil fn removes an earlier override.
func SetDelayFn(ctx context.Context, fn DelayFn) context.Context {
	return withOverride(ctx, func(o *overrides) { o.delay = fn })
}

// SetPreventRetryWithBody returns a context that makes requests sent with it
// use preventRetryWithBody instead of the transport's setting.
func SetPreventRetryWithBody(ctx context.Context, preventRetryWithBody bool) context.Context {
	return withOverride(ctx, func(o *overrides) {
		o.preventRetryWithBody = preventRetryWithBody
		o.set |= setPreventRetryWithBody
	})
}

// SetAttemptTimeout returns a context that makes requests sent with it use
// timeout per attempt instead of the transport's setting; zero or negative
// means no per-attempt timeout.
func SetAttemptTimeout(ctx context.Context, timeout time.Duration) context.Context {
	return withOverride(ctx, func(o *overrides) {
		o.attemptTimeout = max(timeout, 0)
		o.set |= setAttemptTimeout
	})
}
