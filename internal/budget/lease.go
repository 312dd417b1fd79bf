package budget

import (
	"net/http"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/hostmap"
)

// Lease is a retry's claim on its host: a slot of the window (held), to
// give back with the attempt's outcome, or nothing; and the tokens its
// request took for its retries, given back if this one succeeds (Settle).
// The zero Lease claims nothing.
type Lease struct {
	b    *Budget
	host *Host
	seq  uint64
	held bool
	lane bool // released by the pause lane (lane.go)
	owed int
}

// Held reports whether l holds a slot of its host's window.
func (l *Lease) Held() bool { return l.held }

// End gives the slot back with the attempt's outcome, if one is held.
func (l *Lease) End(out SlotOutcome, lat, timeout time.Duration) {
	if l == nil || !l.held {
		return
	}
	l.held = false
	h := l.host
	h.mu.Lock()
	if l.lane {
		h.laneSettle(l.b.clock(), l.seq, out, false)
		h.step(l.b.clock(), input{ev: evPoke})
	} else {
		h.step(l.b.clock(), input{ev: evSettle, out: out, seq: l.seq, lat: lat, timeout: timeout})
	}
	h.mu.Unlock()
}

// TakeNow claims a retry of req without waiting: a token, or else a slot
// of the window if parking is on, the gate is open, the window has room and
// nothing is parked. Hedges take their attempts this way. A nil budget
// allows everything.
func (b *Budget) TakeNow(req *http.Request) (Lease, bool) {
	if b == nil {
		return Lease{}, true
	}
	h := b.hosts.GetOrCreate(hostmap.KeyOf(req))
	if h.Withdraw() {
		return Lease{b: b, host: h}, true
	}
	if b.noParking {
		return Lease{}, false
	}
	h.mu.Lock()
	granted, seq := h.step(b.clock(), input{ev: evTake})
	h.mu.Unlock()
	return Lease{b: b, host: h, seq: seq, held: granted}, granted
}
