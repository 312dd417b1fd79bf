// Package blip is the switch of the blipping servers that the retry lab
// (cmd/retrylab) and the black-box closed-loop tests put behind a worker
// pool: a model of a host that fails for a moment, not part of the
// library.
package blip

import (
	"sync"
	"sync/atomic"
	"time"
)

// Switch fails the requests of a blip of a given length, which starts with
// the first request that arrives once the switch is armed. The blip
// starting on an arrival, rather than at a time set in advance, makes sure
// that the callers meet it however late a loaded machine runs them. Safe
// for concurrent use; the zero Switch is not armed and never fails.
type Switch struct {
	// Arrivals counts the requests that arrived since it was armed.
	Arrivals atomic.Int64

	mu    sync.Mutex
	armed bool
	from  time.Time // the blip's start; zero until then
}

// Arm makes the next request start the blip.
func (s *Switch) Arm() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = true
}

// Failing records a request arriving at now and reports whether it falls
// within the blip, which lasts length from its start.
func (s *Switch) Failing(now time.Time, length time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.armed {
		s.Arrivals.Add(1)
		if s.from.IsZero() {
			s.from = now
		}
	}
	return !s.from.IsZero() && now.Sub(s.from) < length
}

// Start returns when the blip started, or the zero time if it did not.
func (s *Switch) Start() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.from
}
