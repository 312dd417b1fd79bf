package retryhttp_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
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
// (retryhttp.NewAutoFakeTime): the waits between attempts and the polls and
// bounds of parked retries (MaxWait, 2s by default) then pass in
// microseconds, in the order they would in real time. For tests of a
// sequence of requests whose parked retries run out their bounds; the
// attempts themselves run in real time. A later WithRetryBudget replaces
// the budget, which then runs on the real clock.
func onFakeTime() retryhttp.Option {
	c := retryhttp.NewAutoFakeTime(time.Now())
	b := retryhttp.NewRetryBudgetOn(retryhttp.RetryBudgetOptions{}, c)
	return func(t *retryhttp.Transport) {
		retryhttp.WithFakeTime(c)(t)
		retryhttp.WithRetryBudget(b)(t)
	}
}

// noParking is a budget of its own with parking off: the token bucket
// alone, for tests of its arithmetic.
func noParking(opts retryhttp.RetryBudgetOptions) retryhttp.Option {
	opts.NoParking = true
	return retryhttp.WithRetryBudget(retryhttp.NewRetryBudget(opts))
}

// countingServer is an httptest server that counts the requests it handles
// and the connections it accepts.
type countingServer struct {
	*httptest.Server
	attempts atomic.Int64
	conns    atomic.Int64
}

// handlerFn handles the n-th request (1 for the first) of a countingServer.
type handlerFn func(n int64, w http.ResponseWriter, r *http.Request)

// newCountingServer starts a countingServer on loopback, closed when the test
// ends.
func newCountingServer(t testing.TB, h handlerFn) *countingServer {
	t.Helper()
	s := &countingServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h(s.attempts.Add(1), w, r)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// statusThen answers the first failures requests with status, and the others
// with 200 and the body "ok".
func statusThen(status int, failures int64) handlerFn {
	return func(n int64, w http.ResponseWriter, _ *http.Request) {
		if n <= failures {
			w.WriteHeader(status)
			_, _ = io.WriteString(w, http.StatusText(status))
			return
		}
		_, _ = io.WriteString(w, "ok")
	}
}

// always answers every request with status and its text as body.
func always(status int) handlerFn {
	return func(_ int64, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, http.StatusText(status))
	}
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

// failFirstAttempts answers 503 to the first attempt of each logical request
// (told apart by its X-Request-Id header) for which fail returns true, and 200
// with the body "ok" to everything else.
func failFirstAttempts(fail func(id string) bool) handlerFn {
	var seen sync.Map
	return func(_ int64, w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if _, dup := seen.LoadOrStore(id, true); !dup && fail(id) {
			w.WriteHeader(503)
			_, _ = io.WriteString(w, "busy")
			return
		}
		_, _ = io.WriteString(w, "ok")
	}
}

// roundTripFunc is a fake base transport, for pure unit tests only.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
