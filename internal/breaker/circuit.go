package breaker

import "time"

// count adds a sample of age to the window of the closed phase p, unless
// the window has moved past that age: its bucket then holds a later age.
// It takes no lock.
func (s *Set) count(p *phase, age uint64, failed bool) {
	slot := &p.window[age%s.buckets]
	for {
		k := slot.Load()
		switch {
		case k != nil && k.age == age:
		case k != nil && k.age > age:
			return // out of the window
		default: // the bucket's samples, if any, are older than the window
			fresh := &bucket{age: age}
			if !slot.CompareAndSwap(k, fresh) {
				continue
			}
			k = fresh
		}
		if failed {
			k.failures.Add(1)
		} else {
			k.successes.Add(1)
		}
		return
	}
}

// trips reports whether the closed phase p's window, at age now, holds
// enough samples, failed in a large enough share, to open the circuit.
func (s *Set) trips(p *phase, now uint64) bool {
	var successes, failures uint64
	for i := range p.window {
		if k := p.window[i].Load(); k != nil && k.age <= now && now-k.age < s.buckets {
			successes += k.successes.Load()
			failures += k.failures.Load()
		}
	}
	n := successes + failures
	return n >= uint64(s.minRequests) && float64(failures) >= s.ratio*float64(n)
}

// current returns c's phase at now, first opening the half-open phase if
// the open one has lasted its time. c.mu must be held.
func (c *circuit) current(now time.Time) *phase {
	p := c.phase.Load()
	if p.state == Open && p.until.Before(now) {
		p = c.become(HalfOpen, now)
	}
	return p
}

// become starts a phase in state to, and queues the change for the
// callback. c.mu must be held.
func (c *circuit) become(to State, now time.Time) *phase {
	from := c.phase.Load().state
	p := c.s.newPhase(to, now)
	c.phase.Store(p)
	if c.s.notify != nil {
		c.s.notify.push(stateChange{c.host, from, to})
	}
	return p
}

// state returns c's state at now. Only an open circuit whose time is up
// takes the lock, to become half-open; the change is delivered to the
// callback by the next request's Allow or Done, not here: Park calls this
// under parkMu.
func (c *circuit) state(now time.Time) State {
	p := c.phase.Load()
	if p.state != Open || !p.until.Before(now) {
		return p.state
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.current(now).state
}

// Idle reports whether the circuit is closed and let no request through
// within its window, so that forgetting it loses nothing.
func (c *circuit) Idle() bool {
	p := c.phase.Load()
	if p.state != Closed {
		return false
	}
	last := p.lastAllow.Load()
	return last == 0 || c.s.age(p, c.s.now())-(last-1) >= c.s.buckets
}

// Busy reports false: a circuit may always be forgotten.
func (c *circuit) Busy() bool { return false }
