package inbound

import (
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Load shedding. A server protects itself by refusing the work it cannot do
// in time, early and cheaply, with an answer its callers know how to treat:
// 503 with a Retry-After. A request refused so was never processed, so the
// caller directly above may send it again after the wait; Pushback on that
// caller's own inbound side keeps the callers above it from doing the same
// once it gives up. docs/shedding.md gives the design, the parameters and
// the measurements.

// LoadShedderOptions configures NewLoadShedder. The zero value of every
// field means its default; invalid values are replaced as each field says.
type LoadShedderOptions struct {
	// Limit is the most requests handled at once; the excess waits in the
	// queue, if there is one, or is shed. With Adaptive, it is the limit
	// the adaptive one starts from, after its first probe (at MinLimit).
	// Zero or negative means the default: 100 for a fixed limit, 20 for an
	// adaptive one. Values above 2^20 are treated as 2^20; an
	// adaptive one is moved into [MinLimit, MaxLimit].
	Limit int

	// Adaptive makes the limit follow the measured latency of the requests
	// it admits: it grows while their latency stays near the lowest seen,
	// and shrinks in proportion when queueing raises it.
	Adaptive bool

	// MinLimit and MaxLimit bound an adaptive limit: 2 and 1,000 by
	// default (zero or negative). A MaxLimit below MinLimit is raised to
	// MinLimit; values above 2^20 are treated as 2^20. They are ignored
	// for a fixed limit.
	MinLimit, MaxLimit int

	// ProbeInterval is how often an adaptive limit measures the latency of
	// the service without load, by dropping to MinLimit for one window of
	// requests admitted after the drop (at least 10 of them): 30s by
	// default (zero or negative), moved at random by up to a quarter so
	// that the servers of a fleet do not probe together. The first probe
	// is at the start. Ignored for a fixed limit.
	ProbeInterval time.Duration

	// MaxQueue is how many requests may wait for a slot when the limit is
	// reached; the default, zero (or negative), is no queue: the excess is
	// shed at once. Values above 2^20 are treated as 2^20. Waiters are
	// admitted first come, first served.
	MaxQueue int

	// MaxQueueWait bounds the time a request waits in the queue before it
	// is shed: 100ms by default (zero or negative). Ignored without a
	// queue.
	MaxQueueWait time.Duration

	// RetryAfter is the wait a shed request's Retry-After asks for, before
	// jitter: 1s by default (zero or negative). It is rounded up to whole
	// seconds, the unit of the header, and values above one hour are
	// treated as one hour.
	RetryAfter time.Duration

	// RetryAfterJitter spreads the Retry-After of shed requests, so that
	// the callers refused together do not come back together: each gets a
	// whole number of seconds drawn uniformly from [RetryAfter,
	// RetryAfter·(1+RetryAfterJitter)], rounded down at the top (with the
	// defaults, 1s and 1, a shed request gets 1 or 2 seconds). Zero and
	// NaN mean the default, 1; negative means no jitter; values above 10
	// are treated as 10. This library's clients add jitter of their own
	// (retryhttp.CustomizedDelayFnOptions.JitterMagnitude).
	RetryAfterJitter float64

	// MustPass, if set, names the requests that are never shed: health
	// checks, priority traffic. They are handled at once, whatever the
	// load, and do not count against the limit nor feed the adaptive one.
	// It is called for every request, concurrently, and must be fast.
	MustPass func(*http.Request) bool

	// OnDecision, if set, is called for every request, before it is
	// handled or refused, on the request's goroutine: with the decision,
	// for metrics and logs. It must be fast and safe for concurrent use.
	OnDecision func(ShedDecision)

	// OnLimitChange, if set, is called when an adaptive limit changes,
	// with the old and the new limit, on the goroutine of the request
	// whose completion changed it and outside any lock. Changes that
	// happen at nearly the same time may be reported out of order:
	// LoadShedder.Stats().Limit has the current value.
	OnLimitChange func(from, to int)
}

// LoadShedder limits the requests a server handles at once, and refuses the
// excess with 503 Service Unavailable and a jittered Retry-After, before
// the handler runs: a shed request costs the server almost nothing, and was
// never processed, so its caller may send it again after the wait, whatever
// its method. The response does not carry retryhttp.RetrySignalHeader: the
// caller one hop up is the one that should retry it, within its own budget;
// when it gives up, Pushback on its inbound side tells the callers above it
// not to. A request whose caller's deadline leaves no time is the exception
// (ShedTooLate, ShedExpired; docs/deadlines.md).
// docs/shedding.md explains why, with the chain's arithmetic.
//
// One LoadShedder holds one limit: wrap every handler that shares the
// server's capacity with the same one (Handler may be called any number of
// times). The limit is fixed, or adaptive (LoadShedderOptions.Adaptive).
// Requests over the limit wait in a bounded queue, if there is one, for a
// bounded time. A LoadShedder is safe for concurrent use; it starts no
// goroutine and holds no timer but those of requests waiting in its queue.
// Its happy path, a request admitted at once, costs a few atomic
// operations, and, with an adaptive limit, two clock reads and one short
// critical section when the request ends.
//
// A request holds its slot until its handler returns: streaming responses
// and hijacked connections hold theirs as long as they last. Keep them out
// with MustPass, or out of the wrapped handler.
type LoadShedder struct {
	inflight atomic.Int64 // requests admitted, not yet returned
	limit    atomic.Int64
	queued   atomic.Int64 // waiters, and arrivals about to queue
	admitted atomic.Uint64
	shed     atomic.Uint64
	late     atomic.Uint64 // of shed: ShedTooLate, ShedExpired
	latency  atomic.Int64  // the usual latency of a request, ns (sheddeadline.go)

	mu      sync.Mutex
	waiters []*shedWaiter // first come, first served

	adaptive *adaptiveLimit // nil for a fixed limit

	maxQueue       int
	maxQueueWait   time.Duration
	retryAfterLo   int // seconds
	retryAfterHi   int
	mustPass       func(*http.Request) bool
	onDecision     func(ShedDecision)
	onLimitChange  func(from, to int)
	now            func() time.Time
	rand           func() float64
	newTimer       func(time.Duration) (<-chan time.Time, func() bool)
	retryAfterText []string // "1", "2", … for each value in range, when few
}

const (
	defaultShedQueueWait  = 100 * time.Millisecond
	defaultShedRetryAfter = time.Second
	defaultShedJitter     = 1.0
	maxShedRetryAfter     = time.Hour
	maxShedJitter         = 10
)

// NewLoadShedder returns a LoadShedder with opts, its invalid values
// replaced as LoadShedderOptions documents. It never fails.
func NewLoadShedder(opts LoadShedderOptions) *LoadShedder {
	s := &LoadShedder{
		mustPass:      opts.MustPass,
		onDecision:    opts.OnDecision,
		onLimitChange: opts.OnLimitChange,
		now:           time.Now,
		rand:          rand.Float64,
		newTimer:      newRealTimer,
		maxQueue:      min(max(opts.MaxQueue, 0), maxShedLimit),
		maxQueueWait:  opts.MaxQueueWait,
	}
	if s.maxQueueWait <= 0 {
		s.maxQueueWait = defaultShedQueueWait
	}
	limit := opts.Limit
	if opts.Adaptive {
		lo, hi := clampPositive(opts.MinLimit, defaultShedMinLimit), clampPositive(opts.MaxLimit, defaultShedMaxLimit)
		hi = max(hi, lo)
		limit = min(max(clampPositive(limit, defaultShedInitialLimit), lo), hi)
		interval := opts.ProbeInterval
		if interval <= 0 {
			interval = defaultShedProbeInterval
		}
		s.adaptive = newAdaptiveLimit(limit, lo, hi, interval)
		limit = s.adaptive.start()
	} else {
		limit = clampPositive(limit, defaultShedLimit)
	}
	s.limit.Store(int64(limit))
	s.retryAfterLo, s.retryAfterHi = retryAfterRange(opts.RetryAfter, opts.RetryAfterJitter)
	if s.retryAfterHi-s.retryAfterLo < 64 {
		for n := s.retryAfterLo; n <= s.retryAfterHi; n++ {
			s.retryAfterText = append(s.retryAfterText, strconv.Itoa(n))
		}
	}
	return s
}

// clampPositive returns v in [1, maxShedLimit], or def if v is not positive.
func clampPositive(v, def int) int {
	if v <= 0 {
		return def
	}
	return min(v, maxShedLimit)
}

// retryAfterRange returns the range, in whole seconds, of the Retry-After of
// a shed request.
func retryAfterRange(base time.Duration, jitter float64) (lo, hi int) {
	if base <= 0 {
		base = defaultShedRetryAfter
	}
	base = min(base, maxShedRetryAfter)
	lo = int((base + time.Second - 1) / time.Second)
	switch {
	case jitter == 0 || math.IsNaN(jitter):
		jitter = defaultShedJitter
	case jitter < 0:
		jitter = 0
	case jitter > maxShedJitter:
		jitter = maxShedJitter
	}
	hi = max(lo, int(float64(lo)*(1+jitter)))
	return lo, hi
}

// Stats returns the shedder's current limit and counters. The values are
// read one after the other, not as one snapshot. It is safe to call at any
// time, from OnLimitChange and OnDecision hooks included.
func (s *LoadShedder) Stats() LoadShedderStats {
	return LoadShedderStats{
		Limit: int(s.limit.Load()), InFlight: int(s.inflight.Load()), Queued: int(s.queued.Load()),
		Admitted: s.admitted.Load(), Shed: s.shed.Load(), Late: s.late.Load(),
	}
}

// Handler returns next wrapped by the shedder. A nil next is treated as
// http.NotFoundHandler(). A nil *LoadShedder returns next unchanged.
func (s *LoadShedder) Handler(next http.Handler) http.Handler {
	if next == nil {
		next = http.NotFoundHandler()
	}
	if s == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, next) })
}

