package retryhttp

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
)

// Per-request settings: a request runs with the transport's settings
// (options.go) unless a Policy applies to it (WithPolicyFunc) or its context
// carries options (SetOptions and the Set… of justinrixx/retryhttp v1).
// Then it runs with a copy of them patched, in this order, by the policy and
// by the context's options: for each setting, the context's wins over the
// policy's, the policy's over the transport's option, and that over the
// default.

// Policy is a set of request options compiled once, to be applied to many
// requests: the policy of a destination, of a tenant, of a class of calls.
// A transport applies the Policy its policy function returns for a request
// (WithPolicyFunc). A Policy is never modified once made and is safe for
// concurrent use. A nil *Policy, or the zero value, sets nothing.
type Policy struct {
	patches []patch
}

// NewPolicy compiles opts into a Policy: the settings they would give a
// Transport, applied in order, so that a later option replaces an earlier
// one of the same setting. The request options are those that set what a
// request runs with: WithMaxRetries, WithShouldRetryFn,
// WithCustomizedShouldRetryFn, WithDelayFn, WithMaxDelay,
// WithPreventRetryWithBody, WithAttemptTimeout, WithBodyBufferLimit,
// WithHedging, WithAdaptiveHedging, WithRetryBudget, WithHoldDuringPause,
// WithErrorOnGiveUp,
// WithRetrySignal, WithAttemptHeader and the idempotency key options.
//
// Options that configure the Transport itself rather than a request
// (WithTransport, WithClock, WithCircuitBreaker, WithCookieJar,
// WithPrepareRetry, WithDeadlineHeader, WithLogger, the hooks,
// WithPolicyFunc) have no per-request meaning: NewPolicy ignores them. A nil
// option is ignored too.
func NewPolicy(opts ...Option) *Policy {
	var scratch Transport // collects the patches; the rest is dropped
	for _, o := range opts {
		if o != nil {
			o(&scratch)
		}
	}
	return &Policy{patches: scratch.patches}
}

// apply sets in s what the policy sets.
func (p *Policy) apply(s *settings) {
	for _, patch := range p.patches {
		patch(s)
	}
}

// WithPolicyFunc makes the transport ask fn, once per request, for the
// Policy of the request, and run the request with it: a setting comes from
// the first of the context's options (SetOptions), the Policy, the
// transport's options and the default. fn returning nil means no policy for
// that request; a nil fn, the default, means none for any. fn is called with
// the request as the caller sent it; it must be safe for concurrent use,
// must not modify the request, and should return a Policy made in advance
// (NewPolicy), not one per call. The package
// github.com/seed2409de8f/retryhttp/destinations provides such a function:
// policies by destination host, read from a file and reloadable.
func WithPolicyFunc(fn func(*http.Request) *Policy) Option {
	return func(t *Transport) { t.policyOf = fn }
}

// SetOptions returns a context that makes requests sent with it run with
// the request options among opts (NewPolicy says which they are; the others
// are ignored), whatever the transport's options and policy say. Options
// set on ctx before stay unless opts sets the same setting: for each, the
// last one set wins.
func SetOptions(ctx context.Context, opts ...Option) context.Context {
	p := NewPolicy(opts...)
	if len(p.patches) == 0 {
		return ctx
	}
	return withOverride(ctx, "", p.patches...)
}

// settings returns what req runs with: the transport's settings, or, when a
// Policy applies to req (WithPolicyFunc) or its context carries options,
// own, made a copy of them patched by the policy and then by the context's
// options. A request that neither concerns costs no copy and, in a process
// that never set options on a context, no context lookup. The settings
// returned must not be modified.
func (t *Transport) settings(req *http.Request, own *settings) *settings {
	s := t.base()
	if t.policyOf == nil && !overridesMade.Load() {
		return s // no policy, and no context has options
	}
	return t.patched(req, s, own)
}

// patched is settings for a transport with a policy function, or in a
// process where some context has options: s, the transport's settings, or
// own, made a copy of them patched.
func (t *Transport) patched(req *http.Request, s, own *settings) *settings {
	var p *Policy
	if t.policyOf != nil {
		p = t.policyOf(req)
	}
	o := contextOverrides(req.Context())
	if (p == nil || len(p.patches) == 0) && o == nil {
		return s
	}
	c := patching.Get().(*settings)
	*c = *s
	if p != nil {
		p.apply(c)
	}
	if o != nil {
		o.apply(c)
	}
	*own = *c
	*c = settings{}
	patching.Put(c)
	return own
}

// patching holds the copies of the settings that patches are applied to. A
// patch is a function, so what it is given escapes: a copy made per request
// would be allocated.
var patching = sync.Pool{New: func() any { return new(settings) }}

// overridesKey is the context key of the per-request options.
type overridesKey struct{}

// overrides are the patches a context carries, in the order they were set.
// Those of a Set… of justinrixx/retryhttp v1 are kept under the name of
// their setting, so that a later Set… of one setting replaces an earlier
// one and a nil function removes it; those of SetOptions have no name (a
// later patch of the same setting overrides them as it is applied after
// them). All of a context's live in one value, so a request costs one
// context lookup however many are set. A stored *overrides is never
// modified.
type overrides []namedPatch

type namedPatch struct {
	name string // "": SetOptions'
	p    patch
}

// overridesMade records that some context was given options: until then,
// requests skip the context lookup.
var overridesMade atomic.Bool

// contextOverrides returns the overrides ctx carries, nil if none.
func contextOverrides(ctx context.Context) *overrides {
	if !overridesMade.Load() {
		return nil
	}
	o, _ := ctx.Value(overridesKey{}).(*overrides)
	return o
}

func (o *overrides) apply(s *settings) {
	for _, np := range *o {
		np.p(s)
	}
}

// withOverride returns a context carrying ctx's overrides followed by ps.
// A named setting's earlier patches are dropped first: with no ps, the
// setting is no longer patched.
func withOverride(ctx context.Context, name string, ps ...patch) context.Context {
	overridesMade.Store(true)
	var o overrides
	if prev, _ := ctx.Value(overridesKey{}).(*overrides); prev != nil {
		o = make(overrides, 0, len(*prev)+len(ps))
		for _, np := range *prev {
			if name == "" || np.name != name {
				o = append(o, np)
			}
		}
	}
	for _, p := range ps {
		o = append(o, namedPatch{name, p})
	}
	return context.WithValue(ctx, overridesKey{}, &o)
}
