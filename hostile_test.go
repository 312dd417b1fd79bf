package retryhttp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Hostile responses: Retry-After values meant to stall or confuse, bodies
// that never end, and more headers than anyone needs. Waits are recorded with
// SetSleep instead of slept.

// waitRecorder records the waits a Transport chooses, without waiting.
type waitRecorder struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (w *waitRecorder) sleep(_ context.Context, d time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waits = append(w.waits, d)
	return nil
}

func (w *waitRecorder) get() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.waits...)
}

func TestHostileRetryAfter(t *testing.T) {
	backoff := func(t *testing.T, waits []time.Duration) {
		require.Len(t, waits, 3)
		for i, d := range waits {
			assert.GreaterOrEqual(t, d, time.Duration(0))
			assert.Less(t, d, 250*time.Millisecond<<i, "full jitter ceiling of retry %d", i+1)
		}
	}
	tests := []struct {
		name         string
		giveValues   []string
		wantAttempts int64
		wantWaits    func(t *testing.T, waits []time.Duration)
	}{
		{
			// Saturates past the maximum delay: returned at once.
			name: "10^18 seconds", giveValues: []string{"1000000000000000000"}, wantAttempts: 1,
			wantWaits: func(t *testing.T, waits []time.Duration) { assert.Empty(t, waits) },
		},
		{name: "-1: invalid, backoff", giveValues: []string{"-1"}, wantAttempts: 4, wantWaits: backoff},
		{
			name: "a date far in the future", giveValues: []string{"Fri, 31 Dec 9999 23:59:59 GMT"}, wantAttempts: 1,
			wantWaits: func(t *testing.T, waits []time.Duration) { assert.Empty(t, waits) },
		},
		{
			name: "a date in the past: no wait", giveValues: []string{"Thu, 01 Jan 1970 00:00:00 GMT"}, wantAttempts: 4,
			wantWaits: func(t *testing.T, waits []time.Duration) { assert.Equal(t, []time.Duration{0, 0, 0}, waits) },
		},
		{name: "garbage: backoff", giveValues: []string{"soon, maybe"}, wantAttempts: 4, wantWaits: backoff},
		{
			name: "several, the first counts: 1 then 10^5", giveValues: []string{"1", "100000"}, wantAttempts: 4,
			wantWaits: func(t *testing.T, waits []time.Duration) {
				require.Len(t, waits, 3)
				for _, d := range waits { // 1s ± 1/3
					assert.GreaterOrEqual(t, d, 2*time.Second/3)
					assert.Less(t, d, 4*time.Second/3)
				}
			},
		},
		{
			name: "several, the first counts: 10^5 then 1", giveValues: []string{"100000", "1"}, wantAttempts: 1,
			wantWaits: func(t *testing.T, waits []time.Duration) { assert.Empty(t, waits) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newCountingServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
				w.Header()["Retry-After"] = tt.giveValues
				w.WriteHeader(503)
				_, _ = io.WriteString(w, "later")
			})
			tr := newTransport(t)
			var rec waitRecorder
			retryhttp.SetSleep(tr, rec.sleep)
			ctx, cancel := context.WithTimeout(context.Background(), matrixDeadline)
			defer cancel()

			start := time.Now()
			res, err := tr.RoundTrip(httptestRequestCtx(t, ctx, http.MethodPost, srv.URL))
			require.NoError(t, err)

			assert.Less(t, time.Since(start), 2*time.Second, "no real wait")
			assert.Equal(t, 503, res.StatusCode)
			assert.Equal(t, "later", readAll(t, res), "the last response, readable")
			assert.Equal(t, tt.wantAttempts, srv.attempts.Load(), "rule 9: any method")
			tt.wantWaits(t, rec.get())
		})
	}
}

// httptestRequestCtx returns a request with ctx and no body.
func httptestRequestCtx(t *testing.T, ctx context.Context, method, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	require.NoError(t, err)
	return req
}

