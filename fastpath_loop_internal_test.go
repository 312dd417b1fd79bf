package retryhttp

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
