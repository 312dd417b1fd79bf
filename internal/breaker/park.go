package breaker

import (
	"net/http"

	"github.com/seed2409de8f/retryhttp/internal/hostmap"
)

// Parking is a place where retries park (a retry budget), seen from the
// circuits whose retries park there: when a circuit opens, they fail at
// once rather than wait for a host the breaker gave up on.
type Parking interface {
	// Parked reports whether retries are parked on the host of k.
	Parked(k hostmap.Key) bool

	// FailParked fails at once the retries parked on the host of k whose
	// owner is owner (the *Set of their Transport's circuits, compared as
	// an opaque value).
	FailParked(k hostmap.Key, owner any)
}

// Park calls enqueue, which parks a retry of req in place in, and records
// in on the circuit of req's destination, so that the retry fails at once
// when the circuit opens, whichever place it parked in: a transport's
// budget, or a destination's own. Both happen under the circuit's parkMu,
// as the failing does, so that a circuit opening meanwhile either finds the
// retry parked or is open before it parks (the retry fails at once here).
// A nil s only calls enqueue.
func (s *Set) Park(req *http.Request, in Parking, enqueue func() bool) bool {
	if s == nil {
		return enqueue()
	}
	c := s.hosts.GetOrCreate(hostmap.KeyOf(req))
	c.parkMu.Lock()
	defer c.parkMu.Unlock()
	if !enqueue() {
		return false
	}
	kept := c.parkedIn[:0]
	found := false
	for _, p := range c.parkedIn {
		// Forget the places where nothing is parked on the host: none of
		// this set's retries, which park under parkMu, waits there.
		if p == in || p.Parked(c.key) {
			kept = append(kept, p)
			found = found || p == in
		}
	}
	clear(c.parkedIn[len(kept):])
	c.parkedIn = kept
	if !found {
		c.parkedIn = append(c.parkedIn, in)
	}
	if c.state(s.now()) == Open {
		in.FailParked(c.key, s) // it opened before: the retry fails at once
	}
	return true
}

// failParked fails at once s's retries parked on the host of c, in every
// place they parked in: c opened.
func (s *Set) failParked(c *circuit) {
	c.parkMu.Lock()
	defer c.parkMu.Unlock()
	for _, p := range c.parkedIn {
		p.FailParked(c.key, s)
	}
}
