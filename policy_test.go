package retryhttp_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// byHost returns a policy function that gives the requests to host the
// policy p, and no policy to the others.
func byHost(host string, p *retryhttp.Policy) retryhttp.Option {
	return retryhttp.WithPolicyFunc(func(req *http.Request) *retryhttp.Policy {
		if req.URL.Hostname() == host {
			return p
		}
		return nil
	})
}

// TestPolicyPrecedence checks the order documented in docs/options.md: the
// context's options, the policy, the transport's option, the default.
func TestPolicyPrecedence(t *testing.T) {
	p := retryhttp.NewPolicy(retryhttp.WithMaxRetries(1), retryhttp.WithAttemptTimeout(time.Second),
		retryhttp.WithHedging(time.Millisecond, 2), retryhttp.WithRetryBudget(nil))
	withOption := retryhttp.New(retryhttp.WithMaxRetries(5), retryhttp.WithAttemptTimeout(3*time.Second),
		retryhttp.WithHedging(time.Hour, 1), byHost("policy.test", p))
	withoutOption := retryhttp.New(byHost("policy.test", p))
	override := func(ctx context.Context) context.Context {
		ctx = retryhttp.SetMaxRetries(ctx, 7)
		return retryhttp.SetOptions(ctx, retryhttp.WithAttemptTimeout(4*time.Second), retryhttp.WithHedging(0, 0))
	}
	tests := []struct {
		name        string
		tr          *retryhttp.Transport
		url         string
		ctx         func(context.Context) context.Context
		wantRetries int
		wantTimeout time.Duration
		wantHedges  int
		wantBudget  bool
	}{
		{"context beats policy", withOption, "http://policy.test/", override, 7, 4 * time.Second, 0, false},
		{"policy beats option", withOption, "http://policy.test/", nil, 1, time.Second, 2, false},
		{"option without a policy", withOption, "http://other.test/", nil, 5, 3 * time.Second, 1, true},
		{"default without a policy", withoutOption, "http://other.test/", nil, retryhttp.DefaultMaxRetries, 0, 0, true},
		{"context without a policy", withoutOption, "http://other.test/", override, 7, 4 * time.Second, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.ctx != nil {
				ctx = tt.ctx(ctx)
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, tt.url, nil)
			require.NoError(t, err)
			s := retryhttp.SettingsFor(tt.tr, req)
			assert.Equal(t, tt.wantRetries, s.MaxRetries)
			assert.Equal(t, tt.wantTimeout, s.AttemptTimeout)
			assert.Equal(t, tt.wantHedges, s.MaxHedges)
			assert.Equal(t, tt.wantBudget, s.Budget != nil)
		})
	}
}

// TestSetOptionsLaterWins checks that, on one context, the last setting of
// each setting wins, whether SetOptions or a Set… of v1 set it, and that the
// other settings stay.
func TestSetOptionsLaterWins(t *testing.T) {
	tr := retryhttp.New(retryhttp.WithMaxRetries(5))
	bg := context.Background()
	zero := func(retryhttp.Attempt) time.Duration { return 0 }
	tests := []struct {
		name        string
		give        context.Context
		wantRetries int
		wantTimeout time.Duration
	}{
		{"none", retryhttp.SetOptions(bg), 5, 0},
		{"nil options", retryhttp.SetOptions(bg, nil, nil), 5, 0},
		{"later in one call", retryhttp.SetOptions(bg, retryhttp.WithMaxRetries(1), retryhttp.WithMaxRetries(2)), 2, 0},
		{"later call", retryhttp.SetOptions(retryhttp.SetOptions(bg, retryhttp.WithMaxRetries(1),
			retryhttp.WithAttemptTimeout(time.Second)), retryhttp.WithMaxRetries(2)), 2, time.Second},
		{"Set… after SetOptions", retryhttp.SetMaxRetries(retryhttp.SetOptions(bg, retryhttp.WithMaxRetries(1)), 3), 3, 0},
		{"SetOptions after Set…", retryhttp.SetOptions(retryhttp.SetMaxRetries(bg, 3), retryhttp.WithMaxRetries(1)), 1, 0},
		{"negative clamped", retryhttp.SetOptions(bg, retryhttp.WithMaxRetries(-4)), 0, 0},
		{"a removed Set… keeps SetOptions'", retryhttp.SetDelayFn(retryhttp.SetOptions(
			retryhttp.SetDelayFn(bg, zero), retryhttp.WithMaxRetries(1)), nil), 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := settings(tr, tt.give)
			assert.Equal(t, tt.wantRetries, s.MaxRetries)
			assert.Equal(t, tt.wantTimeout, s.AttemptTimeout)
		})
	}
	ctx := retryhttp.SetOptions(bg)
	assert.Equal(t, bg, ctx, "no request option: the context itself")
}

