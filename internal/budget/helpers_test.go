package budget

import (
	"net/http"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/hostmap"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testConfig is the configuration of retryhttp's default budget.
func testConfig() Config {
	return Config{Ratio: 0.1, Capacity: 10, MaxHosts: 1024, MaxWait: 2 * time.Second, MaxParked: 10_000}
}

// hostCount returns the number of hosts b tracks.
func hostCount(b *Budget) int {
	n := 0
	b.hosts.Each(func(hostmap.Key, *host) bool { n++; return true })
	return n
}

// hostOf returns the state of req's host, made if it is missing.
func (b *Budget) hostOf(req *http.Request) *host { return b.hosts.GetOrCreate(hostmap.KeyOf(req)) }

// laneWaiter returns a retry about to wait in h's pause lane, as Admit
// makes it: hold, for the host's stated pause; clock, its caller's.
func (b *Budget) laneWaiter(h *host, hold bool, clock any) *Waiter {
	return b.parkIn(h, &Retry{Hold: hold, Clock: clock}, true, 0).Waiter
}

// enqueue parks w on h.
func (b *Budget) enqueue(h *host, w *Waiter) bool {
	w.b, w.h = b, h
	return w.Enqueue()
}

// check returns where w stands: its state, how long it may sleep, its lease.
func (b *Budget) check(h *host, w *Waiter) (WaitState, time.Duration, Lease) {
	st := w.Check()
	return st.State, st.Sleep, st.Lease
}

// poke lets h look at the time.
func (b *Budget) poke(h *host) { h.lock(func() { h.step(b.clock(), input{ev: evPoke}) }) }

// leaseOf returns the lease of w, released on h.
func (b *Budget) leaseOf(h *host, w *Waiter) Lease {
	return Lease{b: b, host: h, seq: w.seq, held: w.seq != 0, lane: w.lane, hold: w.hold}
}

// pacing returns h's window, the slots held and the retries parked.
func (h *host) pacing() (window, inFlight, parked int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return int(h.p.window), h.p.inFlight, h.p.queue.n
}

// parks reports whether a retry without a token parks on h at time at:
// it is in an outage or recovering from one.
func (h *host) parks(at int64) bool {
	m := h.mode(at)
	return m == outage || m == recovering
}
