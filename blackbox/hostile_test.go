package blackbox

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
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// Hostile responses: Retry-After values meant to stall or confuse, bodies
// that never end, and more headers than anyone needs, each for every kind of
// request of the fault matrix (requestKinds). Waits are recorded by a fake
// clock (retryhttptest.NewClock) instead of slept.

// runKinds runs f for each of requestKinds in parallel subtests, then checks
// that they left no goroutine behind, as TestFaultMatrix does. i indexes the
// kind in requestKinds (and in a wantAttempts array).
func runKinds(t *testing.T, f func(t *testing.T, i int, k requestKind)) {
	t.Helper()
	// Runs after the cleanups of the subtests: nothing they started may
	// remain.
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
	for i, k := range requestKinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			f(t, i, k)
		})
	}
}

// kindCall is one request of a requestKind sent through a transport as
// runFaultCase sends it: a 16 KiB body if the kind has one, the matrix
// deadline. It keeps what the invariants are checked against.
type kindCall struct {
	sent    []byte                  // the body the caller sent, nil without one
	req     *http.Request           // the caller's request
	before  testkit.RequestSnapshot // req before RoundTrip
	res     *http.Response
	err     error
	elapsed time.Duration
}

// callKind sends one request of kind k to url through rt. The context ends
// with the test, so that the response body stays readable.
func callKind(t *testing.T, rt http.RoundTripper, k requestKind, url string) *kindCall {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), matrixDeadline)
	t.Cleanup(cancel)
	c := &kindCall{}
	if k.body {
		c.sent = testkit.Payload(16 << 10)
	}
	c.req = k.newRequest(t, ctx, url, c.sent)
	c.before = testkit.Snapshot(c.req)
	start := time.Now()
	c.res, c.err = rt.RoundTrip(c.req)
	c.elapsed = time.Since(start)
	return c
}

// assertInvariants checks the invariants of the matrix that do not depend on
// the outcome: the number of attempts that reached the base transport (b),
// the caller's request unchanged (d), no call past its deadline (e); and, when
// sums is not nil, that the server read want bodies, each byte-identical to
// the one sent (a). The caller checks the response body, as it depends on the
// case.
func (c *kindCall) assertInvariants(t *testing.T, counted *testkit.CountingTransport, sums *bodySums, want int64) {
	t.Helper()
	assert.Equal(t, want, counted.Attempts.Load(), "attempts")
	if sums != nil {
		sums.assertAll(t, c.sent, int(want))
	}
	assertUnchanged(t, c.before, c.req)
	assert.Less(t, c.elapsed, matrixDeadline+deadlineTolerance, "never past the deadline")
}

// retryAfterBody is the body of the 503s of TestHostileRetryAfter: the last
// one must reach the caller intact.
var retryAfterBody = testkit.Payload(4 << 10)

