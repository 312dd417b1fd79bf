package retryhttp_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tokenServer answers 503 to a request whose Authorization is not "Bearer
// fresh", 200 otherwise, and records what each request carried.
type tokenServer struct {
	*testkit.CountingServer
	mu     sync.Mutex
	auths  []string
	bodies []string
}

func newTokenServer(t *testing.T) *tokenServer {
	s := &tokenServer{}
	s.CountingServer = testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.auths = append(s.auths, r.Header.Get("Authorization"))
		s.bodies = append(s.bodies, string(b))
		s.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer fresh" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	return s
}

func TestPrepareRetryRefreshesToken(t *testing.T) {
	tests := []struct {
		name    string
		method  string
		body    string
		options []retryhttp.Option
	}{
		{"GET", http.MethodGet, "", nil},
		{"GET without attempt header", http.MethodGet, "", []retryhttp.Option{retryhttp.WithAttemptHeader(false)}},
		{"PUT with body", http.MethodPut, "payload", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newTokenServer(t)
			var calls []string
			prepare := func(r *http.Request) error {
				calls = append(calls, r.Header.Get(retryhttp.AttemptHeader))
				r.Header.Set("Authorization", "Bearer fresh")
				return nil
			}
			opts := append([]retryhttp.Option{testkit.NoDelay, testkit.UnlimitedBudget, retryhttp.WithPrepareRetry(prepare)}, tt.options...)
			tr := testkit.NewTransport(t, opts...)
			var body io.Reader
			if tt.body != "" {
				// No GetBody: the transport buffers it.
				body = io.NopCloser(strings.NewReader(tt.body))
			}
			req, err := http.NewRequest(tt.method, srv.URL, body)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer stale")
			res, err := (&http.Client{Transport: tr}).Do(req)
			require.NoError(t, err)
			defer res.Body.Close()
			assert.Equal(t, http.StatusOK, res.StatusCode)

			assert.Equal(t, []string{"Bearer stale", "Bearer fresh"}, srv.auths)
			assert.Equal(t, []string{tt.body, tt.body}, srv.bodies, "the body of the retry is whole")
			assert.Len(t, calls, 1, "the hook runs before the retry only")
			assert.Equal(t, "Bearer stale", req.Header.Get("Authorization"), "the caller's request is untouched")
		})
	}
}

func TestPrepareRetryError(t *testing.T) {
	srv := testkit.NewCountingServer(t, testkit.Always(http.StatusServiceUnavailable))
	errSigner := errors.New("signer unavailable")
	var stops []retryhttp.Decision
	tr := testkit.NewTransport(t, testkit.NoDelay, testkit.UnlimitedBudget,
		retryhttp.WithPrepareRetry(func(*http.Request) error { return errSigner }),
		retryhttp.WithHooks(retryhttp.Hooks{OnRetryDecision: func(d retryhttp.Decision) {
			if !d.Retry {
				stops = append(stops, d)
			}
		}}))
	res, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if res != nil {
		res.Body.Close()
	}
	require.Error(t, err)
	assert.Nil(t, res)
	assert.ErrorIs(t, err, retryhttp.ErrPrepareRetry)
	assert.ErrorIs(t, err, errSigner)
	assert.Contains(t, err.Error(), "retryhttp: preparing a retry (attempt 2): signer unavailable")
	assert.EqualValues(t, 1, srv.Attempts.Load(), "the retry was not sent")
	require.Len(t, stops, 1)
	assert.Equal(t, retryhttp.StopError, stops[0].Reason)
}

// TestPrepareRetryHedged checks that a hedge is prepared like a retry, and
// that a failing hook ends a hedged request, its first attempt included.
func TestPrepareRetryHedged(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(map[bool]string{false: "ok", true: "error"}[fail], func(t *testing.T) {
			srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
				// Attempt 1 (no attempt header, whether or not it
				// arrives first) is slow: hedged.
				if r.Header.Get(retryhttp.AttemptHeader) == "" {
					<-r.Context().Done()
					return
				}
				_, _ = io.WriteString(w, r.Header.Get("Authorization"))
			})
			var mu sync.Mutex
			var seen []string
			errHook := errors.New("no token")
			tr := testkit.NewTransport(t, testkit.UnlimitedBudget, retryhttp.WithHedging(5*time.Millisecond, 1),
				retryhttp.WithPrepareRetry(func(r *http.Request) error {
					mu.Lock()
					defer mu.Unlock()
					seen = append(seen, r.Header.Get(retryhttp.AttemptHeader))
					if fail {
						return errHook
					}
					r.Header.Set("Authorization", "hedge")
					return nil
				}))
			res, err := (&http.Client{Transport: tr}).Get(srv.URL)
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, []string{"2"}, seen)
			if fail {
				assert.ErrorIs(t, err, errHook)
				assert.ErrorIs(t, err, retryhttp.ErrPrepareRetry)
				assert.Nil(t, res)
				return
			}
			require.NoError(t, err)
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			assert.Equal(t, "hedge", string(b))
		})
	}
}

// TestPrepareRetryNotCalledWithoutRetry checks that a request answered at
// once never reaches the hook.
func TestPrepareRetryNotCalledWithoutRetry(t *testing.T) {
	srv := testkit.NewCountingServer(t, testkit.Always(http.StatusOK))
	called := false
	tr := testkit.NewTransport(t, retryhttp.WithPrepareRetry(func(*http.Request) error { called = true; return nil }))
	res, err := (&http.Client{Transport: tr}).Get(srv.URL)
	require.NoError(t, err)
	res.Body.Close()
	assert.False(t, called)
}
