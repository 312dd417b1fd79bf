package retryhttp_test

import (
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/retryhttptest"
)

// noDelay is an option that makes every retry immediate.
var noDelay = retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 })

// unlimitedBudget turns the retry budget off, for tests that retry a large
// share of their requests on purpose to prove something else (connection
// reuse, concurrency); budget_test.go proves the budget.
var unlimitedBudget = retryhttp.WithRetryBudget(nil)

// ownBudget gives a transport a budget of its own, with the defaults, in
// place of the process's shared one: tests that count retries must not
// inherit the state of an earlier test's server on the same port. A later
// WithRetryBudget replaces it.
func ownBudget() retryhttp.Option {
	return retryhttp.WithRetryBudget(retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{}))
}

// onFakeTime gives a transport a budget of its own, with the defaults, and
// both a clock that jumps to the end of every wait started on it
// (retryhttptest.NewClock): the waits between attempts and the polls and
// bounds of parked retries (MaxWait, 2s by default) then pass in
// microseconds, in the order they would in real time. For tests of a
// sequence of requests whose parked retries run out their bounds; the
// attempts themselves run in real time. A later WithRetryBudget replaces
// the budget, which then runs on the real clock.
func onFakeTime() retryhttp.Option {
	c := retryhttptest.NewClock(time.Now())
	b := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Clock: c})
	return func(t *retryhttp.Transport) {
		retryhttp.WithClock(c)(t)
		retryhttp.WithRetryBudget(b)(t)
	}
}

// fakeWaits puts tr on a fake clock that jumps to the end of every wait
// (retryhttptest.NewClock), started at the real time, and returns it: its
// Sleeps are the waits tr chose.
func fakeWaits(tr *retryhttp.Transport) *retryhttptest.Clock {
	c := retryhttptest.NewClock(time.Now())
	retryhttp.WithClock(c)(tr)
	return c
}

// onWait is a clock that calls fn as each wait starts on it, before the
// wait goes on on the clock it wraps.
type onWait struct {
	retryhttp.Clock
	fn func()
}

func (c onWait) NewTimer(d time.Duration) (<-chan time.Time, retryhttp.Timer) {
	c.fn()
	return c.Clock.NewTimer(d)
}

// noParking is a budget of its own with parking off: the token bucket
// alone, for tests of its arithmetic.
func noParking(opts retryhttp.RetryBudgetOptions) retryhttp.Option {
	opts.NoParking = true
	return retryhttp.WithRetryBudget(retryhttp.NewRetryBudget(opts))
}

// newTransport returns a Transport whose idle connections are closed when the
// test ends, so that goleak finds no connection goroutines.
func newTransport(t *testing.T, options ...retryhttp.Option) *retryhttp.Transport {
	t.Helper()
	tr := retryhttp.New(append([]retryhttp.Option{ownBudget()}, options...)...)
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// readAll reads and closes a response body.
func readAll(t *testing.T, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return string(b)
}

// closeBody is a body that records whether it was closed. Its type hides the
// reader inside, so http.NewRequest sets no GetBody for it.
type closeBody struct {
	io.Reader
	closed atomic.Bool
}

func (b *closeBody) Close() error {
	b.closed.Store(true)
	return nil
}

// attemptRecorder records the Attempt.Count values a DelayFn or ShouldRetryFn
// is called with.
type attemptRecorder struct {
	mu     sync.Mutex
	counts []int
}

func (r *attemptRecorder) record(a retryhttp.Attempt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts = append(r.counts, a.Count)
}

func (r *attemptRecorder) get() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.counts...)
}

// payload returns n bytes of a fixed, non-repeating-looking pattern.
func payload(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// roundTripFunc is a fake base transport, for pure unit tests only.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
