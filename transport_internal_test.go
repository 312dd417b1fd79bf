package retryhttp

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/hop"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The fast paths of a request answered below 400 at once (issue 13), each
// shown to be taken and to change no outcome.

// countingCtx counts the lookups of the overrides' key.
type countingCtx struct {
	context.Context
	lookups *atomic.Int32
}

func (c countingCtx) Value(key any) any {
	if _, ok := key.(overridesKey); ok {
		c.lookups.Add(1)
	}
	return c.Context.Value(key)
}

// okServer answers every request 200 and counts them.
func okServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func getOK(t *testing.T, tr *Transport, ctx context.Context, url string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	res, err := tr.RoundTrip(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	assert.Equal(t, http.StatusOK, res.StatusCode)
}

// TestSettingsResolvedOncePerTransport checks that a request without
// overrides or a destination policy runs with the transport's own settings,
// resolved once, and that an option applied later is seen.
func TestSettingsResolvedOncePerTransport(t *testing.T) {
	tr := New(WithMaxRetries(2))
	req := httptest.NewRequest(http.MethodGet, "http://a.test/", nil)
	var own settings
	s := tr.settings(req, &own)
	assert.Same(t, tr.resolved.Load(), s, "the transport's own settings, not a copy")
	assert.Same(t, s, tr.settings(req, &own), "resolved once")
	assert.Equal(t, 2, s.maxRetries)

	WithMaxRetries(5)(tr)
	assert.Equal(t, 5, tr.settings(req, &own).maxRetries, "an option applied later is seen")

	ctx := SetMaxRetries(context.Background(), 1)
	s = tr.settings(req.WithContext(ctx), &own)
	assert.Same(t, &own, s, "overrides patch a copy")
	assert.Equal(t, 1, s.maxRetries)
	assert.Equal(t, 5, tr.base().maxRetries, "the transport's own are not patched")
}

// TestContextLookupOnlyOnceOverridesExist checks that requests skip the
// context lookup of overrides until some context was given one, and that
// the first override made is honoured. It changes a process-wide flag, so
// it must not run in parallel with other tests.
func TestContextLookupOnlyOnceOverridesExist(t *testing.T) {
	was := overridesMade.Load()
	t.Cleanup(func() { overridesMade.Store(was) })
	overridesMade.Store(false)

	srv, served := okServer(t)
	tr := New(WithTransport(srv.Client().Transport))
	var lookups atomic.Int32
	getOK(t, tr, countingCtx{context.Background(), &lookups}, srv.URL)
	assert.Zero(t, lookups.Load(), "no override was ever made: no lookup")

	ctx := SetMaxRetries(context.Background(), 0) // the first override
	assert.True(t, overridesMade.Load())
	getOK(t, tr, countingCtx{ctx, &lookups}, srv.URL)
	assert.Equal(t, int32(1), lookups.Load(), "one lookup per request once overrides exist")
	var own settings
	req := httptest.NewRequest(http.MethodGet, srv.URL, nil).WithContext(ctx)
	assert.Equal(t, 0, tr.settings(req, &own).maxRetries, "the override is honoured")
	assert.Equal(t, int32(2), served.Load())
}

// TestJudgeSkipsOwnPolicyOnAnswers checks that judge does not call a policy
// of this package about a response below 400, and calls any other policy,
// and any policy about a response of 400 or more.
func TestJudgeSkipsOwnPolicyOnAnswers(t *testing.T) {
	var calls int
	counting := func(Attempt) bool { calls++; return false }
	req := httptest.NewRequest(http.MethodGet, "http://a.test/", nil)
	for _, tt := range []struct {
		give      int
		own       bool
		wantCalls int
	}{
		{200, true, 0}, {204, true, 0}, {304, true, 0}, {399, true, 0},
		{200, false, 1}, {304, false, 1},
		{400, true, 1}, {503, true, 1},
	} {
		t.Run(strconv.Itoa(tt.give)+"/"+strconv.FormatBool(tt.own), func(t *testing.T) {
			calls = 0
			s := defaultSettings()
			s.shouldRetry = counting
			if !tt.own {
				s.rules = nil
			}
			res := &http.Response{StatusCode: tt.give, Header: http.Header{}}
			s.judge(&Attempt{Count: 1, Req: req, Res: res}, replayBody(true), 1)
			assert.Equal(t, tt.wantCalls, calls)
		})
	}
}

// TestJudgeFastPathSameOutcome checks that for every status below 400, with
// the caller's context live or done, with or without headers that would
// matter to a failure, the fast path judges as asking the default policy
// does; and that the settings of each way of choosing a policy say whether
// the policy is this package's.
func TestJudgeFastPathSameOutcome(t *testing.T) {
	live := httptest.NewRequest(http.MethodPost, "http://a.test/", nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := live.WithContext(ctx)
	headers := []http.Header{{}, {"Retry-After": {"1"}, RetrySignalHeader: {RetrySignalNoRetry}}}
	for code := 100; code < 400; code++ {
		for _, req := range []*http.Request{live, done} {
			for _, h := range headers {
				a := Attempt{Count: 1, Req: req, Res: &http.Response{StatusCode: code, Header: h}}
				fast, slow := defaultSettings(), defaultSettings()
				slow.rules = nil
				for _, sent := range []int{1, 4} {
					require.Equal(t, slow.judge(&a, replayBody(true), sent), fast.judge(&a, replayBody(true), sent), "status %d", code)
				}
			}
		}
	}

	policy := func(opts ...Option) bool { return New(opts...).base().rules != nil }
	assert.True(t, policy(), "the default")
	assert.True(t, policy(WithShouldRetryFn(nil)), "nil: the default")
	assert.False(t, policy(WithShouldRetryFn(func(Attempt) bool { return true })), "the caller's")
	assert.False(t, policy(WithShouldRetryFn(DefaultShouldRetryFn)), "a func value is not told apart: asked")
	assert.True(t, policy(WithCustomizedShouldRetryFn(CustomizedShouldRetryFnOptions{})), "rules given")
	codes := NewPolicy(WithCustomizedShouldRetryFn(CustomizedShouldRetryFnOptions{RetryableStatusCodes: []int{500}}))
	var own settings
	s := New(WithPolicyFunc(func(*http.Request) *Policy { return codes }), WithShouldRetryFn(func(Attempt) bool { return true })).
		settings(httptest.NewRequest(http.MethodGet, "http://a.test/", nil), &own)
	assert.NotNil(t, s.rules, "a policy's status codes: the package's rules")
}

// TestFastPathStillSettles checks that the successes of the fast path are
// recorded by the budget as every success is: each deposits into the
// host's bucket, and the latest keeps the host alive (a host in an outage
// parks retries only if it had a success within MaxWait).
func TestFastPathStillSettles(t *testing.T) {
	srv, _ := okServer(t)
	b := budgetWithOneToken(srv.URL, RetryBudgetOptions{MaxWait: 300 * time.Millisecond})
	time.Sleep(400 * time.Millisecond) // more than MaxWait
	tr := New(WithTransport(srv.Client().Transport), WithRetryBudget(b))
	for range 5 {
		getOK(t, tr, context.Background(), srv.URL)
	}
	assert.InDelta(t, 1.5, HostOf(b, mustRequest(srv.URL)).Tokens, 1e-9, "five successes deposited")
	outage(b, srv.URL)
	assert.True(t, parks(b, srv.URL), "the latest success is recent: not dead")
}

// TestFastPathReportsToHooksAndBreaker checks that a success skips the
// reporting only when no one listens: with hooks and a breaker, the hooks
// still get the stop and the circuit stays closed; and that Pushback is not
// marked by a success.
func TestFastPathReportsToHooksAndBreaker(t *testing.T) {
	srv, _ := okServer(t)
	var stops []StopReason
	var changes atomic.Int32
	tr := New(WithTransport(srv.Client().Transport),
		WithHooks(Hooks{
			OnRetryDecision: func(d Decision) {
				if !d.Retry {
					stops = append(stops, d.Reason)
				}
			},
			OnCircuitStateChange: func(string, CircuitState, CircuitState) { changes.Add(1) },
		}),
		WithCircuitBreaker(CircuitBreakerSettings{}))
	getOK(t, tr, context.Background(), srv.URL)
	assert.Equal(t, []StopReason{StopSuccess}, stops)
	assert.Zero(t, changes.Load())

	var outcome hop.Outcome // what inbound.Pushback reads
	ctx := hop.WithOutcome(context.Background(), &outcome)
	getOK(t, New(WithTransport(srv.Client().Transport)), ctx, srv.URL)
	assert.False(t, outcome.GaveUp(), "a success tells Pushback nothing")
}

// TestOverridesAndDestinationOnFastPath checks that the settings of a
// request with overrides or a destination policy are patched, not the
// transport's: each request retries as its own settings say.
func TestOverridesAndDestinationOnFastPath(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	noRetries := NewPolicy(WithMaxRetries(0))
	policy := WithPolicyFunc(func(*http.Request) *Policy { return noRetries })
	for _, tt := range []struct {
		name string
		tr   *Transport
		ctx  context.Context
		want int32
	}{
		{"options", New(WithMaxRetries(2)), context.Background(), 3},
		{"override", New(WithMaxRetries(2)), SetMaxRetries(context.Background(), 1), 2},
		{"policy", New(WithMaxRetries(2), policy), context.Background(), 1},
		{"override over policy", New(policy), SetMaxRetries(context.Background(), 1), 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n.Store(0)
			WithTransport(srv.Client().Transport)(tt.tr)
			WithRetryBudget(nil)(tt.tr)
			withNoWaits(tt.tr)
			req, err := http.NewRequestWithContext(tt.ctx, http.MethodGet, srv.URL, nil)
			require.NoError(t, err)
			res, err := tt.tr.RoundTrip(req)
			require.NoError(t, err)
			res.Body.Close()
			assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
			assert.Equal(t, tt.want, n.Load())
		})
	}
}

// TestKeyedGuessFollowsRules checks that the idempotency guessed before
// sending follows the methods of WithCustomizedShouldRetryFn's rules, and
// the default methods for a function of the caller's, whatever it does;
// and that keys are injected by the default methods either way.
func TestKeyedGuessFollowsRules(t *testing.T) {
	retryAll := func(Attempt) bool { return true }
	post := CustomizedShouldRetryFnOptions{IdempotentMethods: []string{http.MethodPost}}
	for _, tt := range []struct {
		name     string
		opt      Option
		method   string
		guessed  bool
		injected bool
	}{
		{"default GET", nil, http.MethodGet, true, false},
		{"default POST", nil, http.MethodPost, false, true},
		{"caller's fn GET", WithShouldRetryFn(retryAll), http.MethodGet, true, false},
		{"caller's fn POST", WithShouldRetryFn(retryAll), http.MethodPost, false, true},
		{"rules POST only: POST", WithCustomizedShouldRetryFn(post), http.MethodPost, true, true},
		{"rules POST only: GET", WithCustomizedShouldRetryFn(post), http.MethodGet, false, false},
		{"rules without methods: PUT", WithCustomizedShouldRetryFn(CustomizedShouldRetryFnOptions{IdempotentMethods: []string{}}), http.MethodPut, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := New(tt.opt).base()
			req := httptest.NewRequest(tt.method, "http://a.test/", nil)
			f := scanHeader(req.Header)
			sent, idem, err := s.keyed(req, &f)
			require.NoError(t, err)
			assert.Equal(t, tt.guessed, idem.guessed)
			assert.Equal(t, tt.injected, idem.injected)
			assert.Equal(t, tt.injected, IdempotencyKey(sent) != "")
			assert.Empty(t, IdempotencyKey(req), "the caller's request is untouched")
		})
	}
}

