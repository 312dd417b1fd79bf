package budget

import "time"

// Lease is a retry's claim on its host: a slot of the window (held), to
// give back with the attempt's outcome, or nothing; and the tokens its
// request took for its retries, given back if this one succeeds (Settle).
// The zero Lease claims nothing.
type Lease struct {
	b    *Budget
	host *host
	seq  uint64
	held bool
	lane bool // released by the pause lane (lane.go)…
	hold bool // …to a caller that holds for the host's stated pause
	owed int
}

// End gives the slot back with the attempt's outcome, if one is held.
func (l *Lease) End(out SlotOutcome, lat, timeout time.Duration) {
	if l == nil || !l.held {
		return
	}
	l.held = false
	h := l.host
	h.mu.Lock()
	if l.lane {
		h.laneSettle(l.b.clock(), l.seq, out, false, l.hold)
		h.step(l.b.clock(), input{ev: evPoke})
	} else {
		h.step(l.b.clock(), input{ev: evSettle, out: out, seq: l.seq, lat: lat, timeout: timeout})
	}
	h.mu.Unlock()
}
