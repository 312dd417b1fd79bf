package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

// server is an HTTP server on loopback that counts what it receives: every
// request, and per time bucket (100ms of model time) the requests that
// arrived, those answered with anything but 200 (both by arrival), and the
// useful answers: 200s written while their client was still waiting (by the
// time they were written). It also counts, by attempt number (as
// retryhttp.AttemptHeader carries it), the attempts that arrived, those
// answered with anything but 200, and those answered so while their client
// was still waiting: counts that do not depend on when the attempts arrived.
type server struct {
	URL   string
	srv   *http.Server
	lis   net.Listener
	start time.Time
	width time.Duration // of a bucket

	requests atomic.Int64
	byTry    [maxTry]tryCounts // by attempt number, from 1
	arrived  []atomic.Int64
	retried  []atomic.Int64 // of those, attempts after the first
	failed   []atomic.Int64
	useful   []atomic.Int64

	mu       sync.Mutex     // guards closed and the handlers' Add
	closed   bool           // close has begun: handlers that start now touch nothing
	handlers sync.WaitGroup // running handlers, waited for by close
}

// maxTry is the number of attempt numbers counted apart: 1 to 4, the first
// attempt and the 3 retries of retryhttp's default; later ones count as 4.
const maxTry = 4

// tryCounts counts the attempts of one attempt number.
type tryCounts struct {
	arrived, failed, live atomic.Int64
}

// tries is a snapshot of tryCounts.
type tries struct {
	arrived int64
	failed  int64 // answered other than 200
	live    int64 // of those, while their client was still waiting (to retry them, if it does)
}

// handlerFunc answers one request and returns the status it wrote.
type handlerFunc func(w http.ResponseWriter, r *http.Request) int

// startServer serves h on a loopback port. Buckets of width cover the run
// from start, up to n of them; later requests are counted in the last one.
func startServer(h handlerFunc, start time.Time, width time.Duration, n int) (*server, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &server{
		URL: "http://" + lis.Addr().String() + "/", lis: lis, start: start, width: width,
		arrived: make([]atomic.Int64, max(n, 1)), failed: make([]atomic.Int64, max(n, 1)),
		useful: make([]atomic.Int64, max(n, 1)), retried: make([]atomic.Int64, max(n, 1)),
	}
	s.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !s.enter() {
				w.WriteHeader(http.StatusServiceUnavailable) // closing: neither counted nor handled
				return
			}
			defer s.handlers.Done()
			s.requests.Add(1)
			try := &s.byTry[min(retryhttp.AttemptFromRequest(r), maxTry)-1]
			try.arrived.Add(1)
			i := s.bucket(time.Now())
			s.arrived[i].Add(1)
			if try != &s.byTry[0] {
				s.retried[i].Add(1)
			}
			switch {
			case h(w, r) != http.StatusOK:
				s.failed[i].Add(1)
				try.failed.Add(1)
				if r.Context().Err() == nil {
					try.live.Add(1)
				}
			case r.Context().Err() == nil: // the client is still there
				s.useful[s.bucket(time.Now())].Add(1)
			}
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = s.srv.Serve(lis) }()
	return s, nil
}

// bucket returns the index of the bucket of t.
func (s *server) bucket(t time.Time) int {
	i := int(t.Sub(s.start) / s.width)
	return min(max(i, 0), len(s.arrived)-1)
}

// series returns the requests that arrived, and those that failed, per
// bucket, for the first n buckets.
func (s *server) series(n int) (arrived, failed []float64) {
	n = min(n, len(s.arrived))
	arrived, failed = make([]float64, n), make([]float64, n)
	for i := range n {
		arrived[i] = float64(s.arrived[i].Load())
		failed[i] = float64(s.failed[i].Load())
	}
	return arrived, failed
}

// retriedPeak returns the most retries that arrived in one bucket from
// bucket from on.
func (s *server) retriedPeak(from int) float64 {
	peak := int64(0)
	for i := from; i < len(s.retried); i++ {
		peak = max(peak, s.retried[i].Load())
	}
	return float64(peak)
}

// tries returns the counts by attempt number: [0] for first attempts,
// [maxTry-1] for attempt maxTry and later ones.
func (s *server) tries() [maxTry]tries {
	var t [maxTry]tries
	for i := range t {
		c := &s.byTry[i]
		t[i] = tries{c.arrived.Load(), c.failed.Load(), c.live.Load()}
	}
	return t
}

// usefulSeries returns the useful answers per bucket, for the first n
// buckets.
func (s *server) usefulSeries(n int) []float64 {
	n = min(n, len(s.useful))
	useful := make([]float64, n)
	for i := range n {
		useful[i] = float64(s.useful[i].Load())
	}
	return useful
}

// enter registers a handler that starts, and reports whether it may run:
// not once close has begun. A handler that net/http started just before
// close (its connection accepted, its request read) can reach this after
// close returned: it must then touch neither the counts nor the handler's
// state, which the caller reads once close returns.
func (s *server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.handlers.Add(1)
	return true
}

// close stops the server and waits for the handlers that entered to return;
// none enters after. Closing twice is harmless.
func (s *server) close() {
	_ = s.srv.Close()
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.handlers.Wait()
}

// capacityHandler is a server with a fixed capacity: at most capacity
// requests are handled at once, each taking work; the excess is shed at once
// with 503 (and a Retry-After of retryAfter seconds, if positive). While
// failing reports true, every request is answered 503 at once (an outage).
type capacityHandler struct {
	capacity   int64
	work       time.Duration
	retryAfter int
	failing    func(time.Time) bool // nil: never

	inflight atomic.Int64
}

func (c *capacityHandler) serve(w http.ResponseWriter, r *http.Request) int {
	if c.failing != nil && c.failing(time.Now()) {
		w.WriteHeader(http.StatusServiceUnavailable)
		return http.StatusServiceUnavailable
	}
	if c.inflight.Add(1) > c.capacity {
		c.inflight.Add(-1)
		if c.retryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(c.retryAfter))
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		return http.StatusServiceUnavailable
	}
	defer c.inflight.Add(-1)
	if err := sleep(r.Context(), c.work); err != nil {
		return 0 // the client went away: nothing was answered
	}
	w.WriteHeader(http.StatusOK)
	return http.StatusOK
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errStatus is a response other than 200.
var errStatus = errors.New("status other than 200")

// get sends a GET to url through c and reports success: a 200 response whose
// body was read to the end.
func get(ctx context.Context, c *http.Client, url string) error {
	return getAs(ctx, c, url, "")
}

// getAs is get for the logical request id, which every attempt carries in
// labRequestHeader; "" sends none.
func getAs(ctx context.Context, c *http.Client, url, id string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if id != "" {
		req.Header.Set(labRequestHeader, id)
	}
	res, err := c.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return errStatus
	}
	return nil
}

// gaveUp counts the outcomes whose client gave up (http.Client.Timeout).
func gaveUp(cfg config, outcomes []outcome) int {
	n := 0
	for _, o := range outcomes {
		if !o.ok && o.latency >= cfg.scale(clientLimit) {
			n++
		}
	}
	return n
}