// TestPolicyIgnoresTransportOptions checks that the options that configure
// a Transport itself mean nothing in a Policy or on a context: the request
// is still sent through the transport's own base transport, to the real
// server, as the transport's options say.
func TestPolicyIgnoresTransportOptions(t *testing.T) {
	srv := testkit.NewCountingServer(t, testkit.Always(http.StatusServiceUnavailable))
	refuse := roundTripFunc(func(*http.Request) (*http.Response, error) {
		return nil, errors.New("the policy's base transport was used")
	})
	var hooked int
	transportOnly := []retryhttp.Option{
		retryhttp.WithTransport(refuse),
		retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{}),
		retryhttp.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		retryhttp.WithHooks(retryhttp.Hooks{OnAttempt: func(retryhttp.AttemptInfo) { hooked++ }}),
		retryhttp.WithPrepareRetry(func(*http.Request) error { return errors.New("prepared") }),
		retryhttp.WithDeadlineHeader(true),
		retryhttp.WithPolicyFunc(func(*http.Request) *retryhttp.Policy { return nil }),
		nil,
	}
	p := retryhttp.NewPolicy(append(transportOnly, retryhttp.WithMaxRetries(1))...)
	tr := testkit.NewTransport(t, testkit.NoDelay, testkit.UnlimitedBudget, byHost("127.0.0.1", p))
	ctx := retryhttp.SetOptions(context.Background(), transportOnly...)

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	res, err := tr.RoundTrip(req)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	assert.EqualValues(t, 2, srv.Attempts.Load(), "the policy's one retry")
	assert.Zero(t, hooked, "the policy's hook")
	assert.Equal(t, ctx, retryhttp.SetOptions(ctx, transportOnly...), "nothing to set")
}

// TestPolicyFuncPerRequest sends requests to one loopback server that
// always fails: the policy function gives each its own number of retries,
// and a nil Policy leaves the transport's.
func TestPolicyFuncPerRequest(t *testing.T) {
	srv := testkit.NewCountingServer(t, testkit.Always(http.StatusServiceUnavailable))
	policies := map[string]*retryhttp.Policy{
		"none": retryhttp.NewPolicy(retryhttp.WithMaxRetries(0)),
		"one":  retryhttp.NewPolicy(retryhttp.WithMaxRetries(1)),
		"zero": {},
	}
	var asked int
	tr := testkit.NewTransport(t, testkit.NoDelay, testkit.UnlimitedBudget, retryhttp.WithMaxRetries(2),
		retryhttp.WithPolicyFunc(func(req *http.Request) *retryhttp.Policy {
			asked++
			return policies[req.Header.Get("X-Class")]
		}))
	for _, tt := range []struct {
		class string
		want  int64
	}{{"none", 1}, {"one", 2}, {"zero", 3}, {"", 3}} {
		srv.Attempts.Store(0)
		req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		req.Header.Set("X-Class", tt.class)
		res, err := tr.RoundTrip(req)
		require.NoError(t, err)
		res.Body.Close()
		assert.Equal(t, tt.want, srv.Attempts.Load(), "class %q", tt.class)
	}
	assert.Equal(t, 4, asked, "once per request")
}
