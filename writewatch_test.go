package retryhttp_test

import (
	"context"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The cheaper POST (issue 13): the write watch is the context that carries
// its trace, the copy with an injected key holds the watch when the request
// may be watched, and a request's headers are scanned in one walk. These
// tests check that none of it changes what is sent or retried, through a
// base other than *http.Transport, which is the one that is watched.

// wrappedBase is a base transport that is not an *http.Transport, so that
// the transport watches the writes of requests it sends through it; it
// checks that each request it is handed still carries the caller's context
// values.
type wrappedBase struct {
	real    *http.Transport
	key     any // a key of the caller's context
	lostKey atomic.Int64
}

func (b *wrappedBase) RoundTrip(req *http.Request) (*http.Response, error) {
	if b.key != nil && req.Context().Value(b.key) == nil {
		b.lostKey.Add(1)
	}
	return b.real.RoundTrip(req)
}

type callerKey struct{}

// TestInjectedKeyOncePerRequestWatched: through a watched base, every
// attempt of one logical POST carries the same injected key, the next
// logical POST another one, and the caller's request, context and trace
// stay as they were: the caller's values are seen below, and the caller's
// own trace still runs on every attempt.
func TestInjectedKeyOncePerRequestWatched(t *testing.T) {
	for _, tc := range []struct {
		name  string
		trace bool // the caller's context carries a ClientTrace of its own
	}{{"no caller trace", false}, {"caller trace", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var keys []string
			srv := testkit.NewCountingServer(t, func(n int64, w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				keys = append(keys, r.Header.Get("Idempotency-Key"))
				mu.Unlock()
				if n%3 != 0 { // two 503s, then 200, per logical request
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				_, _ = w.Write([]byte("ok"))
			})
			real := &http.Transport{}
			t.Cleanup(real.CloseIdleConnections)
			base := &wrappedBase{real: real, key: callerKey{}}
			// A policy of the caller's own: the injected key, not known to
			// be honoured, does not make the POST guessed idempotent, so
			// its writes are watched (the copy holds the watch).
			tr := retryhttp.New(retryhttp.WithTransport(base), retryhttp.WithRetryBudget(nil),
				retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 }),
				retryhttp.WithShouldRetryFn(func(a retryhttp.Attempt) bool {
					return a.Res != nil && a.Res.StatusCode == http.StatusServiceUnavailable
				}))
			var wrote atomic.Int64
			for i := 0; i < 2; i++ {
				ctx := context.WithValue(context.Background(), callerKey{}, "v")
				if tc.trace {
					ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteHeaders: func() { wrote.Add(1) }})
				}
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("charge"))
				require.NoError(t, err)
				res, err := tr.RoundTrip(req)
				require.NoError(t, err)
				assert.Equal(t, "ok", testkit.ReadAll(t, res))
				assert.Empty(t, req.Header, "the caller's header is not touched")
				assert.Same(t, ctx, req.Context(), "the caller's request keeps its context")
			}
			mu.Lock()
			defer mu.Unlock()
			require.Len(t, keys, 6)
			for i := 0; i < 6; i += 3 {
				assert.Len(t, keys[i], 36, "a UUID")
				assert.Equal(t, []string{keys[i], keys[i], keys[i]}, keys[i:i+3], "the same key on every attempt")
			}
			assert.NotEqual(t, keys[0], keys[3], "a new key per logical request")
			assert.Zero(t, base.lostKey.Load(), "the caller's context values reach the base")
			if tc.trace {
				assert.Equal(t, int64(6), wrote.Load(), "the caller's trace runs on every attempt")
			}
		})
	}
}

// TestCallerKeyUntouchedWatchedBase: a caller's key, under either usual
// name and in any case, is sent as the caller set it on every attempt, and
// no other key is added; the caller's header map is unchanged.
func TestCallerKeyUntouchedWatchedBase(t *testing.T) {
	for _, name := range []string{"Idempotency-Key", "idempotency-key", "X-Idempotency-Key", "x-idempotency-key"} {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			var seen []http.Header
			srv := testkit.NewCountingServer(t, func(n int64, w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				seen = append(seen, r.Header.Clone())
				mu.Unlock()
				if n == 1 {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				_, _ = w.Write([]byte("ok"))
			})
			real := &http.Transport{}
			t.Cleanup(real.CloseIdleConnections)
			tr := retryhttp.New(retryhttp.WithTransport(&wrappedBase{real: real}), retryhttp.WithRetryBudget(nil),
				retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 }))
			req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("charge"))
			require.NoError(t, err)
			req.Header[name] = []string{"mine"}
			req.Header["Content-Type"] = []string{"text/plain"}
			before := req.Header.Clone()
			res, err := tr.RoundTrip(req)
			require.NoError(t, err)
			assert.Equal(t, "ok", testkit.ReadAll(t, res))
			assert.Equal(t, before, req.Header, "the caller's header map is unchanged")
			mu.Lock()
			defer mu.Unlock()
			require.Len(t, seen, 2, "a caller's key makes the POST retryable")
			for _, h := range seen {
				assert.Equal(t, []string{"mine"}, h.Values(name))
				other := "X-Idempotency-Key"
				if strings.EqualFold(name, other) {
					other = "Idempotency-Key"
				}
				assert.Empty(t, h.Values(other), "no key added beside the caller's")
			}
		})
	}
}

// TestWatchedContextIsTheCallers: the context of a watched attempt ends
// when the caller's does, with the caller's error, and has its deadline.
func TestWatchedContextIsTheCallers(t *testing.T) {
	srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	real := &http.Transport{}
	t.Cleanup(real.CloseIdleConnections)
	deadline := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	var sawDeadline atomic.Value
	tr := retryhttp.New(retryhttp.WithTransport(roundTripFunc(func(req *http.Request) (*http.Response, error) {
		d, _ := req.Context().Deadline()
		sawDeadline.Store(d)
		cancel() // the caller gives up while the attempt is in flight
		return real.RoundTrip(req)
	})), retryhttp.WithRetryBudget(nil))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("charge"))
	require.NoError(t, err)
	_, err = tr.RoundTrip(req)
	require.ErrorIs(t, err, context.Canceled)
	assert.True(t, deadline.Equal(sawDeadline.Load().(time.Time)), "the attempt has the caller's deadline")
	srv.CloseClientConnections()
}