func TestHostileRetryAfter(t *testing.T) {
	backoff := func(t *testing.T, waits []time.Duration) {
		require.Len(t, waits, 3)
		for i, d := range waits {
			assert.GreaterOrEqual(t, d, time.Duration(0))
			assert.Less(t, d, 250*time.Millisecond<<i, "full jitter ceiling of retry %d", i+1)
		}
	}
	noWait := func(t *testing.T, waits []time.Duration) { assert.Empty(t, waits) }
	// Every response is a 503 with a non-empty Retry-After, retried for any
	// method, whatever its body (rule 10): the same attempts for every kind,
	// unless the chosen wait is over the maximum delay, which returns the
	// first response at once (step 6 of the loop).
	tests := []struct {
		name         string
		giveValues   []string
		wantAttempts [len(requestKinds)]int64
		wantWaits    func(t *testing.T, waits []time.Duration)
	}{
		// Saturates past the maximum delay: returned at once.
		{name: "10^18 seconds", giveValues: []string{"1000000000000000000"}, wantAttempts: allKinds(1), wantWaits: noWait},
		{name: "-1: invalid, backoff", giveValues: []string{"-1"}, wantAttempts: allKinds(4), wantWaits: backoff},
		{name: "a date far in the future", giveValues: []string{"Fri, 31 Dec 9999 23:59:59 GMT"}, wantAttempts: allKinds(1), wantWaits: noWait},
		{
			name: "a date in the past: no wait", giveValues: []string{"Thu, 01 Jan 1970 00:00:00 GMT"}, wantAttempts: allKinds(4),
			wantWaits: func(t *testing.T, waits []time.Duration) { assert.Empty(t, waits, "a zero wait arms no timer") },
		},
		{name: "garbage: backoff", giveValues: []string{"soon, maybe"}, wantAttempts: allKinds(4), wantWaits: backoff},
		{
			name: "several, the first counts: 1 then 10^5", giveValues: []string{"1", "100000"}, wantAttempts: allKinds(4),
			wantWaits: func(t *testing.T, waits []time.Duration) {
				require.Len(t, waits, 3)
				for _, d := range waits { // 1s ± 1/3
					assert.GreaterOrEqual(t, d, 2*time.Second/3)
					assert.Less(t, d, 4*time.Second/3)
				}
			},
		},
		{name: "several, the first counts: 10^5 then 1", giveValues: []string{"100000", "1"}, wantAttempts: allKinds(1), wantWaits: noWait},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runKinds(t, func(t *testing.T, i int, k requestKind) {
				var sums bodySums
				srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
					sums.read(r)
					w.Header()["Retry-After"] = tt.giveValues
					w.WriteHeader(503)
					_, _ = w.Write(retryAfterBody)
				})
				base := &http.Transport{}
				t.Cleanup(base.CloseIdleConnections)
				counted := &testkit.CountingTransport{RoundTripper: base}
				tr := testkit.NewTransport(t, retryhttp.WithTransport(counted))
				clock := testkit.FakeWaits(tr)

				c := callKind(t, tr, k, srv.URL)

				want := tt.wantAttempts[i]
				wantBody(503, retryAfterBody)(t, c.res, c.err) // the last response, intact
				assert.Less(t, c.elapsed, 2*time.Second, "no real wait")
				c.assertInvariants(t, counted, &sums, want)
				assert.Equal(t, want, srv.Attempts.Load(), "requests the server read")
				assert.LessOrEqual(t, srv.Conns.Load(), want, "at most one connection per attempt")
				tt.wantWaits(t, clock.Sleeps())
			})
		})
	}
}

// TestDiscardedEndlessBodiesKeepConnectionsBounded: for each kind of request,
// every request first gets a 503 whose body never ends. Each is drained up to
// the bound and costs its connection, never more: one new connection per
// request, and the server writes a bounded amount into each.
func TestDiscardedEndlessBodiesKeepConnectionsBounded(t *testing.T) {
	const n = 20
	runKinds(t, func(t *testing.T, _ int, k requestKind) {
		// A plain 503 is retried only for requests guessed idempotent
		// (rule 11); for a POST it carries Retry-After: 0, retried for any
		// method (rule 10). Either way each request takes 2 attempts and
		// the first response, with its endless body, is discarded.
		retryAfter := k.method == http.MethodPost
		var sums bodySums
		var mu sync.Mutex
		var written []int64
		srv := testkit.NewCountingServer(t, func(a int64, w http.ResponseWriter, r *http.Request) {
			sums.read(r)
			if a%2 == 0 {
				_, _ = w.Write(okBody)
				return
			}
			if retryAfter {
				w.Header().Set("Retry-After", "0")
			}
			w.WriteHeader(503)
			var sum int64
			chunk := testkit.Payload(32 << 10)
			for r.Context().Err() == nil && sum < 1<<30 {
				m, err := w.Write(chunk)
				sum += int64(m)
				if err != nil {
					break
				}
			}
			mu.Lock()
			written = append(written, sum)
			mu.Unlock()
		})
		base := &http.Transport{}
		t.Cleanup(base.CloseIdleConnections)
		counted := &testkit.CountingTransport{RoundTripper: base}
		tr := testkit.NewTransport(t, retryhttp.WithTransport(counted), testkit.NoDelay, testkit.UnlimitedBudget) // every request retried on purpose

		start := time.Now()
		for range n {
			c := callKind(t, tr, k, srv.URL)
			require.NoError(t, c.err)
			if !assert.Equal(t, 200, c.res.StatusCode, "the endless 503 discarded") {
				c.res.Body.Close() // not read: it may never end
				continue
			}
			wantBody(200, okBody)(t, c.res, c.err)
			assertUnchanged(t, c.before, c.req)
			assert.Less(t, c.elapsed, matrixDeadline+deadlineTolerance, "never past the deadline")
		}

		assert.Less(t, time.Since(start), 20*time.Second)
		assert.Equal(t, int64(2*n), counted.Attempts.Load(), "one retry each, no more")
		assert.Equal(t, int64(2*n), srv.Attempts.Load(), "requests the server read")
		var sent []byte
		if k.body {
			sent = testkit.Payload(16 << 10) // what callKind sends
		}
		sums.assertAll(t, sent, 2*n)
		assert.LessOrEqual(t, srv.Conns.Load(), int64(n+1), "each endless body costs one connection, no more")
		tr.CloseIdleConnections()
		srv.Close() // waits for the handlers
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, written, n)
		for _, sum := range written {
			assert.Less(t, sum, int64(64<<20), "drained to the bound, then let go")
		}
	})
}