// The retry loop's shortcuts for a request's first attempt (transport.go,
// body.go), shown to answer as the full path does.

// TestFirstAttemptFastPathSameOutcome sends a request answered 200 and 304
// (final by the fast path), 404 (not retried, by the policy) and 503 then
// 200 (retried),
// through transports without hooks (the fast path) and with them, and
// checks that both return the same response and stop reason, that the
// hooks see one attempt per attempt, and that the budget records the
// successes in either case.
func TestFirstAttemptFastPathSameOutcome(t *testing.T) {
	for _, tt := range []struct {
		name     string
		statuses []int
		want     int
		attempts int
		stop     StopReason
		tokens   float64 // left of the one: what settle deposited, and withdrew
	}{
		{"200", []int{200}, 200, 1, StopSuccess, 1.1},
		{"304", []int{304}, 304, 1, StopSuccess, 1.1},
		{"404", []int{404}, 404, 1, StopNotRetryable, 1.1},
		// The first attempt answered with a failure deposits, the retry
		// takes the token, its success deposits and gives the token back.
		{"503 then 200", []int{503, 200}, 200, 2, StopSuccess, 1.2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var n atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				i := min(int(n.Add(1))-1, len(tt.statuses)-1)
				w.WriteHeader(tt.statuses[i])
			}))
			t.Cleanup(srv.Close)
			var stops []StopReason
			var attempts int
			withHooks := []Option{
				WithHooks(Hooks{
					OnAttempt: func(AttemptInfo) { attempts++ },
					OnRetryDecision: func(d Decision) {
						if !d.Retry {
							stops = append(stops, d.Reason)
						}
					},
				}),
			}
			for _, hooked := range []bool{false, true} {
				n.Store(0)
				b := budgetWithOneToken(srv.URL, RetryBudgetOptions{})
				opts := []Option{WithTransport(srv.Client().Transport), WithRetryBudget(b)}
				if hooked {
					opts = append(opts, withHooks...)
				}
				tr := New(opts...)
				withNoWaits(tr)
				res, err := (&http.Client{Transport: tr}).Get(srv.URL)
				require.NoError(t, err)
				res.Body.Close()
				assert.Equal(t, tt.want, res.StatusCode, "hooks %v", hooked)
				assert.Equal(t, int32(tt.attempts), n.Load(), "hooks %v", hooked)
				assert.InDelta(t, tt.tokens, HostOf(b, mustRequest(srv.URL)).Tokens, 1e-9, "hooks %v: what the budget recorded", hooked)
			}
			assert.Equal(t, tt.attempts, attempts, "the hooks see every attempt")
			assert.Equal(t, []StopReason{tt.stop}, stops)
		})
	}
}

