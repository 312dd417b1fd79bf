package quota

import (
	"container/heap"
	"fmt"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var host = Key{Host: "http://api"}

// answer records an IETF answer with r remaining and a reset in t seconds.
func answer(b *Book, tk Ticket, r, t int, at time.Time) {
	h := http.Header{"Ratelimit": {fmt.Sprintf(`"q";r=%d;t=%d`, r, t)}, "Ratelimit-Policy": {`"q";q=10;w=2`}}
	b.Done(tk, Read(h, at, IETF, 0, false), false, at)
}

func TestBookEmptyLetsGo(t *testing.T) {
	var b Book
	tk, h := b.Reserve(host, "", now, time.Minute)
	assert.Nil(t, h)
	b.Done(tk, nil, false, now) // nothing stated: nothing kept
	assert.Equal(t, int32(0), b.n.Load())
}

// In-flight sends count against the remaining count until answered.
func TestBookInFlightCounts(t *testing.T) {
	var b Book
	tk, _ := b.Reserve(host, "", now, time.Minute)
	answer(&b, tk, 2, 1, now)
	t1, h1 := b.Reserve(host, "", now, time.Minute)
	_, h2 := b.Reserve(host, "", now, time.Minute)
	require.Nil(t, h1)
	require.Nil(t, h2)
	_, h3 := b.Reserve(host, "", now, time.Minute)
	require.NotNil(t, h3, "two in flight take the two left")
	assert.Equal(t, time.Second, h3.Wait)
	assert.Equal(t, "q", h3.Policy)
	answer(&b, t1, 1, 1, now) // one answered: one left, one in flight
	_, h4 := b.Reserve(host, "", now, time.Minute)
	assert.NotNil(t, h4)
	// At the turn the window's quota (q=10) is there again.
	t5, h5 := b.Reserve(host, "", now.Add(time.Second), time.Minute)
	assert.Nil(t, h5)
	assert.NotZero(t, t5.mask)
}

// Waiters beyond the next window's quota are spread after the turn at the
// quota's pace (here 10 per 2 s: 200 ms apart); a wait past the bound does
// not count among them.
func TestBookSpreadsWaiters(t *testing.T) {
	var b Book
	tk, _ := b.Reserve(host, "", now, time.Minute)
	answer(&b, tk, 0, 1, now)
	var waits []time.Duration
	for i := 0; i < 12; i++ {
		_, h := b.Reserve(host, "", now, time.Minute)
		require.NotNil(t, h)
		waits = append(waits, h.Wait)
	}
	_, h := b.Reserve(host, "", now, time.Millisecond)
	assert.Equal(t, time.Second, h.Wait, "past the bound: stated, not counted")
	_, h = b.Reserve(host, "", now, time.Minute)
	assert.Equal(t, time.Second+600*time.Millisecond, h.Wait, "the 13th counted")
	for i := 0; i < 10; i++ {
		assert.Equal(t, time.Second, waits[i])
	}
	assert.Equal(t, time.Second+200*time.Millisecond, waits[10])
	assert.Equal(t, time.Second+400*time.Millisecond, waits[11])
}

// A routed (vendor) quota holds only the routes answered with it:
// GitHub's search quota spent does not hold the core API.
func TestBookRouted(t *testing.T) {
	var b Book
	tk, _ := b.Reserve(host, "search", now, time.Minute)
	h := http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"30"}, "X-Ratelimit-Resource": {"search"}}
	b.Done(tk, Read(h, now, XRateLimit, 0, false), false, now)
	_, held := b.Reserve(host, "search", now, time.Minute)
	require.NotNil(t, held)
	assert.Equal(t, 30*time.Second, held.Wait)
	_, held = b.Reserve(host, "repos", now, time.Minute)
	assert.Nil(t, held)
}

// An answer to a send of a window past does not speak for the new one.
func TestBookStaleAnswer(t *testing.T) {
	var b Book
	tk, _ := b.Reserve(host, "", now, time.Minute)
	answer(&b, tk, 5, 1, now)
	old, _ := b.Reserve(host, "", now.Add(900*time.Millisecond), time.Minute)
	later := now.Add(1100 * time.Millisecond)
	fresh, h := b.Reserve(host, "", later, time.Minute) // the window turned
	require.Nil(t, h)
	answer(&b, old, 0, 1, later) // counted in the old window
	_, h = b.Reserve(host, "", later, time.Minute)
	assert.Nil(t, h, "the old window's 0 does not hold the new")
	answer(&b, fresh, 0, 2, later)
	_, h = b.Reserve(host, "", later, time.Minute)
	assert.NotNil(t, h)
}

// Bounded memory: at most MaxScopes scopes, the least recently used goes.
func TestBookBounded(t *testing.T) {
	var b Book
	for i := 0; i < MaxScopes+10; i++ {
		k := Key{Host: "h", Name: fmt.Sprint(i)}
		tk, _ := b.Reserve(k, "", now.Add(time.Duration(i)), time.Minute)
		answer(&b, tk, 1, 1, now.Add(time.Duration(i)))
	}
	assert.Equal(t, int32(MaxScopes), b.n.Load())
	assert.Nil(t, b.scopes[Key{Host: "h", Name: "0"}])
}

// The simulations below run closed loops against a simulated server that
// states its quota on every answer, in simulated time: the figures the
// transport's tests measure on a real server, checked here in
// milliseconds. Each worker sends its next request as soon as the last is
// answered, unless the Book holds it; a 429 is sent again at once (the
// Book then holds it).

