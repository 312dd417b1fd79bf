package testkit

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/retryhttptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// NoDelay is an option that makes every retry immediate.
var NoDelay = retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 })

// UnlimitedBudget turns the retry budget off, for tests that retry a large
// share of their requests on purpose to prove something else (connection
// reuse, concurrency); budget_test.go proves the budget.
var UnlimitedBudget = retryhttp.WithRetryBudget(nil)

// OwnBudget gives a transport a budget of its own, with the defaults, in
// place of the process's shared one: tests that count retries must not
// inherit the state of an earlier test's server on the same port. A later
// WithRetryBudget replaces it.
func OwnBudget() retryhttp.Option {
	return retryhttp.WithRetryBudget(retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{}))
}

// OnFakeTime gives a transport a budget of its own, with the defaults, and
// both a clock that jumps to the end of every wait started on it
// (retryhttptest.NewClock): the waits between attempts and the polls and
// bounds of parked retries (MaxWait, 2s by default) then pass in
// microseconds, in the order they would in real time. For tests of a
// sequence of requests whose parked retries run out their bounds; the
// attempts themselves run in real time. A later WithRetryBudget replaces
// the budget, which then runs on the real clock.
func OnFakeTime() retryhttp.Option {
	c := retryhttptest.NewClock(time.Now())
	b := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Clock: c})
	return func(t *retryhttp.Transport) {
		retryhttp.WithClock(c)(t)
		retryhttp.WithRetryBudget(b)(t)
	}
}

// FakeWaits puts tr on a fake clock that jumps to the end of every wait
// (retryhttptest.NewClock), started at the real time, and returns it: its
// Sleeps are the waits tr chose.
func FakeWaits(tr *retryhttp.Transport) *retryhttptest.Clock {
	c := retryhttptest.NewClock(time.Now())
	retryhttp.WithClock(c)(tr)
	return c
}

// OnWait is a clock that calls fn as each wait starts on it, before the
// wait goes on on the clock it wraps.
type OnWait struct {
	retryhttp.Clock
	Fn func()
}

func (c OnWait) NewTimer(d time.Duration) (<-chan time.Time, retryhttp.Timer) {
	c.Fn()
	return c.Clock.NewTimer(d)
}

// NoParking is a budget of its own with parking off: the token bucket
// alone, for tests of its arithmetic.
func NoParking(opts retryhttp.RetryBudgetOptions) retryhttp.Option {
	opts.NoParking = true
	return retryhttp.WithRetryBudget(retryhttp.NewRetryBudget(opts))
}

// NewTransport returns a Transport whose idle connections are closed when the
// test ends, so that goleak finds no connection goroutines.
func NewTransport(t *testing.T, options ...retryhttp.Option) *retryhttp.Transport {
	t.Helper()
	tr := retryhttp.New(append([]retryhttp.Option{OwnBudget()}, options...)...)
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// ReadAll reads and closes a response body.
func ReadAll(t *testing.T, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return string(b)
}

// CloseBody is a body that records whether it was closed. Its type hides the
// reader inside, so http.NewRequest sets no GetBody for it.
type CloseBody struct {
	io.Reader
	Closed atomic.Bool
}

func (b *CloseBody) Close() error {
	b.Closed.Store(true)
	return nil
}

// AttemptRecorder records the Attempt.Count values a DelayFn or ShouldRetryFn
// is called with.
type AttemptRecorder struct {
	mu     sync.Mutex
	counts []int
}

func (r *AttemptRecorder) Record(a retryhttp.Attempt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts = append(r.counts, a.Count)
}

func (r *AttemptRecorder) Get() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.counts...)
}