// TestFirstAttemptSentAsItIs checks the first attempt's shortcut in
// replay.request: a request without a body to replace and without the
// caller's AttemptHeader (under any case of its name) is sent as it is;
// any other first attempt is a copy without the caller's header, as
// before; and a request without headers never needs a lookup for it.
func TestFirstAttemptSentAsItIs(t *testing.T) {
	s := defaultSettings()
	for _, tt := range []struct {
		name   string
		header http.Header
		asIs   bool
	}{
		{"no header", nil, true},
		{"empty header", http.Header{}, true},
		{"other headers", http.Header{"Accept": {"*/*"}}, true},
		{"caller's AttemptHeader", http.Header{AttemptHeader: {"7"}}, false},
		{"caller's AttemptHeader, lower case", http.Header{"retry-attempt": {"7"}}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "http://a.test/", nil)
			req.Header = tt.header
			before := tt.header.Clone()
			f := scanHeader(req.Header)
			got, idem, err := s.keyed(req, &f)
			require.NoError(t, err)
			var r replay
			r.init(got, &s, &f)
			sent, err := r.request(1)
			require.NoError(t, err)
			if tt.asIs {
				assert.Same(t, req, sent)
			} else {
				assert.NotSame(t, req, sent)
				_, has := lookupHeader(sent.Header, AttemptHeader)
				assert.False(t, has, "the caller's AttemptHeader is not sent")
				assert.Equal(t, before, req.Header, "the caller's request is untouched")
			}
			assert.True(t, idem.guessed)
			second, err := r.request(2)
			require.NoError(t, err)
			assert.Equal(t, []string{"2"}, second.Header[AttemptHeader], "a retry is numbered")
		})
	}
}