// TestDiscardedEndlessBodiesKeepConnectionsBounded: every request first gets
// a 503 whose body never ends. Each is drained up to the bound and costs its
// connection, never more: one new connection per request, and the server
// writes a bounded amount into each.
func TestDiscardedEndlessBodiesKeepConnectionsBounded(t *testing.T) {
	const n = 20
	var mu sync.Mutex
	var written []int64
	srv := newCountingServer(t, func(a int64, w http.ResponseWriter, r *http.Request) {
		if a%2 == 0 {
			_, _ = w.Write(okBody)
			return
		}
		w.WriteHeader(503)
		var sum int64
		chunk := payload(32 << 10)
		for r.Context().Err() == nil && sum < 1<<30 {
			k, err := w.Write(chunk)
			sum += int64(k)
			if err != nil {
				break
			}
		}
		mu.Lock()
		written = append(written, sum)
		mu.Unlock()
	})
	tr := newTransport(t, noDelay, unlimitedBudget) // every request retried on purpose
	client := &http.Client{Transport: tr}

	start := time.Now()
	for range n {
		res, err := client.Get(srv.URL)
		require.NoError(t, err)
		assert.Equal(t, okBody, []byte(readAll(t, res)))
	}

	assert.Less(t, time.Since(start), 20*time.Second)
	assert.Equal(t, int64(2*n), srv.attempts.Load(), "one retry each, no more")
	assert.LessOrEqual(t, srv.conns.Load(), int64(n+1), "each endless body costs one connection, no more")
	tr.CloseIdleConnections()
	srv.Close() // waits for the handlers
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, written, n)
	for _, sum := range written {
		assert.Less(t, sum, int64(64<<20), "drained to the bound, then let go")
	}
}

// TestTenThousandHeaders: 10,000 response headers (about 170 KB) are within
// net/http's default limit (MaxResponseHeaderBytes, 10 MiB when zero): the
// response is handled like any other. Over a lower limit, the attempt fails
// with net/http's error, which is not retried (rule 6): no hang, no storm.
func TestTenThousandHeaders(t *testing.T) {
	tests := []struct {
		name         string
		giveStatus   int
		giveLimit    int64
		wantAttempts int64
		wantErr      string
	}{
		{name: "200, default limit", giveStatus: 200, wantAttempts: 1},
		{name: "503, default limit: retried as any 503", giveStatus: 503, wantAttempts: 4},
		{name: "200, over a 64 KiB limit", giveStatus: 200, giveLimit: 64 << 10, wantAttempts: 1, wantErr: "server response headers exceeded"},
		{name: "503, over a 64 KiB limit", giveStatus: 503, giveLimit: 64 << 10, wantAttempts: 1, wantErr: "server response headers exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newCountingServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
				for i := range 10000 {
					w.Header().Set(fmt.Sprintf("X-Header-%05d", i), "some value")
				}
				w.WriteHeader(tt.giveStatus)
				_, _ = io.WriteString(w, "body")
			})
			base := &http.Transport{MaxResponseHeaderBytes: tt.giveLimit}
			t.Cleanup(base.CloseIdleConnections)
			var attempts atomic.Int64
			tr := newTransport(t, retryhttp.WithTransport(base), noDelay,
				retryhttp.WithShouldRetryFn(func(a retryhttp.Attempt) bool {
					attempts.Add(1)
					return retryhttp.DefaultShouldRetryFn(a)
				}))
			ctx, cancel := context.WithTimeout(context.Background(), matrixDeadline)
			defer cancel()

			res, err := tr.RoundTrip(httptestRequestCtx(t, ctx, http.MethodGet, srv.URL))

			assert.Equal(t, tt.wantAttempts, srv.attempts.Load())
			assert.Equal(t, tt.wantAttempts, attempts.Load())
			if tt.wantErr != "" {
				assert.Nil(t, res)
				require.Error(t, err)
				assert.True(t, strings.Contains(err.Error(), tt.wantErr), "%v", err)
				assert.NotErrorIs(t, err, retryhttp.ErrRetriesExhausted)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.giveStatus, res.StatusCode)
			assert.Len(t, res.Header.Values("X-Header-09999"), 1)
			assert.Equal(t, "body", readAll(t, res))
		})
	}
}