// Payload returns n bytes of a fixed, non-repeating-looking pattern.
func Payload(n int) []byte {
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

// NewClient returns a client whose transport never waits between attempts.
func NewClient(t testing.TB, opts ...retryhttp.Option) *http.Client {
	t.Helper()
	tr := retryhttp.New(append([]retryhttp.Option{OwnBudget(), NoDelay}, opts...)...)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// Get sends a GET and returns its status, the body read and closed.
func Get(t testing.TB, c *http.Client, url string) int {
	t.Helper()
	res, err := c.Get(url)
	if !assert.NoError(t, err) {
		return 0
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// Repeat returns n copies of v.
func Repeat[T any](v T, n int) []T {
	s := make([]T, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// RequestSnapshot holds the fields of a request that RoundTrip must not
// change.
type RequestSnapshot struct {
	Method, URL, Host string
	Header            http.Header
	Body              io.ReadCloser
	GetBody           string // what r.GetBody gives: "" without one, else its body or its error
	ContentLength     int64
	Ctx               context.Context
	Close             bool
	TransferEncoding  []string
	Trailer           http.Header
}

// Snapshot records the fields of r that RoundTrip must not change.
func Snapshot(r *http.Request) RequestSnapshot {
	return RequestSnapshot{
		Method:           r.Method,
		URL:              r.URL.String(),
		Host:             r.Host,
		Header:           r.Header.Clone(),
		Body:             r.Body,
		GetBody:          getBodyOf(r),
		ContentLength:    r.ContentLength,
		Ctx:              r.Context(),
		Close:            r.Close,
		TransferEncoding: append([]string(nil), r.TransferEncoding...),
		Trailer:          r.Trailer.Clone(),
	}
}

// getBodyOf returns what r.GetBody gives, read in full: "" without one,
// else its body, or its error. A GetBody replaced by one that gives
// another body, or dropped, shows as a change.
func getBodyOf(r *http.Request) string {
	if r.GetBody == nil {
		return ""
	}
	body, err := r.GetBody()
	if err != nil {
		return "error: " + err.Error()
	}
	defer body.Close()
	b, err := io.ReadAll(body)
	if err != nil {
		return "error: " + err.Error()
	}
	return "body: " + string(b)
}

// NewRequest returns a request with a background context.
func NewRequest(t *testing.T, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	require.NoError(t, err)
	return req
}

// ParkEvents counts the ParkEvents of a transport, by kind, and keeps the
// dropped ones.
type ParkEvents struct {
	mu         sync.Mutex
	Kinds      map[retryhttp.ParkKind]int
	Dropped    []retryhttp.ParkEvent
	MaxParked  int
	MaxWaited  time.Duration
	LastWindow int
}

// Option is the hook that counts.
func (p *ParkEvents) Option() retryhttp.Option {
	p.Kinds = map[retryhttp.ParkKind]int{}
	return retryhttp.WithHooks(retryhttp.Hooks{OnPark: func(e retryhttp.ParkEvent) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.Kinds[e.Kind]++
		p.MaxParked = max(p.MaxParked, e.Parked)
		p.MaxWaited = max(p.MaxWaited, e.Waited)
		p.LastWindow = e.Window
		if e.Kind == retryhttp.ParkDropped {
			p.Dropped = append(p.Dropped, e)
		}
	}})
}

// Count returns the events of kind k so far.
func (p *ParkEvents) Count(k retryhttp.ParkKind) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.Kinds[k]
}

// MaxProbes bounds the retries a host's parked retries send as probes while
// it fails everything, per outage: one per probeQuiet for MaxWait, and the
// first.
const MaxProbes = int(retryhttp.DefaultMaxParkedWait/probeQuiet) + 1

// probeQuiet is the pace of the probes of a host without traffic: no
// failure heard for this long lets one parked retry go
// (internal/budget/pacer.go, probeQuiet).
const probeQuiet = 250 * time.Millisecond

// OutageStreak is the number of failures in a row that make an outage
// (internal/budget/pacer.go, outageStreak).
const OutageStreak = 10

// Main runs the tests of m and fails the run if any test leaves a goroutine
// behind. The idle keep-alive connections of the base transport shared by
// Transports made without WithTransport are the process's pool, as
// http.DefaultTransport's would be, not a leak: they are closed after the
// tests, before the check. Connections still in use (a response body never
// closed) are not, and fail the check.
func Main(m *testing.M) {
	goleak.VerifyTestMain(closeSharedPoolAfter{m})
}

// closeSharedPoolAfter runs the tests, then closes the shared pool's idle
// connections.
type closeSharedPoolAfter struct{ m *testing.M }

func (c closeSharedPoolAfter) Run() int {
	code := c.m.Run()
	retryhttp.New().CloseIdleConnections()
	return code
}
