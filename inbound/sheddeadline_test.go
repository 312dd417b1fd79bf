package inbound_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/inbound"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// getWithin sends a GET carrying DeadlineHeader: ms and returns the
// response, read and closed.
func getWithin(t *testing.T, c *http.Client, url string, ms int) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set(retryhttp.DeadlineHeader, strconv.Itoa(ms))
	res, err := c.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

// assertLate checks the answer to a request shed for its caller's deadline.
func assertLate(t *testing.T, res *http.Response) {
	t.Helper()
	assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	assert.True(t, retryhttp.HasRetrySignal(res.Header), "nobody above retries it")
	assert.Empty(t, res.Header.Get("Retry-After"))
}

// TestLoadShedderRefusesTooLate: once the shedder knows the service's usual
// latency (about 40ms here), a request whose caller waits less than its
// expected wait plus that latency is refused at once, and one whose caller
// waits long enough is handled as before. A caller whose time is up
// already ("0") is refused even before any latency is known.
func TestLoadShedderRefusesTooLate(t *testing.T) {
	var decisions []inbound.ShedDecision
	s := inbound.NewLoadShedder(inbound.LoadShedderOptions{
		Limit:      1,
		OnDecision: func(d inbound.ShedDecision) { decisions = append(decisions, d) },
	})
	srv := shedServerWith(t, s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(40 * time.Millisecond)
	}))
	c := plainClient(t)
	assertLate(t, getWithin(t, c, srv.URL, 0))

	assert.Equal(t, http.StatusOK, getWithin(t, c, srv.URL, 5000).StatusCode) // learns the latency
	start := time.Now()
	assertLate(t, getWithin(t, c, srv.URL, 20))
	assert.Less(t, time.Since(start), 35*time.Millisecond, "refused at once, not after the work")
	assert.Equal(t, http.StatusOK, getWithin(t, c, srv.URL, 5000).StatusCode)

	assert.Equal(t, inbound.LoadShedderStats{Limit: 1, Admitted: 2, Shed: 2, Late: 2}, s.Stats())
	reasons := []inbound.ShedReason{}
	for _, d := range decisions {
		reasons = append(reasons, d.Reason)
	}
	assert.Equal(t, []inbound.ShedReason{inbound.ShedTooLate, inbound.ShedNone, inbound.ShedTooLate, inbound.ShedNone}, reasons)
}

// TestLoadShedderDropsExpired: a request whose caller's deadline passes
// while it waits in the queue is dropped before its handler runs, with the
// no-retry answer; the request behind it, whose caller still waits, gets
// the slot.
func TestLoadShedderDropsExpired(t *testing.T) {
	q := newHeldQueue(t)
	s, g, c, reasons, url := q.s, q.g, q.c, q.reasons, q.url

	patient := make(chan *http.Response, 1)
	go func() { patient <- getWithin(t, c, url+"/fast", 60_000) }()
	require.Eventually(t, func() bool { return s.Stats().Queued == 1 }, 5*time.Second, time.Millisecond)
	res := getWithin(t, c, url+"/fast", 50) // queued behind the patient one, expires
	assertLate(t, res)
	assert.Equal(t, inbound.ShedExpired, <-reasons)
	assert.Len(t, g.started, 0, "the handler never ran for it")

	g.open()
	assert.Equal(t, http.StatusOK, <-q.held)
	assert.Equal(t, http.StatusOK, (<-patient).StatusCode)
	assert.Equal(t, inbound.ShedNone, <-reasons)
	assert.Equal(t, uint64(1), s.Stats().Late)
}