// serve admits r and runs next, or refuses it: the flow of one request.
func (s *LoadShedder) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	// Requests that must pass: no slot, no measurement.
	if s.mustPass != nil && s.mustPass(r) {
		s.admitted.Add(1)
		s.decided(r, false, ShedNone, true, 0)
		next.ServeHTTP(w, r)
		return
	}
	// A caller that will have gone before the request is served: refused
	// at once (sheddeadline.go).
	deadline, timed := r.Context().Deadline()
	if timed && s.lateFor(deadline, s.expectedWait()) {
		s.refused(w, r, ShedTooLate, 0)
		return
	}
	// The happy path: a slot is free and nobody waits for one.
	inflight, ok := s.acquireNow()
	var waited time.Duration
	if !ok {
		var reason ShedReason
		inflight, waited, reason = s.wait(r.Context())
		if reason == ShedNone && timed && s.lateFor(deadline, 0) {
			s.release() // too little time left once a slot came free
			reason = ShedExpired
		}
		if reason != ShedNone {
			s.refused(w, r, reason, waited)
			return
		}
	}
	s.admitted.Add(1)
	s.decided(r, false, ShedNone, false, waited)
	if s.adaptive == nil && !timed {
		defer s.release()
		next.ServeHTTP(w, r)
		return
	}
	// Timed: for the adaptive limit, and for the usual latency that the
	// deadlines of later requests are compared with.
	var epoch uint64
	if s.adaptive != nil {
		epoch = s.adaptive.epoch.Load()
	}
	start := s.now()
	defer s.releaseTimed(start, inflight, epoch)
	next.ServeHTTP(w, r)
}

