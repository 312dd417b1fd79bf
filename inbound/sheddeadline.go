package inbound

import (
	"io"
	"net/http"
	"time"

	"github.com/seed2409de8f/retryhttp"
)

// No work for callers who left. A request whose context has a deadline
// (the caller's, set by Deadline from the header its Transport sent) is
// worth serving only if its response can arrive in time: LoadShedder
// refuses it at once when the time left is shorter than its expected wait
// in the queue plus the usual latency of the service, and drops it when it
// leaves the queue with less than the usual latency left. Its 503 carries
// Retry-Pushback: no-retry, since nobody above should send it again for a
// caller that is gone. docs/deadlines.md gives the rule and the
// measurements.

// latencySmoothing is the weight of a new latency in the usual latency,
// a moving average of the latencies of the requests timed.
const latencySmoothing = 8 // 1/8

// lateFor reports whether a request with deadline, expected to wait wait
// before a slot is free, would be served after its caller stops waiting.
func (s *LoadShedder) lateFor(deadline time.Time, wait time.Duration) bool {
	left := deadline.Sub(s.now())
	return left <= 0 || left < wait+time.Duration(s.latency.Load())
}

// expectedWait estimates the wait of a request arriving now: none if a slot
// is free and nobody waits; otherwise, by Little's law, the requests ahead
// of it (the queue and itself) served limit at a time, each in the usual
// latency.
func (s *LoadShedder) expectedWait() time.Duration {
	queued, limit := s.queued.Load(), s.limit.Load()
	if queued == 0 && s.inflight.Load() < limit {
		return 0
	}
	perSlot := float64(s.latency.Load()) / float64(max(limit, 1))
	return time.Duration(min(float64(queued+1)*perSlot, float64(time.Hour)))
}

// observeLatency feeds the latency of a request handled to the usual
// latency. Concurrent updates may overwrite one another: each is a sample,
// and losing a few changes the average little.
func (s *LoadShedder) observeLatency(d time.Duration) {
	d = max(d, 0)
	old := time.Duration(s.latency.Load())
	if old == 0 {
		s.latency.Store(int64(d))
		return
	}
	s.latency.Store(int64(old + (d-old)/latencySmoothing))
}

// refuseLate writes the answer to a request shed for its caller's deadline:
// 503 with Retry-Pushback: no-retry, and no Retry-After.
func refuseLate(w http.ResponseWriter) {
	h := w.Header()
	h[retryhttp.RetrySignalHeader] = []string{retryhttp.RetrySignalNoRetry}
	h["Content-Type"] = []string{"text/plain; charset=utf-8"}
	h["X-Content-Type-Options"] = []string{"nosniff"}
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = io.WriteString(w, "deadline: the caller's time is up\n")
}
