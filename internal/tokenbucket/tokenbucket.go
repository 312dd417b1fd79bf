// Package tokenbucket is the token bucket of the rate-limited servers that
// the retry lab (cmd/retrylab) and the root package's closed-loop tests
// put in front of their clients: a model of a rate-limited API, not part
// of the library.
package tokenbucket

import (
	"sync"
	"time"
)

// Bucket holds up to burst tokens, refilled at rate tokens per second. It
// reads no clock: the time is passed to Take, and the refill is computed
// from it lazily. Safe for concurrent use.
type Bucket struct {
	rate, burst float64

	mu     sync.Mutex
	tokens float64
	last   time.Time // of the last refill
}

// New returns a full bucket at now.
func New(rate, burst float64, now time.Time) *Bucket {
	return &Bucket{rate: rate, burst: burst, tokens: burst, last: now}
}

// Take refills the bucket up to t and takes a token from it if there is
// one, and reports whether there was. A t before the last refill refills
// nothing.
func (b *Bucket) Take(t time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t.After(b.last) {
		b.tokens = min(b.burst, b.tokens+t.Sub(b.last).Seconds()*b.rate)
		b.last = t
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