type simServer struct {
	quota  int
	window time.Duration
	bucket bool // a token bucket of quota tokens, refilled over window

	count  map[int64]int // fixed window: sends per window index
	tokens float64
	last   time.Duration
}

// serve answers a send arriving at at: whether it was let through, and the
// count and reset it states.
func (s *simServer) serve(at time.Duration) (ok bool, r, t int) {
	if s.bucket {
		rate := float64(s.quota) / s.window.Seconds()
		s.tokens = math.Min(float64(s.quota), s.tokens+rate*(at-s.last).Seconds())
		s.last = at
		if s.tokens >= 1 {
			s.tokens--
			ok = true
		}
		return ok, int(s.tokens), int(math.Ceil((float64(s.quota) - s.tokens) / rate))
	}
	w := int64(at / s.window)
	if s.count[w] < s.quota {
		s.count[w]++
		ok = true
	}
	left := time.Duration(w+1)*s.window - at
	return ok, s.quota - s.count[w], int(math.Ceil(left.Seconds()))
}

type simEvent struct {
	at       time.Duration
	client   int
	worker   int
	answered bool // false: the worker asks the Book
	tk       Ticket
	h        http.Header // the answer's header
	ok       bool        // the answer let the send through
}

type simQueue []simEvent

func (q simQueue) Len() int            { return len(q) }
func (q simQueue) Less(i, j int) bool  { return q[i].at < q[j].at }
func (q simQueue) Swap(i, j int)       { q[i], q[j] = q[j], q[i] }
func (q *simQueue) Push(x interface{}) { *q = append(*q, x.(simEvent)) }
func (q *simQueue) Pop() interface{} {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// simulate runs clients closed loops of workers each, n requests per
// client, against s, with a one-way latency lat; it returns the sends the
// server refused and the time the last client finished.
func simulate(s *simServer, clients, workers, n int, lat time.Duration) (refused int, took time.Duration) {
	s.count, s.tokens = map[int64]int{}, float64(s.quota)
	books := make([]Book, clients)
	started := make([]int, clients)
	done := make([]int, clients)
	q := &simQueue{}
	for c := 0; c < clients; c++ {
		for w := 0; w < workers; w++ {
			heap.Push(q, simEvent{at: time.Duration(c*workers+w) * time.Microsecond, client: c, worker: w})
			started[c]++
		}
	}
	for q.Len() > 0 {
		e := heap.Pop(q).(simEvent)
		b, at := &books[e.client], now.Add(e.at)
		if !e.answered {
			tk, h := b.Reserve(host, "", at, time.Minute)
			if h != nil {
				heap.Push(q, simEvent{at: e.at + h.Wait, client: e.client, worker: e.worker})
				continue
			}
			ok, r, t := s.serve(e.at + lat)
			if !ok {
				refused++
			}
			hdr := http.Header{"Ratelimit": {fmt.Sprintf(`"q";r=%d;t=%d`, r, t)},
				"Ratelimit-Policy": {fmt.Sprintf(`"q";q=%d;w=%d`, s.quota, int(s.window.Seconds()))}}
			heap.Push(q, simEvent{at: e.at + 2*lat, client: e.client, worker: e.worker, answered: true, tk: tk, h: hdr, ok: ok})
			continue
		}
		b.Done(e.tk, Read(e.h, at, IETF, 0, false), !e.ok, at)
		if !e.ok {
			heap.Push(q, simEvent{at: e.at, client: e.client, worker: e.worker}) // sent again
			continue
		}
		done[e.client]++
		took = max(took, e.at)
		if started[e.client] < n {
			started[e.client]++
			heap.Push(q, simEvent{at: e.at, client: e.client, worker: e.worker})
		}
	}
	return refused, took
}

// The bars of the issue, in simulated time: 200 requests from 10 workers
// against 50 per 2 s: at most 2% refused, within 1.15x of (n - quota) /
// rate; four clients sharing the quota: at most 5%, within 1.25x. Only the
// fixed window with one client meets them so far; the other rows pin
// today's figures (bars marked "not yet": the token bucket whose reset is
// the time to a full bucket, and the fleet's share estimate, are open
// work, see the branch's report) so that a change that makes them worse
// fails.
func TestBookSimulatedBatches(t *testing.T) {
	tests := []struct {
		name        string
		bucket      bool
		clients     int
		maxRefused  float64
		maxSlowdown float64
	}{
		{"fixed window", false, 1, 0.02, 1.15},
		{"token bucket (not yet)", true, 1, 0.03, 1.6},
		{"fixed window, 4 clients (not yet)", false, 4, 0.16, 1.4},
		{"token bucket, 4 clients (not yet)", true, 4, 0.07, 1.4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &simServer{quota: 50, window: 2 * time.Second, bucket: tt.bucket}
			const n = 200
			refused, took := simulate(s, tt.clients, 10, n, 5*time.Millisecond)
			total := n * tt.clients
			limit := time.Duration(float64(total-s.quota) / 25 * float64(time.Second))
			t.Logf("%d clients: %d of %d refused (%.1f%%), %v for a limit of %v (%.2fx)",
				tt.clients, refused, total, 100*float64(refused)/float64(total), took, limit, took.Seconds()/limit.Seconds())
			assert.LessOrEqual(t, float64(refused), tt.maxRefused*float64(total))
			assert.LessOrEqual(t, took.Seconds(), tt.maxSlowdown*limit.Seconds())
		})
	}
}