// acquireNow takes a slot if one is free and no request waits in the queue,
// and returns the requests then in flight.
func (s *LoadShedder) acquireNow() (int64, bool) {
	if s.queued.Load() != 0 {
		return 0, false
	}
	return s.tryAcquire()
}

// tryAcquire takes a slot if one is free.
func (s *LoadShedder) tryAcquire() (int64, bool) {
	for {
		n := s.inflight.Load()
		if n >= s.limit.Load() {
			return n, false
		}
		if s.inflight.CompareAndSwap(n, n+1) {
			return n + 1, true
		}
	}
}

// release frees a slot, and hands it to a waiter if there is one.
func (s *LoadShedder) release() {
	s.inflight.Add(-1)
	if s.queued.Load() != 0 {
		s.mu.Lock()
		s.dispatchLocked()
		s.mu.Unlock()
	}
}

// releaseTimed frees the slot of a request admitted in epoch with inflight
// requests in flight at start, and feeds its latency to the usual latency
// and to the adaptive limit, if any.
func (s *LoadShedder) releaseTimed(start time.Time, inflight int64, epoch uint64) {
	end := s.now()
	s.observeLatency(end.Sub(start))
	if s.adaptive == nil {
		s.release()
		return
	}
	limit, changed := s.adaptive.record(end.Sub(start), inflight, epoch, end, s.rand)
	var from int64
	if changed {
		from = s.limit.Swap(int64(limit))
	}
	s.release()
	if changed && s.onLimitChange != nil {
		s.onLimitChange(int(from), limit)
	}
}

// refused counts a request shed for reason, reports it, and answers it.
func (s *LoadShedder) refused(w http.ResponseWriter, r *http.Request, reason ShedReason, waited time.Duration) {
	s.shed.Add(1)
	late := reason == ShedTooLate || reason == ShedExpired
	if late {
		s.late.Add(1)
	}
	s.decided(r, true, reason, false, waited)
	if late {
		refuseLate(w)
		return
	}
	s.refuse(w)
}

// refuse writes the answer to a shed request.
func (s *LoadShedder) refuse(w http.ResponseWriter) {
	h := w.Header()
	h["Retry-After"] = []string{s.retryAfter()}
	h["Content-Type"] = []string{"text/plain; charset=utf-8"}
	h["X-Content-Type-Options"] = []string{"nosniff"}
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = io.WriteString(w, "overloaded: retry later\n")
}

// retryAfter draws the Retry-After of a shed request, in whole seconds.
func (s *LoadShedder) retryAfter() string {
	span := s.retryAfterHi - s.retryAfterLo + 1
	i := min(int(s.rand()*float64(span)), span-1)
	i = max(i, 0)
	if i < len(s.retryAfterText) {
		return s.retryAfterText[i]
	}
	return strconv.Itoa(s.retryAfterLo + i)
}

// decided reports a decision to the OnDecision hook, if any.
func (s *LoadShedder) decided(r *http.Request, shed bool, reason ShedReason, mustPass bool, waited time.Duration) {
	if s.onDecision == nil {
		return
	}
	s.onDecision(ShedDecision{
		Req: r, Shed: shed, Reason: reason, MustPass: mustPass,
		Limit: int(s.limit.Load()), InFlight: int(s.inflight.Load()), Queued: int(s.queued.Load()),
		Waited: waited,
	})
}