// TestTenThousandHeaders: 10,000 response headers (about 170 KB) are within
// net/http's default limit (MaxResponseHeaderBytes, 10 MiB when zero): the
// response is handled like any other, for every kind of request. Over a lower
// limit, the attempt fails with net/http's error, which is not retried
// (rule 6): no hang, no storm.
func TestTenThousandHeaders(t *testing.T) {
	tests := []struct {
		name         string
		giveStatus   int
		giveLimit    int64
		wantAttempts [len(requestKinds)]int64
		wantErr      string
	}{
		{name: "200, default limit", giveStatus: 200, wantAttempts: allKinds(1)},
		// Rule 11: a 503 without Retry-After, only when idempotent.
		{name: "503, default limit: retried as any 503", giveStatus: 503, wantAttempts: idemOnly(4)},
		{name: "200, over a 64 KiB limit", giveStatus: 200, giveLimit: 64 << 10, wantAttempts: allKinds(1), wantErr: "server response headers exceeded"},
		{name: "503, over a 64 KiB limit", giveStatus: 503, giveLimit: 64 << 10, wantAttempts: allKinds(1), wantErr: "server response headers exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runKinds(t, func(t *testing.T, i int, k requestKind) {
				var sums bodySums
				srv := testkit.NewCountingServer(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
					sums.read(r)
					for i := range 10000 {
						w.Header().Set(fmt.Sprintf("X-Header-%05d", i), "some value")
					}
					w.WriteHeader(tt.giveStatus)
					_, _ = io.WriteString(w, "body")
				})
				base := &http.Transport{MaxResponseHeaderBytes: tt.giveLimit}
				t.Cleanup(base.CloseIdleConnections)
				counted := &testkit.CountingTransport{RoundTripper: base}
				var asked atomic.Int64
				tr := testkit.NewTransport(t, retryhttp.WithTransport(counted), testkit.NoDelay,
					retryhttp.WithShouldRetryFn(func(a retryhttp.Attempt) bool {
						asked.Add(1)
						return retryhttp.DefaultShouldRetryFn(a)
					}))

				c := callKind(t, tr, k, srv.URL)

				want := tt.wantAttempts[i]
				c.assertInvariants(t, counted, &sums, want)
				assert.Equal(t, want, srv.Attempts.Load(), "requests the server read")
				assert.Equal(t, want, asked.Load(), "the policy asked after every attempt")
				if tt.wantErr != "" {
					assert.Nil(t, c.res)
					require.Error(t, c.err)
					assert.True(t, strings.Contains(c.err.Error(), tt.wantErr), "%v", c.err)
					assert.NotErrorIs(t, c.err, retryhttp.ErrRetriesExhausted)
					return
				}
				require.NoError(t, c.err)
				assert.Equal(t, tt.giveStatus, c.res.StatusCode)
				assert.Len(t, c.res.Header.Values("X-Header-09999"), 1)
				assert.Equal(t, "body", testkit.ReadAll(t, c.res))
			})
		})
	}
}