// TestLoadShedderCanceledIsNotLate: a caller that cancels (no deadline)
// while its request waits is counted as canceled, not late.
func TestLoadShedderCanceledIsNotLate(t *testing.T) {
	q := newHeldQueue(t)
	s, g, c, reasons, url := q.s, q.g, q.c, q.reasons, q.url
	ctx, cancel := context.WithCancel(context.Background())
	done := getAsync(ctx, c, url+"/fast")
	require.Eventually(t, func() bool { return s.Stats().Queued == 1 }, 5*time.Second, time.Millisecond)
	cancel()
	assert.Equal(t, 0, <-done)
	assert.Equal(t, inbound.ShedCanceled, <-reasons)
	g.open()
	assert.Equal(t, http.StatusOK, <-q.held)
	assert.Zero(t, s.Stats().Late)
}

// shedServerWith serves h behind Deadline and s, as docs/deadlines.md
// orders them.
func shedServerWith(t *testing.T, s *inbound.LoadShedder, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(inbound.Deadline(s.Handler(h)))
	t.Cleanup(srv.Close)
	return srv
}

// heldQueue is a shedder with one slot, held by a request blocked in g,
// and a queue: the next requests wait. reasons receives every decision
// after the held request's.
type heldQueue struct {
	s       *inbound.LoadShedder
	g       *gate
	c       *http.Client
	reasons chan inbound.ShedReason
	url     string
	held    <-chan int // the held request's status
}

func newHeldQueue(t *testing.T) heldQueue {
	t.Helper()
	q := heldQueue{reasons: make(chan inbound.ShedReason, 10), g: newGate(), c: plainClient(t)}
	q.s = inbound.NewLoadShedder(inbound.LoadShedderOptions{
		Limit: 1, MaxQueue: 5, MaxQueueWait: time.Minute,
		OnDecision: func(d inbound.ShedDecision) { q.reasons <- d.Reason },
	})
	q.url = shedServerWith(t, q.s, q.g).URL
	t.Cleanup(q.g.open)
	q.held = occupy(t, q.c, q.url, q.g, 1)[0]
	require.Equal(t, inbound.ShedNone, <-q.reasons)
	return q
}

// TestLoadShedderDropsTooLittleLeft: a request that left the queue with
// less time than the service's usual latency is dropped before its handler
// runs, although its deadline has not passed yet. The shedder's clock runs
// ahead by skew: the usual latency it learns is 200ms, and when the slot
// comes the caller has 100ms left.
func TestLoadShedderDropsTooLittleLeft(t *testing.T) {
	var skew atomic.Int64
	var ran atomic.Int32
	reasons := make(chan inbound.ShedReason, 10)
	s := inbound.NewLoadShedder(inbound.LoadShedderOptions{
		Limit: 1, MaxQueue: 5, MaxQueueWait: time.Minute,
		OnDecision: func(d inbound.ShedDecision) { reasons <- d.Reason },
	})
	inbound.SetShedClock(s, func() time.Time { return time.Now().Add(time.Duration(skew.Load())) })
	g := newGate()
	srv := shedServerWith(t, s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/learn":
			skew.Add(int64(200 * time.Millisecond))
		case "/hold":
			g.ServeHTTP(w, r)
		default:
			ran.Add(1)
		}
	}))
	t.Cleanup(g.open)
	c := plainClient(t)
	assert.Equal(t, http.StatusOK, getWithin(t, c, srv.URL+"/learn", 60_000).StatusCode)
	assert.Equal(t, inbound.ShedNone, <-reasons)
	skew.Store(0)
	held := occupy(t, c, srv.URL+"/hold", g, 1)
	assert.Equal(t, inbound.ShedNone, <-reasons)

	// 1000ms left, 200ms of wait and 200ms of work expected: queued.
	done := make(chan *http.Response, 1)
	go func() { done <- getWithin(t, c, srv.URL+"/work", 1000) }()
	require.Eventually(t, func() bool { return s.Stats().Queued == 1 }, 5*time.Second, time.Millisecond)
	skew.Store(int64(900 * time.Millisecond)) // about 100ms left
	g.open()
	assertLate(t, <-done)
	assert.Equal(t, inbound.ShedExpired, <-reasons)
	assert.Zero(t, ran.Load(), "the handler never ran for it")
	assert.Equal(t, http.StatusOK, <-held[0])
}
