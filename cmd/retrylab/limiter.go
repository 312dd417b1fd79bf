package main

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/tokenbucket"
)

// Paths and header of the rate-limited server.
const (
	limitedPath = "/limited" // through the token bucket
	freePath    = "/free"    // never limited
	// labRequestHeader names a logical request: every attempt of it,
	// retries included, carries the same value, so that the server can
	// tell when a retry comes back sooner than its last 429 said.
	labRequestHeader = "X-Lab-Request"
)

// stated is the pause a 429 asked of a logical request: not before at+pause.
type stated struct {
	at    time.Time
	pause time.Duration
}

// limiter is a rate-limited API: GET /limited goes through a token bucket
// and is answered 200 within its rate, 429 with Retry-After: retryAfter
// (whole seconds) beyond it; GET /free is always answered 200. It counts the
// arrivals on /limited, and those that came early: a retry of a logical
// request (labRequestHeader) that arrived before the pause stated by the
// last 429 of that request had passed.
type limiter struct {
	bucket     *tokenbucket.Bucket
	retryAfter int // seconds

	arrivals atomic.Int64 // on /limited
	limited  atomic.Int64 // answered 429
	early    atomic.Int64
	free     atomic.Int64 // arrivals on /free

	mu   sync.Mutex
	last map[string]stated // per logical request, its last 429
}

// newLimiter returns a limiter whose bucket is full now.
func newLimiter(rate, burst float64, retryAfter int) *limiter {
	return &limiter{bucket: tokenbucket.New(rate, burst, time.Now()), retryAfter: retryAfter, last: map[string]stated{}}
}

// serve is the limiter's handler.
func (l *limiter) serve(w http.ResponseWriter, r *http.Request) int {
	if r.URL.Path != limitedPath {
		l.free.Add(1)
		w.WriteHeader(http.StatusOK)
		return http.StatusOK
	}
	now := time.Now()
	l.arrivals.Add(1)
	ok := l.bucket.Take(now)
	l.note(r.Header.Get(labRequestHeader), now, ok)
	if ok {
		w.WriteHeader(http.StatusOK)
		return http.StatusOK
	}
	l.limited.Add(1)
	w.Header().Set("Retry-After", strconv.Itoa(l.retryAfter))
	w.WriteHeader(http.StatusTooManyRequests)
	return http.StatusTooManyRequests
}

// note counts an arrival of logical request id at now as early if its last
// 429 asked it to wait longer, and records the 429 it gets now unless ok.
// The time of a 429 is taken before it is written: a client that waits
// exactly the pause from when it reads the 429 is never early.
func (l *limiter) note(id string, now time.Time, ok bool) {
	if id == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if s, seen := l.last[id]; seen && now.Before(s.at.Add(s.pause)) {
		l.early.Add(1)
	}
	if !ok {
		l.last[id] = stated{at: now, pause: time.Duration(l.retryAfter) * time.Second}
	}
}
