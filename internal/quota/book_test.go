package quota

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
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
	tk, h := b.Reserve(host, "", now, time.Minute, nil)
	assert.Nil(t, h)
	b.Done(tk, nil, false, now) // nothing stated: nothing kept
	assert.Equal(t, int32(0), b.n.Load())
}

// In-flight sends count against the remaining count until answered.
func TestBookInFlightCounts(t *testing.T) {
	var b Book
	for r := 9; r >= 2; r-- { // a client alone spends a window of 10 down to 2
		tk, h := b.Reserve(host, "", now, time.Minute, nil)
		require.Nil(t, h)
		answer(&b, tk, r, 2, now)
	}
	t1, h1 := b.Reserve(host, "", now, time.Minute, nil)
	_, h2 := b.Reserve(host, "", now, time.Minute, nil)
	require.Nil(t, h1)
	require.Nil(t, h2)
	_, h3 := b.Reserve(host, "", now, time.Minute, nil)
	require.NotNil(t, h3, "two in flight take the two left")
	assert.Equal(t, 2*time.Second, h3.Wait)
	assert.Equal(t, "q", h3.Policy)
	answer(&b, t1, 1, 2, now) // one answered: one left, one in flight
	_, h4 := b.Reserve(host, "", now, time.Minute, nil)
	assert.NotNil(t, h4)
	// At the turn the window's quota (q=10) is there again.
	t5, h5 := b.Reserve(host, "", now.Add(2*time.Second), time.Minute, nil)
	assert.Nil(t, h5)
	assert.NotZero(t, t5.mask)
}

// Waiters beyond the next window's quota are spread after the turn at the
// quota's pace (here 10 per 2 s: 200 ms apart); a wait past the bound does
// not count among them.
func TestBookSpreadsWaiters(t *testing.T) {
	var b Book
	tk, _ := b.Reserve(host, "", now, time.Minute, nil)
	answer(&b, tk, 0, 1, now)
	var waits []time.Duration
	for i := 0; i < 12; i++ {
		_, h := b.Reserve(host, "", now, time.Minute, nil)
		require.NotNil(t, h)
		waits = append(waits, h.Wait)
	}
	_, h := b.Reserve(host, "", now, time.Millisecond, nil)
	assert.Equal(t, time.Second, h.Wait, "past the bound: stated, not counted")
	_, h = b.Reserve(host, "", now, time.Minute, nil)
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
	tk, _ := b.Reserve(host, "search", now, time.Minute, nil)
	h := http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {"30"}, "X-Ratelimit-Resource": {"search"}}
	b.Done(tk, Read(h, now, XRateLimit, 0, false), false, now)
	_, held := b.Reserve(host, "search", now, time.Minute, nil)
	require.NotNil(t, held)
	assert.Equal(t, 30*time.Second, held.Wait)
	_, held = b.Reserve(host, "repos", now, time.Minute, nil)
	assert.Nil(t, held)
}

// An answer to a send of a window past does not speak for the new one.
func TestBookStaleAnswer(t *testing.T) {
	var b Book
	tk, _ := b.Reserve(host, "", now, time.Minute, nil)
	answer(&b, tk, 5, 1, now)
	old, _ := b.Reserve(host, "", now.Add(900*time.Millisecond), time.Minute, nil)
	later := now.Add(1100 * time.Millisecond)
	fresh, h := b.Reserve(host, "", later, time.Minute, nil) // the window turned
	require.Nil(t, h)
	answer(&b, old, 0, 1, later) // counted in the old window
	answer(&b, fresh, 9, 2, later)
	_, h = b.Reserve(host, "", later, time.Minute, nil)
	assert.Nil(t, h, "the old window's 0 does not hold the new")
	spent, _ := b.Reserve(host, "", later, time.Minute, nil)
	answer(&b, spent, 0, 2, later)
	_, h = b.Reserve(host, "", later, time.Minute, nil)
	assert.NotNil(t, h)
}

// An answer to an earlier send that comes after the answers to later ones
// states a count from before them: it neither raises a window's count (as
// if the window had turned) nor a bucket's.
func TestBookLateAnswerIsOlderNews(t *testing.T) {
	var b Book
	first, _ := b.Reserve(host, "", now, time.Minute, nil)
	answer(&b, first, 9, 2, now) // a window: 9 of 10 left
	var sends []Ticket
	for i := range 9 {
		tk, h := b.Reserve(host, "", now.Add(time.Duration(i+1)*time.Microsecond), time.Minute, nil)
		require.Nil(t, h)
		sends = append(sends, tk)
	}
	for i := len(sends) - 1; i >= 1; i-- { // the later sends answered first: the count falls to 0
		answer(&b, sends[i], 8-i, 2, now)
	}
	_, h := b.Reserve(host, "", now, time.Minute, nil)
	require.NotNil(t, h, "8 answered, 1 in flight, 0 left")
	answer(&b, sends[0], 8, 2, now) // the earliest send, answered last: 8 left when it was counted
	_, h = b.Reserve(host, "", now, time.Minute, nil)
	assert.NotNil(t, h, "a late answer is not the window turning early")

	var k Book // a bucket: count and refill until the reset make the quota
	at := now
	var tks []Ticket
	for r := 3; r >= 0; r-- {
		tk, h := k.Reserve(host, "", at, time.Minute, nil)
		require.Nil(t, h)
		tks = append(tks, tk)
		answerBucket(&k, tk, r, at)
	}
	late, h := k.Reserve(host, "", at, time.Minute, nil)
	require.NotNil(t, h, "paced as a bucket: no token now")
	assert.Zero(t, late.mask)
	at = at.Add(time.Millisecond)
	answerBucket(&k, tks[0], 3, at) // an early send's answer, again, late: 3 tokens then
	_, h = k.Reserve(host, "", at, time.Minute, nil)
	assert.NotNil(t, h, "the bucket's count is the latest send's, not the latest answer's")
}

// A request whose slot of a bucket's pace came, but whose token the sends
// in flight claimed, waits for its own token, not for a slot behind every
// other waiter: wasted slots would pace the client below the rate.
func TestBookSlotKeptWhenTokenClaimed(t *testing.T) {
	var b Book
	at := now
	for r := 3; r >= 0; r-- { // a bucket of 10, 5 a second: a token every 200 ms
		tk, h := b.Reserve(host, "", at, time.Minute, nil)
		require.Nil(t, h)
		answerBucket(&b, tk, r, at)
	}
	var holds []*Hold
	for range 3 {
		_, h := b.Reserve(host, "", at, time.Minute, nil)
		require.NotNil(t, h)
		holds = append(holds, h)
	}
	require.Equal(t, 200*time.Millisecond, holds[0].Wait)
	at = at.Add(200 * time.Millisecond)
	_, h := b.Reserve(host, "", at, time.Minute, holds[1]) // early, and the token is there: it goes
	require.Nil(t, h)
	_, h = b.Reserve(host, "", at, time.Minute, holds[0]) // its slot, its token taken
	require.NotNil(t, h)
	assert.Equal(t, 200*time.Millisecond, h.Wait, "the next token's time, not a slot after the others'")
}

// A send that went just before the book's turn, but that the server
// counted in its new window (it turned first, and the send arrived after
// the turn's first), spends the new window: its answer, come after the
// turn, states the new window's count and is read.
func TestBookSendCountedInTheNewWindow(t *testing.T) {
	var b Book
	tk, _ := b.Reserve(host, "", now, time.Minute, nil)
	answer(&b, tk, 5, 2, now) // 5 of 10 left; the window turns at 2 s
	gap, h := b.Reserve(host, "", now.Add(1900*time.Millisecond), time.Minute, nil)
	require.Nil(t, h)
	after := now.Add(2100 * time.Millisecond) // the book turned at 2 s
	probe, h := b.Reserve(host, "", after, time.Minute, nil)
	require.Nil(t, h)
	answer(&b, probe, 9, 2, after)
	answer(&b, gap, 8, 2, after) // counted in the new window after the probe
	for i := range 8 {
		_, h := b.Reserve(host, "", after, time.Minute, nil)
		require.Nil(t, h, "send %d of the 8 left", i)
	}
	_, h = b.Reserve(host, "", after, time.Minute, nil)
	assert.NotNil(t, h, "the window's 10: the probe's, the gap's and 8")
}

// answerBucket records an answer of a bucket of 10 refilled at 5 per second
// (its reset the time to a full bucket, in whole seconds).
func answerBucket(b *Book, tk Ticket, r int, at time.Time) {
	h := http.Header{"Ratelimit": {fmt.Sprintf(`"q";r=%d;t=%d`, r, int(math.Ceil(float64(10-r)/5)))},
		"Ratelimit-Policy": {`"q";q=10;w=2`}}
	b.Done(tk, Read(h, at, IETF, 0, false), false, at)
}

// At a turn the book reckoned (no answer has stated the new window yet),
// one send goes first and the others wait for its answer; if the server
// refuses it as a window not yet turned, with a reset of "now" (it rounds
// its turns down), the window's quota stays held and later resets are read
// a second later. A client alone keeps its share.
func TestBookTurnProbe(t *testing.T) {
	var b Book
	for r := 9; r >= 0; r-- { // the client spends the window alone; it turns in 2 s, it says
		tk, h := b.Reserve(host, "", now, time.Minute, nil)
		require.Nil(t, h)
		answerX(&b, tk, r, now.Add(2*time.Second), now, false)
	}
	turn := now.Add(2 * time.Second)
	probe, h := b.Reserve(host, "", turn, time.Minute, nil)
	require.Nil(t, h, "the first send at the turn")
	assert.NotZero(t, probe.probes)
	other, h := b.Reserve(host, "", turn, time.Minute, nil)
	require.NotNil(t, h, "the others wait for its answer")
	assert.Zero(t, other.mask)
	assert.LessOrEqual(t, h.Wait, 10*time.Millisecond)
	answerX(&b, probe, 0, turn, turn.Add(time.Millisecond), true) // 429: the stated turn (now) has not come
	_, h2 := b.Reserve(host, "", turn.Add(2*time.Millisecond), time.Minute, h)
	require.NotNil(t, h2, "held: the window did not turn")
	assert.Greater(t, h2.Wait, 900*time.Millisecond)
	b.Forget(h2) // it gives up

	next := turn.Add(time.Second + 2*time.Millisecond)
	ok, h := b.Reserve(host, "", next, time.Minute, nil)
	require.Nil(t, h)
	answerX(&b, ok, 9, now.Add(4*time.Second), next, false) // the new window (it began at 2.5 s: it turns at 4.5 s; "4" it says)
	for range 9 {
		_, h := b.Reserve(host, "", next, time.Minute, nil)
		require.Nil(t, h, "a client alone keeps its whole share")
	}
	_, h = b.Reserve(host, "", next, time.Minute, nil)
	require.NotNil(t, h)
	assert.InDelta(t, 1998*time.Millisecond, h.Wait, float64(time.Millisecond), "the stated reset, and the second the server rounds down")
}

// answerX records a GitHub-style answer: 10 a window, r remaining, and
// the epoch second reset (truncated) when the window turns.
func answerX(b *Book, tk Ticket, r int, reset, at time.Time, throttled bool) {
	h := http.Header{"X-Ratelimit-Limit": {"10"}, "X-Ratelimit-Remaining": {fmt.Sprint(r)},
		"X-Ratelimit-Reset": {fmt.Sprint(reset.Unix())}}
	b.Done(tk, Read(h, at, XRateLimit, 0, false), throttled, at)
}

// The room a turn gives goes to the requests held for it in the order they
// were first held, whatever order they ask again in; a request that gives
// up leaves its place.
func TestBookHeldGoInOrder(t *testing.T) {
	var b Book
	tk, _ := b.Reserve(host, "", now, time.Minute, nil)
	answer(&b, tk, 0, 1, now) // spent until now+1s; 10 a window
	var holds []*Hold
	for i := range 12 {
		_, h := b.Reserve(host, "", now.Add(time.Duration(i)*time.Millisecond), time.Minute, nil)
		require.NotNil(t, h)
		holds = append(holds, h)
	}
	turn := now.Add(time.Second)
	assert.Equal(t, turn.Sub(now.Add(9*time.Millisecond)), holds[9].Wait, "the tenth waits for the turn")
	assert.Greater(t, holds[10].Wait, holds[9].Wait, "the eleventh for a slot after it")
	probe, h := b.Reserve(host, "", turn, time.Minute, holds[9])
	require.Nil(t, h, "at the turn, one of those held for it")
	answer(&b, probe, 9, 2, turn.Add(time.Millisecond))
	at := turn.Add(2 * time.Millisecond)
	_, h = b.Reserve(host, "", at, time.Minute, nil)
	require.NotNil(t, h, "a new request waits behind the nine due, who take the nine left")
	b.Forget(holds[0]) // the first gives up
	_, h = b.Reserve(host, "", at, time.Minute, nil)
	require.Nil(t, h, "its place goes to the next to ask")
	for i := 8; i >= 1; i-- { // they ask again in any order
		_, h := b.Reserve(host, "", at, time.Minute, holds[i])
		require.Nil(t, h, "held %d goes", i)
	}
	_, h = b.Reserve(host, "", at, time.Minute, holds[10])
	assert.NotNil(t, h, "the window's quota is taken: 9 in flight, 9 stated")
}

// The requests held for the answer to a turn's first send are woken by
// it (Hold.Wake), and keep their place meanwhile: a closed loop that asks
// before they do leaves them the room (and, its sends in flight, a margin
// of two), rather than take the window and leave them a whole window to
// wait.
func TestBookHeldForTheProbeKeepTheirRoom(t *testing.T) {
	var b Book
	spendAlone(t, &b) // spent until now+2s
	var holds []*Hold
	for i := range 4 {
		_, h := b.Reserve(host, "", now.Add(time.Duration(i)*time.Millisecond), time.Minute, nil)
		require.NotNil(t, h)
		holds = append(holds, h)
	}
	turn := now.Add(2 * time.Second)
	probe, h := b.Reserve(host, "", turn, time.Minute, holds[0])
	require.Nil(t, h, "at the turn, the first held asks whether it came")
	var woken []*Hold
	for _, held := range holds[1:] {
		_, h := b.Reserve(host, "", turn, time.Minute, held)
		require.NotNil(t, h, "the others wait for its answer")
		require.NotNil(t, h.Wake)
		woken = append(woken, h)
	}
	select {
	case <-woken[0].Wake:
		t.Fatal("woken before the answer came")
	default:
	}
	at := turn.Add(500 * time.Microsecond) // before their waits end
	answer(&b, probe, 9, 2, at)
	for _, h := range woken {
		select {
		case <-h.Wake:
		default:
			t.Fatal("not woken by the answer")
		}
	}
	sent := 0
	for range 10 {
		if _, h := b.Reserve(host, "", at, time.Minute, nil); h != nil {
			break
		}
		sent++
	}
	assert.Equal(t, 4, sent, "9 left: 3 kept for the held, 2 a margin while sends are in flight")
	for i, h := range woken {
		_, again := b.Reserve(host, "", at, time.Minute, h)
		assert.Nil(t, again, "held %d takes the room kept for it", i+1)
	}
}

// A request held for a turn that, asking again, finds its client's own
// sends in flight holding the room the stated count gives waits for their
// answers, not for another turn: answers that come out of order state
// counts a few apart, and a whole window is too much to pay for them.
func TestBookHeldWaitForTheirAnswers(t *testing.T) {
	var b Book
	spendAlone(t, &b) // spent until now+2s
	_, held := b.Reserve(host, "", now, time.Minute, nil)
	require.NotNil(t, held)
	turn := now.Add(2 * time.Second)
	probe, h := b.Reserve(host, "", turn, time.Minute, nil)
	require.Nil(t, h, "a new request at the turn asks whether it came")
	answer(&b, probe, 9, 2, turn)
	var flying []Ticket
	for range 8 { // the closed loop: 9 left, 1 kept for the held
		tk, h := b.Reserve(host, "", turn, time.Minute, nil)
		if h != nil {
			break
		}
		flying = append(flying, tk)
	}
	require.NotEmpty(t, flying)
	// The one held asks late, when the last sends are still in flight and
	// the latest answer (out of order) states a count that counts them.
	last := flying[len(flying)-1]
	answer(&b, last, 1, 2, turn.Add(time.Millisecond))
	_, h = b.Reserve(host, "", turn.Add(time.Millisecond), time.Minute, held)
	require.NotNil(t, h)
	assert.Less(t, h.Wait, 100*time.Millisecond, "it waits for the answers in flight, not the turn")
	_, h2 := b.Reserve(host, "", turn.Add(2*time.Millisecond), time.Minute, h)
	require.NotNil(t, h2, "no answer yet")
	assert.Equal(t, 2*h.Wait, h2.Wait, "each wait in a row twice the last: sends that hang do not make it poll")
	h = h2
	for _, tk := range flying[:len(flying)-1] {
		answer(&b, tk, 1, 2, turn.Add(3*time.Millisecond)) // older news: the count stays 1
	}
	_, h = b.Reserve(host, "", turn.Add(4*time.Millisecond), time.Minute, h)
	assert.Nil(t, h, "the one left is its")
}

// spendAlone has a client alone spend a window of 10 that turns in 2 s.
func spendAlone(t *testing.T, b *Book) {
	t.Helper()
	for r := 9; r >= 0; r-- {
		tk, h := b.Reserve(host, "", now, time.Minute, nil)
		require.Nil(t, h)
		answer(b, tk, r, 2, now)
	}
}

// Bounded memory: at most MaxScopes scopes, the least recently used goes.
func TestBookBounded(t *testing.T) {
	var b Book
	for i := 0; i < MaxScopes+10; i++ {
		k := Key{Host: "h", Name: fmt.Sprint(i)}
		tk, _ := b.Reserve(k, "", now.Add(time.Duration(i)), time.Minute, nil)
		answer(&b, tk, 1, 1, now.Add(time.Duration(i)))
	}
	assert.Equal(t, int32(MaxScopes), b.n.Load())
	assert.Nil(t, b.scopes[Key{Host: "h", Name: "0"}])
}

// The simulations below run closed loops against a simulated server that
// states its quota on every answer, in simulated time: the figures that
// bench/storm's TestAdvertisedQuotas measures on a real server, checked
// here in milliseconds. Each worker sends its next request as soon as the
// last is answered, unless the Book holds it; a 429 is sent again at once
// (the Book then holds it). An interactive caller of the first client
// sends one request every 100 ms.

type simServer struct {
	quota   int
	window  time.Duration
	bucket  bool          // a token bucket of quota tokens, refilled over window
	dialect string        // "draft-11" (q and w stated), "draft-07" (no window), "llm" (reset in ms), "x-ratelimit" (an epoch second, rounded up), "x-ratelimit-floor" (truncated)
	phase   time.Duration // simulated time starts this long after a whole second (an epoch's turns are that far from one)

	count  map[int64]int // fixed window: sends per window index
	tokens float64
	last   time.Duration
	log    []time.Duration // when set (non-nil), every send's arrival
	denied []time.Duration // every refused send's arrival
}

// serve answers a send arriving at at: whether it was let through, and the
// header it answers with.
func (s *simServer) serve(at time.Duration) (bool, http.Header) {
	if s.log != nil {
		s.log = append(s.log, at)
	}
	ok, r, reset := false, 0, time.Duration(0)
	if s.bucket {
		rate := float64(s.quota) / s.window.Seconds()
		s.tokens = math.Min(float64(s.quota), s.tokens+rate*(at-s.last).Seconds())
		s.last = at
		if s.tokens >= 1 {
			s.tokens--
			ok = true
		}
		r, reset = int(s.tokens), time.Duration((float64(s.quota)-s.tokens)/rate*float64(time.Second))
	} else {
		w := int64(at / s.window)
		if s.count[w] < s.quota {
			s.count[w]++
			ok = true
		}
		r, reset = s.quota-s.count[w], time.Duration(w+1)*s.window-at
	}
	if !ok {
		s.denied = append(s.denied, at)
	}
	secs := int(math.Ceil(reset.Seconds()))
	switch epoch := now.Add(s.phase + at + reset).Unix(); s.dialect {
	case "x-ratelimit", "x-ratelimit-floor":
		if s.dialect == "x-ratelimit" {
			epoch++ // as bench/storm's: the second after the one the turn falls in
		}
		return ok, http.Header{"X-Ratelimit-Limit": {fmt.Sprint(s.quota)}, "X-Ratelimit-Remaining": {fmt.Sprint(r)},
			"X-Ratelimit-Reset": {fmt.Sprint(epoch)}}
	case "draft-07":
		return ok, http.Header{"Ratelimit": {fmt.Sprintf("limit=%d, remaining=%d, reset=%d", s.quota, r, secs)}}
	case "llm":
		return ok, http.Header{"X-Ratelimit-Limit-Requests": {fmt.Sprint(s.quota)},
			"X-Ratelimit-Remaining-Requests": {fmt.Sprint(r)},
			"X-Ratelimit-Reset-Requests":     {reset.Round(time.Millisecond).String()}}
	}
	return ok, http.Header{"Ratelimit": {fmt.Sprintf(`"q";r=%d;t=%d`, r, secs)},
		"Ratelimit-Policy": {fmt.Sprintf(`"q";q=%d;w=%d`, s.quota, int(s.window.Seconds()))}}
}

type simEvent struct {
	at       time.Duration
	client   int
	worker   int // -1: the interactive caller
	answered bool
	after    *Hold         // the hold the request waited for
	asked    time.Duration // when the interactive call began
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

type simResult struct {
	sent, refused int
	took          time.Duration // until the last client's batch ended
	p99           time.Duration // the interactive caller's
}

// simulate runs clients closed loops of workers each, n requests per
// client, against s, with a one-way latency between lat and 2 lat (the
// clients start apart apart), and an interactive caller beside the first
// client's batch.
func simulate(s *simServer, clients, workers, n int, lat, apart time.Duration) simResult {
	starts := make([]time.Duration, clients)
	for c := range starts {
		starts[c] = time.Duration(c) * apart
	}
	return simulateFrom(s, workers, n, lat, starts, 1)
}

// simulateFrom is simulate with the clients starting at starts, the
// latencies drawn from seed.
func simulateFrom(s *simServer, workers, n int, lat time.Duration, starts []time.Duration, seed uint64) simResult {
	clients := len(starts)
	s.count, s.tokens = map[int64]int{}, float64(s.quota)
	rnd := rand.New(rand.NewPCG(seed, 2))
	books := make([]Book, clients)
	started := make([]int, clients)
	done := make([]int, clients)
	heard, claimed := make([]bool, clients), make([]bool, clients)
	dialects := IETF
	switch s.dialect {
	case "llm":
		dialects = LLM
	case "x-ratelimit", "x-ratelimit-floor":
		dialects = XRateLimit
	}
	q := &simQueue{}
	for c := 0; c < clients; c++ {
		for w := 0; w < workers; w++ {
			heap.Push(q, simEvent{at: starts[c] + time.Duration(w)*time.Microsecond, client: c, worker: w})
			started[c]++
		}
	}
	if clients == 1 {
		heap.Push(q, simEvent{worker: -1})
	}
	var res simResult
	var latencies []time.Duration
	finished := 0
	for q.Len() > 0 {
		e := heap.Pop(q).(simEvent)
		if e.at > 10*time.Minute {
			res.took = e.at
			break
		}
		b, at := &books[e.client], now.Add(s.phase+e.at)
		if e.worker < 0 && !e.answered && e.asked == 0 && finished < clients {
			// The interactive caller's tick: a new call, and the next tick.
			heap.Push(q, simEvent{at: e.at + 100*time.Millisecond, worker: -1})
			e.asked = e.at + 1
		}
		if !e.answered {
			if e.worker < 0 && finished == clients {
				continue
			}
			if !heard[e.client] {
				// The first-contact gate (Contacts): the first send to the
				// host goes alone, the others wait for its answer.
				if claimed[e.client] {
					e.at += time.Millisecond
					heap.Push(q, e)
					continue
				}
				claimed[e.client] = true
			}
			tk, h := b.Reserve(host, "", at, time.Minute, e.after)
			if h != nil {
				e.at += h.Wait
				e.after = h
				heap.Push(q, e)
				continue
			}
			l := lat + time.Duration(rnd.Int64N(int64(lat)+1))
			ok, hdr := s.serve(e.at + l)
			res.sent++
			if !ok {
				res.refused++
			}
			heap.Push(q, simEvent{at: e.at + 2*l, client: e.client, worker: e.worker, answered: true, asked: e.asked, tk: tk, h: hdr, ok: ok})
			continue
		}
		b.Done(e.tk, Read(e.h, at, dialects, 0, false), !e.ok, at)
		heard[e.client] = true
		if !e.ok {
			heap.Push(q, simEvent{at: e.at, client: e.client, worker: e.worker, asked: e.asked}) // sent again
			continue
		}
		if e.worker < 0 {
			latencies = append(latencies, e.at-e.asked+1)
			continue
		}
		done[e.client]++
		if done[e.client] == n {
			finished++
			res.took = max(res.took, e.at)
		}
		if started[e.client] < n {
			started[e.client]++
			heap.Push(q, simEvent{at: e.at, client: e.client, worker: e.worker})
		}
	}
	slices.Sort(latencies)
	if len(latencies) > 0 {
		res.p99 = latencies[len(latencies)*99/100]
	}
	return res
}

// The bars of the issue, in simulated time: 200 requests from 10 workers
// against 50 per 2 s, a fixed window or a token bucket: at most 2%
// refused, within 1.15x of (n - quota) / rate, the interactive caller's
// p99 within a window. Four clients sharing the quota (50 requests each,
// as bench/storm runs them, or 200), each with the first-contact gate
// (Contacts: its first send goes alone), starting 30 ms apart or 2 ms
// apart (bench/storm's processes start 2-15 ms apart), meet the issue's
// fleet bar on 429s (at most 5%) and, with 200 each, on time (the last
// within 1.25x); with 50 each, the fixed windows mostly on time. The rows
// pin today's figures with a margin (4x50: windows 1.0-2.4% refused,
// 1.01-1.45x, buckets 1.0-1.5%, 1.35-1.69x; 4x200: 0.2-4.1%, 1.01-1.09x;
// before the client read the others in the order of its sends,
// TestBookFirstWindowOthersBySendOrder: windows up to 2.9%, buckets up to
// 3.4%, 4x200 up to 4.5%).
// A 4x50 fleet's batch takes exactly four windows' quota: a request left
// over by any window takes a fifth (1.34-1.45x before the rest, what the
// others leave of a window once its bursts landed, was taken:
// TestBookFleetTakesTheRest), and a bucket's clients that started behind
// the others take a window or two to grow their share. Without the gate, 26-30 of every row's 429s came in the first
// window: a client that started after another had spent it sent its first
// wave blind; without the crowded start (policy.starting), the 2 ms 4x200
// window rows met 30-38 429s (21-22 with it): each client's first wave.
// The GitHub-style dialects (an epoch second: x-ratelimit rounds the turn
// up, x-ratelimit-floor truncates it) run fixed windows turning 0.3 s past
// a second: one client meets the bars (p99 1.94 s, 1.11x; without
// capTurn, 2.5 s and 1.14x: every turn waited for the second stated); the
// floor dialect's fleets meet 3.3-5.7% (held to 7% here, not the issue's
// 5%; 1.45x in a 4x50 row). Their buckets are not run: an epoch bucket's interactive p99 is
// 3.6-3.7 s at some phases (not yet).
func TestBookSimulatedBatches(t *testing.T) {
	for _, dialect := range []string{"draft-11", "draft-07", "llm", "x-ratelimit", "x-ratelimit-floor"} {
		for _, bucket := range []bool{false, true} {
			epoch := strings.HasPrefix(dialect, "x-ratelimit")
			if epoch && bucket {
				continue // not yet: a bucket's epoch reset (docs/ratelimit.md, "Measured")
			}
			for _, fleet := range []struct {
				clients, n int
				apart      time.Duration
			}{{1, 200, 0}, {4, 50, 30 * time.Millisecond}, {4, 200, 30 * time.Millisecond}, {4, 50, 2 * time.Millisecond}, {4, 200, 2 * time.Millisecond}} {
				name := fmt.Sprintf("%s/bucket=%v/%dx%d", dialect, bucket, fleet.clients, fleet.n)
				if fleet.clients > 1 {
					name += fmt.Sprintf("/%v-apart", fleet.apart)
				}
				t.Run(name, func(t *testing.T) {
					s := &simServer{quota: 50, window: 2 * time.Second, bucket: bucket, dialect: dialect}
					if epoch {
						s.phase = 300 * time.Millisecond // the turns 0.3 s past a second: stated 0.7 s late (rounded up) or 0.3 s early
					}
					r := simulate(s, fleet.clients, 10, fleet.n, 2*time.Millisecond, fleet.apart)
					served := r.sent - r.refused
					limit := time.Duration(float64(served-s.quota) / 25 * float64(time.Second))
					share, slowdown := float64(r.refused)/float64(r.sent), r.took.Seconds()/limit.Seconds()
					t.Logf("%d of %d refused (%.1f%%), %v for a limit of %v (%.2fx), interactive p99 %v",
						r.refused, r.sent, 100*share, r.took, limit, slowdown, r.p99)
					maxRefused, maxSlowdown := 0.02, 1.15
					switch {
					case fleet.clients > 1 && fleet.n == 50: // the 429s' bar; time not yet in every row
						maxRefused, maxSlowdown = 0.05, 1.75
					case fleet.clients > 1: // the bars
						maxRefused, maxSlowdown = 0.05, 1.25
					}
					if dialect == "x-ratelimit-floor" && fleet.clients > 1 {
						maxRefused = 0.07 // not yet the issue's: 3.3-5.7% (its clients meet the turns stated early at different times)
					}
					assert.LessOrEqual(t, share, maxRefused)
					assert.LessOrEqual(t, slowdown, maxSlowdown)
					assert.LessOrEqual(t, r.p99, s.window)
				})
			}
		}
	}
}

// A token bucket that states its reset as the time to a full bucket is
// paced at its rate (here 10 per 2 s: one per 200 ms) once its count is
// low, rather than held for a whole refill; a fixed window's answer (its
// count near the quota with the whole window left) is held to its turn.
func TestBookPacesBucket(t *testing.T) {
	var b Book
	at := now
	for r := 3; r >= 0; r-- { // a bucket: count plus refill until full is the quota
		tk, h := b.Reserve(host, "", at, time.Minute, nil)
		require.Nil(t, h)
		answer(&b, tk, r, 2, at)
	}
	_, h := b.Reserve(host, "", at, time.Minute, nil)
	require.NotNil(t, h)
	assert.Equal(t, 200*time.Millisecond, h.Wait, "a token's time, not the 2 s to a full bucket")
	_, h2 := b.Reserve(host, "", at, time.Minute, nil)
	require.NotNil(t, h2)
	assert.Equal(t, 400*time.Millisecond, h2.Wait, "the next slot")
	_, h3 := b.Reserve(host, "", at.Add(h.Wait), time.Minute, h)
	assert.Nil(t, h3, "its slot come, it goes")

	var f Book
	tk, _ := f.Reserve(host, "", at, time.Minute, nil)
	answer(&f, tk, 9, 2, at) // a window's start: 9 left and 2 s to go
	tk, _ = f.Reserve(host, "", at, time.Minute, nil)
	answer(&f, tk, 0, 2, at)
	_, h = f.Reserve(host, "", at, time.Minute, nil)
	require.NotNil(t, h)
	assert.Equal(t, 2*time.Second, h.Wait)
}

// A client refused at its first send (the first contact goes alone: the
// others spent the window before it) starts at the least share: after
// the turn, one send of its own at a time rather than a lone client's
// whole window.
func TestBookRefusedFirstStartsSmall(t *testing.T) {
	for _, refused := range []bool{true, false} {
		var b Book
		tk, _ := b.Reserve(host, "", now, time.Minute, nil)
		// Refused, or let through as the window's last (a lone client).
		h := http.Header{"Ratelimit": {`"q";r=0;t=1`}, "Ratelimit-Policy": {`"q";q=10;w=2`}}
		b.Done(tk, Read(h, now, IETF, 0, false), refused, now)
		turn := now.Add(time.Second)
		probe, hold := b.Reserve(host, "", turn, time.Minute, nil)
		require.Nil(t, hold, "the send that asks at the turn")
		answer(&b, probe, 9, 2, turn)
		_, hold = b.Reserve(host, "", turn, time.Minute, nil)
		if !refused {
			assert.Nil(t, hold, "alone: the 9 are its own")
			continue
		}
		require.NotNil(t, hold, "its share of the turn's burst (one) sent")
		assert.Equal(t, minBurstSpan, hold.Wait, "until the fleet's bursts have landed")
		after := turn.Add(minBurstSpan)
		_, hold = b.Reserve(host, "", after, time.Minute, hold)
		require.Nil(t, hold, "then one at a time: a probe of what the others left")
		_, hold = b.Reserve(host, "", after, time.Minute, nil)
		assert.NotNil(t, hold, "its share of the 9 left is less than one")
	}
}

// A count of 0 stated with a reset of "now" holds for a moment when the
// reset is stated finer than whole seconds (the LLM APIs' durations), a
// second when in whole seconds (it may be rounded down).
func TestBookFineResetNow(t *testing.T) {
	for _, fine := range []bool{true, false} {
		var b Book
		tk, _ := b.Reserve(host, "", now, time.Minute, nil)
		obs := []Observation{{Policy: "requests", Remaining: 0, HasReset: true, Fine: fine, Limit: 10}}
		b.Done(tk, obs, false, now)
		_, h := b.Reserve(host, "", now, time.Minute, nil)
		require.NotNil(t, h)
		if fine {
			assert.Equal(t, fineHold, h.Wait)
		} else {
			assert.Equal(t, time.Second, h.Wait)
		}
	}
}

// A window not stated is the longest reset seen, taken up to the whole
// second it falls just short of.
func TestWindowLenRoundsUp(t *testing.T) {
	for _, c := range []struct{ span, want time.Duration }{
		{1970 * time.Millisecond, 2 * time.Second},
		{1500 * time.Millisecond, 1500 * time.Millisecond},
		{59200 * time.Millisecond, time.Minute},
		{2 * time.Second, 2 * time.Second},
		{300 * time.Millisecond, 300 * time.Millisecond},
	} {
		p := &policy{span: c.span}
		assert.Equal(t, c.want, p.windowLen(), "span %v", c.span)
	}
	assert.Equal(t, 5*time.Second, (&policy{span: 1970 * time.Millisecond, window: 5 * time.Second}).windowLen(), "stated")
}

// A client of a fleet whose own sends in flight hold the room its share
// gives waits for their answers, not for the turn; a client alone, whose
// answers free no room, waits for the turn.
func TestBookFleetWaitsForItsAnswers(t *testing.T) {
	for _, share := range []float64{0.5, 1} {
		var b Book
		tk, _ := b.Reserve(host, "", now, time.Minute, nil)
		answer(&b, tk, 9, 2, now)
		p := b.scopes[host].policies[0]
		p.share, p.rtt = share, 3*time.Millisecond
		for range int(share * 9) {
			_, h := b.Reserve(host, "", now, time.Minute, nil)
			require.Nil(t, h)
		}
		_, h := b.Reserve(host, "", now, time.Minute, nil)
		require.NotNil(t, h)
		if share < 1 {
			assert.Equal(t, 3*time.Millisecond, h.Wait)
		} else {
			assert.Equal(t, 2*time.Second, h.Wait)
		}
	}
}

// A send that asked at the turn and was refused with the old window's
// end (a reset well within the window) shows a window longer than the
// longest reset seen; refused with the new window's (others spent it)
// it shows nothing of the window's length.
func TestBookRefusedProbeLengthensTheWindow(t *testing.T) {
	for _, c := range []struct {
		reset time.Duration
		want  time.Duration
	}{{80 * time.Millisecond, 1580 * time.Millisecond}, {1400 * time.Millisecond, 1500 * time.Millisecond}} {
		p := &policy{name: "requests", span: 1500 * time.Millisecond}
		p.answerProbe([]Observation{{Policy: "requests", HasReset: true, Reset: c.reset, Fine: true}}, true)
		assert.Equal(t, c.want, p.span, "reset %v", c.reset)
	}
}

// At a window's turn a client of a fleet sends its share of the window's
// quota (here 3 of 10) and then waits for the bursts of the others to
// land (minBurstSpan), not for the next turn: the counts its answers
// state until then do not show the others' sends.
func TestBookFleetBurstsItsShare(t *testing.T) {
	var b Book
	tk, _ := b.Reserve(host, "", now, time.Minute, nil)
	answer(&b, tk, 9, 2, now) // a fixed window's start: 9 left, 2 s to go
	turn := now.Add(2 * time.Second)
	probe, h := b.Reserve(host, "", turn, time.Minute, nil)
	require.Nil(t, h)
	b.scopes[host].policies[0].share = 0.3 // as the turn's measure would have it
	answer(&b, probe, 9, 2, turn)
	for range 2 {
		_, h := b.Reserve(host, "", turn, time.Minute, nil)
		require.Nil(t, h, "its share: 3 with the probe")
	}
	_, h = b.Reserve(host, "", turn, time.Minute, nil)
	require.NotNil(t, h)
	assert.Equal(t, minBurstSpan, h.Wait, "until the bursts have landed")
}

// A client whose first answer shows others spending the window (a count
// below what its own send left of the quota) sends no more at once than
// it has had answers, until four measured its share: each answer's count
// shows how fast the others spend before it sends its whole room. A
// client whose first answer shows the window untouched sends at once.
func TestBookCrowdedStartSendsAsAnswered(t *testing.T) {
	for _, first := range []int{49, 30} {
		var b Book
		tk, _ := b.Reserve(host, "", now, time.Minute, nil)
		h := http.Header{"Ratelimit": {fmt.Sprintf(`"q";r=%d;t=2`, first)}, "Ratelimit-Policy": {`"q";q=50;w=2`}}
		b.Done(tk, Read(h, now, IETF, 0, false), false, now)
		var out []Ticket
		var held *Hold
		for held == nil {
			tk, h := b.Reserve(host, "", now, time.Minute, nil)
			if h != nil {
				held = h
				if first == 30 {
					assert.Less(t, h.Wait, 10*time.Millisecond, "held for its answers, not the turn")
				}
				break
			}
			out = append(out, tk)
		}
		if first == 49 {
			assert.Len(t, out, 49, "alone: its room at once")
			continue
		}
		require.Len(t, out, 1, "one answer had: one send at once")
		at := now.Add(time.Millisecond)
		answerAt(&b, out[0], 25, at) // the others spent 4 meanwhile
		_, again := b.Reserve(host, "", at, time.Minute, held)
		require.Nil(t, again, "the held request goes first")
		_, again = b.Reserve(host, "", at, time.Minute, nil)
		require.Nil(t, again, "two answers had: two at once")
		_, again = b.Reserve(host, "", at, time.Minute, nil)
		assert.NotNil(t, again, "not three")
	}
}

// answerAt records an answer of a window of 50 per 2 s with r remaining.
func answerAt(b *Book, tk Ticket, r int, at time.Time) {
	h := http.Header{"Ratelimit": {fmt.Sprintf(`"q";r=%d;t=2`, r)}, "Ratelimit-Policy": {`"q";q=50;w=2`}}
	b.Done(tk, Read(h, at, IETF, 0, false), false, at)
}

// fleetPastTurn returns the policy of b for a client of a fleet past the
// turn of its window: a quarter of a quota of 50, its 12 sends answered,
// the latest count stated left, at heard.
func fleetPastTurn(b *Book, turn time.Time, left int64, heard time.Time) *policy {
	tk, _ := b.Reserve(host, "", now, time.Minute, nil)
	answerAt(b, tk, 49, now)
	p := b.scopes[host].policies[0]
	p.roll(turn)
	p.unconfirmed, p.share, p.rtt = false, 0.25, time.Millisecond
	p.base, p.low, p.own, p.remaining, p.heardAt = 49, left, 12, left, heard
	return p
}

// A client of a fleet takes the count its answers state to be no more
// than the window's quota less its own sends over its share: the others'
// sends land between its answers, and a count stated before they landed
// would send it past its share. With none of its sends out, one goes to
// read the count (a probe), while a sixth of the quota or more is stated.
func TestBookFleetCountsTheOthersSends(t *testing.T) {
	var b Book
	turn := now.Add(2 * time.Second)
	// Past its turn's burst: a quarter of the quota, 12 of its own sends
	// answered in this window, the latest count stated 9 (before the
	// others' bursts landed).
	p := fleetPastTurn(&b, turn, 9, now)
	at := turn.Add(time.Second)
	probe, h := b.Reserve(host, "", at, time.Minute, nil)
	require.Nil(t, h, "a probe: 9 stated (a sixth of 50 or more), none of its sends out")
	_, h = b.Reserve(host, "", at, time.Minute, nil)
	require.NotNil(t, h, "its share sent: 50 - 12/0.25 = 2 left by its reckoning, a quarter of which is no send")
	answerAt(&b, probe, 1, at)
	p.own = 6 // had it sent 6: 50 - 6/0.25 = 26 left, 6 its own
	var n int
	for ; n < 20; n++ {
		if _, h := b.Reserve(host, "", at, time.Minute, nil); h != nil {
			break
		}
	}
	assert.Equal(t, 0, n, "1 stated, fallen by the others' sends too: no room, whatever its reckoning")
	p.remaining = 30
	for n = 0; n < 20; n++ {
		if _, h := b.Reserve(host, "", at, time.Minute, nil); h != nil {
			break
		}
	}
	assert.Equal(t, 6, n, "30 stated, 26 by its reckoning: a quarter, 6")
}

// What the others leave of a window, a fleet client takes: once the
// turn's bursts have landed, a count its answers state (the rest) goes one
// send at a time, its other requests waiting for that send's answer, not
// for the turn; the last one only if the count fell by its own send alone
// (others that take the rest too would meet a 429 for it). A count stated
// before the bursts landed says nothing of the rest: no send goes on it.
func TestBookFleetTakesTheRest(t *testing.T) {
	var b Book
	turn := now.Add(2 * time.Second)
	// Past its turn, a quarter of the quota, its share sent (12), the
	// latest count (5) stated during the bursts.
	p := fleetPastTurn(&b, turn, 5, turn.Add(5*time.Millisecond))
	at := p.burstEnd().Add(time.Millisecond)
	_, h := b.Reserve(host, "", at, time.Minute, nil)
	require.NotNil(t, h, "5 stated before the bursts landed: no send on it")
	assert.Equal(t, turn.Add(2*time.Second).Sub(at), h.Wait, "held to the turn")
	b.Forget(h)

	p.heardAt = p.burstEnd().Add(time.Millisecond) // now stated after them: the rest
	first, h := b.Reserve(host, "", at, time.Minute, nil)
	require.Nil(t, h, "the rest: one send")
	_, held := b.Reserve(host, "", at, time.Minute, nil)
	require.NotNil(t, held)
	assert.Equal(t, time.Millisecond, held.Wait, "the next waits for its answer (a round trip), not for the turn")
	answerAt(&b, first, 4, at.Add(time.Millisecond))
	last, h := b.Reserve(host, "", at.Add(time.Millisecond), time.Minute, held)
	require.Nil(t, h, "4 left: it goes")
	answerAt(&b, last, 1, at.Add(2*time.Millisecond))
	_, h = b.Reserve(host, "", at.Add(2*time.Millisecond), time.Minute, nil)
	require.NotNil(t, h)
	assert.Greater(t, h.Wait, time.Second, "the last one, the count fallen by others' sends too: left to them, held to the turn")

	// Held during the bursts, two ask again as they land, the second
	// first: the room goes to the first, and the second waits for its
	// answer, not for the turn.
	var f Book
	p = fleetPastTurn(&f, turn, 5, turn.Add(5*time.Millisecond))
	during := turn.Add(10 * time.Millisecond)
	_, w1 := f.Reserve(host, "", during, time.Minute, nil)
	_, w2 := f.Reserve(host, "", during, time.Minute, nil)
	require.NotNil(t, w1)
	require.NotNil(t, w2)
	landed := p.burstEnd()
	p.heardAt = landed // the rest stated once they landed
	_, h = f.Reserve(host, "", landed, time.Minute, w2)
	require.NotNil(t, h, "the first held goes first")
	assert.Equal(t, time.Millisecond, h.Wait, "a round trip, not the turn")
	_, h = f.Reserve(host, "", landed, time.Minute, w1)
	assert.Nil(t, h, "the rest: the first held")

	// On a count stated during the bursts (a probe's room), it waits a
	// round trip once: a first held that does not go meanwhile leaves it
	// to the turn, not asking at every round trip (a fleet's client that
	// did sent its probe late in the window, and met the 429 whose reset,
	// rounded up, moved its turns).
	var g Book
	fleetPastTurn(&g, turn, 9, turn.Add(5*time.Millisecond))
	_, _ = g.Reserve(host, "", during, time.Minute, nil) // the first held, which does not ask again
	_, w2 = g.Reserve(host, "", during, time.Minute, nil)
	_, h = g.Reserve(host, "", landed, time.Minute, w2)
	require.NotNil(t, h)
	assert.Equal(t, time.Millisecond, h.Wait, "once")
	_, h = g.Reserve(host, "", landed.Add(time.Millisecond), time.Minute, h)
	require.NotNil(t, h)
	assert.Greater(t, h.Wait, time.Second, "then the turn")
}

// In the first window a client meets, before it has measured its share,
// one whose answers show others spending the window keeps one send in
// flight once less than a quarter of the quota is left: the others' sends
// in flight are not in the count yet, and a client that took the count
// for its own would overshoot it (a burst of 429s at a fleet's first
// window). A client alone keeps its exact accounting
// (TestBookInFlightCounts). So does one whose answers have not yet shown
// whether the window is fixed or a bucket (a client that came late to a
// window others spent sees no count near the quota).
func TestBookFirstWindowEndOneAtATime(t *testing.T) {
	var late Book
	for _, r := range []int{20, 12} { // others spent 29 before its first send landed, then 7 more
		tk, h := late.Reserve(host, "", now, time.Minute, nil)
		require.Nil(t, h)
		answerAt(&late, tk, r, now)
	}
	require.False(t, late.scopes[host].policies[0].fixed, "12 left with 2 s to go: a bucket's count too")
	_, h := late.Reserve(host, "", now, time.Minute, nil)
	require.Nil(t, h)
	_, h = late.Reserve(host, "", now, time.Minute, nil)
	assert.NotNil(t, h, "12 left of 50, others seen: one send at a time (its part of the fall, 2 of 9, would be 2)")

	for _, crowded := range []bool{false, true} {
		var b Book
		first := 49
		if crowded {
			first = 40 // others sent before its first send landed
		}
		for r := first; r >= 10; r-- { // down to 10 left of 50: a fifth
			tk, h := b.Reserve(host, "", now, time.Minute, nil)
			require.Nil(t, h)
			answerAt(&b, tk, r, now)
		}
		n := 0
		for ; n < 20; n++ {
			if _, h := b.Reserve(host, "", now, time.Minute, nil); h != nil {
				break
			}
		}
		if crowded {
			assert.Equal(t, 1, n, "others seen: one send at a time")
		} else {
			assert.Greater(t, n, 1, "alone: the count is its own")
		}
	}
}

// A client whose first answer showed no one else (the first of a fleet to
// send) reads the others in the order of its sends: an answer states the
// count after the sends the server counted before it, which are, of the
// client's own, those that went before it (a later send is counted
// later); a count fallen further shows other clients' sends, though the
// client's own sends in flight would explain it. Until its share is
// measured it then takes, of what is left, its part of the count's fall:
// a client that took the whole for its own would overshoot it with the
// others (bench/storm's fleets met most of their 429s in the first
// window).
func TestBookFirstWindowOthersBySendOrder(t *testing.T) {
	var b Book
	first, _ := b.Reserve(host, "", now, time.Minute, nil)
	answerAt(&b, first, 49, now) // its first send, alone (Contacts): no one else seen
	p := b.scopes[host].policies[0]
	require.False(t, p.others())
	var sends []Ticket
	for range 9 { // its workers, at once
		tk, h := b.Reserve(host, "", now, time.Minute, nil)
		require.Nil(t, h)
		sends = append(sends, tk)
	}
	answerAt(&b, sends[0], 48, now) // its own send: 49 - 1
	assert.False(t, p.others())
	answerAt(&b, sends[1], 44, now) // 3 more than its own two
	answerAt(&b, sends[2], 43, now)
	assert.Equal(t, int64(3), p.seen)
	require.LessOrEqual(t, p.base-p.low, p.own+int64(p.inFlight), "its sends in flight would explain the fall")
	assert.True(t, p.others(), "but not the sends that went after the answered ones")

	n := 0
	for ; n < 50; n++ {
		if _, h := b.Reserve(host, "", now, time.Minute, nil); h != nil {
			break
		}
	}
	// Its part of the fall: 4 of the 7 sends counted since its first
	// answer (its first included), of the 43 left, less its 6 in flight.
	assert.Equal(t, 24-6, n) // 4/7 x 43 = 24.6
}

// At a window's turn, a fleet client's share is measured on what the
// quota spent: the quota less the lowest count it saw. A lowest count
// stated before the turn's bursts had landed shows less spent than was:
// it may lower the share, never raise it.
func TestBookStaleCountRaisesNoShare(t *testing.T) {
	for _, late := range []bool{false, true} {
		var b Book
		tk, _ := b.Reserve(host, "", now, time.Minute, nil)
		answerAt(&b, tk, 49, now)
		p := b.scopes[host].policies[0]
		p.roll(now.Add(2 * time.Second))
		p.unconfirmed, p.share, p.rtt = false, 0.25, time.Millisecond
		p.base, p.low, p.own, p.remaining = 49, 30, 12, 30 // 20 spent, 12 its own
		p.heardAt = p.burstEnd().Add(-time.Millisecond)
		if late {
			p.heardAt = p.burstEnd()
		}
		p.roll(now.Add(4 * time.Second))
		if late {
			assert.InDelta(t, 0.6, p.share, 1e-9, "heard after the bursts: 12 of 20")
		} else {
			assert.InDelta(t, 0.25, p.share, 1e-9, "heard before the bursts landed: kept")
		}
	}
}

// A bucket's client refused once keeps pacing it as a bucket (answers
// out of order can read a later send's higher count last); refused twice,
// it holds to the turns from then on.
func TestBookBucketRefusedTwiceIsFixed(t *testing.T) {
	var b Book
	at := now
	for r := 3; r >= 0; r-- {
		tk, h := b.Reserve(host, "", at, time.Minute, nil)
		require.Nil(t, h)
		answerBucket(&b, tk, r, at)
	}
	p := b.scopes[host].policies[0]
	require.True(t, p.bucket())
	for i, want := range []bool{true, false} {
		at = at.Add(time.Second)
		tk, h := b.Reserve(host, "", at, time.Minute, nil)
		require.Nil(t, h, "a token refilled")
		hdr := http.Header{"Ratelimit": {`"q";r=0;t=2`}, "Ratelimit-Policy": {`"q";q=10;w=2`}}
		b.Done(tk, Read(hdr, at, IETF, 0, false), true, at)
		assert.Equal(t, want, p.bucket(), "refusal %d", i+1)
	}
}

// answerEpoch records a GitHub-style answer at at: 10 a window, r
// remaining, and the window's turn stated as an epoch second: rounded up
// (ceil) or truncated.
func answerEpoch(b *Book, tk Ticket, r int, turn time.Time, ceil, throttled bool, at time.Time) {
	sec := turn.Unix()
	if ceil && turn.Nanosecond() > 0 {
		sec++
	}
	h := http.Header{"X-Ratelimit-Limit": {"10"}, "X-Ratelimit-Remaining": {fmt.Sprint(r)},
		"X-Ratelimit-Reset": {fmt.Sprint(sec)}}
	b.Done(tk, Read(h, at, XRateLimit, 0, false), throttled, at)
}

// A reset stated as an epoch second states the same second to every
// answer: rounded up, the turn it states is up to a second late, and the
// earliest of the answers comes no closer. A client whose first send
// went as the window began (a 2 s window, from 0.3 s past a second)
// turns a window after that send instead, and, each window's first send
// going at the turn so found, keeps the turn's part of a second.
func TestBookEpochTurnFromTheWindowsStart(t *testing.T) {
	var b Book
	t0 := now.Add(300 * time.Millisecond)
	turn := t0.Add(2 * time.Second) // stated: now+3 s, 0.7 s late
	spendFirstWindow(t, &b, t0, turn, true)
	_, h := b.Reserve(host, "", t0.Add(time.Millisecond), time.Minute, nil)
	require.NotNil(t, h)
	assert.Equal(t, 2*time.Second-time.Millisecond, h.Wait, "the window's turn, not the second stated")
	b.Forget(h)
	keepsTheTurn(t, &b, turn, true)
}

// Truncated, an epoch second states a turn up to a second early, and the
// window's whole seconds taken from it one short: the turn a window
// after the first send (here at 1.3 s of a window turning at 2.3 s) is
// refused, and so is the second stated (the server's second is read a
// second later from then on); the window taken a second longer, the turn
// comes a window after the first send: two 429s in all, then no more.
func TestBookEpochTurnTruncated(t *testing.T) {
	var b Book
	t0 := now.Add(300 * time.Millisecond)
	turn := t0.Add(2 * time.Second) // stated: now+2 s, 0.3 s early
	spendFirstWindow(t, &b, t0, turn, false)
	early := t0.Add(time.Second)
	probe, h := b.Reserve(host, "", early, time.Minute, nil)
	require.Nil(t, h, "a window of 1 s taken from the reset of 1.7 s")
	answerEpoch(&b, probe, 0, turn, false, true, early.Add(time.Millisecond))
	stated := now.Add(2 * time.Second)
	_, h = b.Reserve(host, "", early.Add(time.Millisecond), time.Minute, nil)
	require.NotNil(t, h)
	assert.Equal(t, stated.Sub(early.Add(time.Millisecond)), h.Wait, "refused: the second stated")
	b.Forget(h)
	probe, h = b.Reserve(host, "", stated, time.Minute, nil)
	require.Nil(t, h)
	answerEpoch(&b, probe, 0, turn, false, true, stated.Add(time.Millisecond))
	_, h = b.Reserve(host, "", stated.Add(time.Millisecond), time.Minute, nil)
	require.NotNil(t, h)
	assert.Equal(t, turn.Sub(stated.Add(time.Millisecond)), h.Wait, "a window after the first send")
	b.Forget(h)
	keepsTheTurn(t, &b, turn, false)
}

// spendFirstWindow spends b's first window (10) at t0, its turn stated
// as an epoch second (ceil: rounded up).
func spendFirstWindow(t *testing.T, b *Book, t0, turn time.Time, ceil bool) {
	t.Helper()
	for r := 9; r >= 0; r-- {
		tk, h := b.Reserve(host, "", t0, time.Minute, nil)
		require.Nil(t, h)
		answerEpoch(b, tk, r, turn, ceil, false, t0.Add(time.Millisecond))
	}
}

// keepsTheTurn spends the two windows of b (10 each, 2 s) that turn at
// turn and a window later, each stated as an epoch second (ceil: rounded
// up), and checks that each window's requests beyond its quota wait for
// the next turn found, not the second stated.
func keepsTheTurn(t *testing.T, b *Book, turn time.Time, ceil bool) {
	t.Helper()
	for i, at := range []time.Time{turn, turn.Add(2 * time.Second)} {
		probe, h := b.Reserve(host, "", at, time.Minute, nil)
		require.Nil(t, h, "window %d: the probe goes at the turn", i+2)
		next := at.Add(2 * time.Second)
		answerEpoch(b, probe, 9, next, ceil, false, at.Add(time.Millisecond))
		for r := 8; r >= 0; r-- {
			tk, h := b.Reserve(host, "", at.Add(time.Millisecond), time.Minute, nil)
			require.Nil(t, h)
			answerEpoch(b, tk, r, next, ceil, false, at.Add(2*time.Millisecond))
		}
		_, h = b.Reserve(host, "", at.Add(2*time.Millisecond), time.Minute, nil)
		require.NotNil(t, h)
		assert.Equal(t, 2*time.Second-2*time.Millisecond, h.Wait, "window %d: turn after turn", i+2)
		b.Forget(h)
	}
}

// A client that joined a window late (the longest reset it saw is short
// of the window) has its turns brought too soon: after two refusals it
// goes by the turns stated.
func TestBookEpochCapGivesUp(t *testing.T) {
	p := &policy{name: "", share: 1, base: -1, prevR: -1, coarse: true, fixed: true, reach: 1500 * time.Millisecond}
	assert.Equal(t, time.Second, p.wholeWindow())
	for range maxCapMissed {
		p.capped = true
		p.answerProbe([]Observation{{Remaining: 0, HasReset: true, Reset: 400 * time.Millisecond}}, true)
	}
	assert.Equal(t, 3*time.Second, p.wholeWindow(), "a second longer at each refusal")
	p.opened, p.resetAt = now, now.Add(5*time.Second)
	p.capTurn()
	assert.Equal(t, now.Add(5*time.Second), p.resetAt, "no longer brought forward")
}

// Four processes that share a quota and start within a few milliseconds
// of each other on loopback (bench/storm's fleets: round trips under a
// millisecond, the first window spent within a few), 50 requests each
// from 10 workers against 50 per 2 s, over 20 seeds: the first window's
// 429s (each client's first answers show the others only once their sends
// land) and the fleet bars, seed by seed. Today: 38 first-window
// 429s in all, at most 3.8% a seed, both bars met in 17 of 20 (the others
// 1.34-1.35x: a window's last unit left); 120, up to 6.1% and 13 of 20
// before the client read the others in the order of its sends
// (TestBookFirstWindowOthersBySendOrder).
func TestBookSimulatedFleetsStartingTogether(t *testing.T) {
	const seeds = 20
	first, met := 0, 0
	for seed := uint64(1); seed <= seeds; seed++ {
		rnd := rand.New(rand.NewPCG(seed, 3))
		starts := make([]time.Duration, 4)
		for c := range starts {
			starts[c] = 5*time.Millisecond + time.Duration(rnd.Int64N(int64(5*time.Millisecond)))
		}
		s := &simServer{quota: 50, window: 2 * time.Second, dialect: "draft-11"}
		r := simulateFrom(s, 10, 50, 200*time.Microsecond, starts, seed)
		served := r.sent - r.refused
		limit := time.Duration(float64(served-s.quota) / 25 * float64(time.Second))
		share, slowdown := float64(r.refused)/float64(r.sent), r.took.Seconds()/limit.Seconds()
		w0 := 0
		for _, d := range s.denied {
			if d < s.window {
				w0++
			}
		}
		first += w0
		if share <= 0.05 && slowdown <= 1.25 {
			met++
		}
		t.Logf("seed %2d: %d of %d refused (%.1f%%, %d in the first window), %.2fx", seed, r.refused, r.sent, 100*share, w0, slowdown)
		assert.LessOrEqual(t, share, 0.05, "seed %d", seed)
	}
	t.Logf("first windows: %d 429s in %d runs; both bars met in %d", first, seeds, met)
	assert.LessOrEqual(t, first, 60)
	assert.GreaterOrEqual(t, met, 15)
}

// A client that took itself to be alone brings its turn forward
// (capTurn); once its answers show it is one of a fleet, it turns at the
// turn stated, with the others: the earliest its window's answers stated,
// not the latest answer's, which a 429 late in the window states up to a
// second late (a client that took that one sent each window's first
// requests 220 ms past the turn, into windows the others had spent, and
// lost a request to four 429s: bench/storm's 4 x 200, ratelimit-06).
func TestBookFleetTurnIsTheEarliestStated(t *testing.T) {
	var b Book
	tk, _ := b.Reserve(host, "", now, time.Minute, nil)
	answer(&b, tk, 9, 2, now.Add(500*time.Millisecond)) // stated: now+2.5 s; a window after its send: now+2 s
	p := b.scopes[host].policies[0]
	require.True(t, p.capped)
	require.Equal(t, now.Add(2*time.Second), p.resetAt)
	p.share = 0.5 // measured: one of two
	late := now.Add(1200 * time.Millisecond)
	tk, _ = b.Reserve(host, "", late, time.Minute, nil)
	h := http.Header{"Ratelimit": {`"q";r=0;t=2`}, "Ratelimit-Policy": {`"q";q=10;w=2`}}
	b.Done(tk, Read(h, late, IETF, 0, false), true, late) // a 429: now+3.2 s stated
	assert.False(t, p.capped)
	assert.Equal(t, now.Add(2500*time.Millisecond), p.resetAt, "the earliest turn stated, not the 429's")
}

// A quota paced as a bucket (a client that came late to a fleet's windows
// sees counts a bucket's could be) and refused twice is held to its turns
// from then on: the earliest turn its answers stated, not the latest
// one's, stated by a 429 late in the window up to a second late.
func TestBookBucketRefusedTwiceTurnsAtTheEarliestStated(t *testing.T) {
	var b Book
	at := now
	for _, r := range []int{20, 15, 10} { // low counts, 2 s to go: a bucket's too
		tk, held := b.Reserve(host, "", at, time.Minute, nil)
		require.Nil(t, held)
		b.Done(tk, Read(header06(r, 2), at, IETF, 0, false), false, at)
	}
	p := b.scopes[host].policies[0]
	require.True(t, p.bucket())
	for _, late := range []time.Duration{220 * time.Millisecond, 300 * time.Millisecond} {
		at := now.Add(late)
		tk := Open(host, "", at)
		tk.sc, tk.mask = b.scopes[host], 1
		p.inFlight++
		b.Done(tk, Read(header06(0, 2), at, IETF, 0, false), true, at) // 429s: the turn stated 2 s on, rounded up
	}
	require.False(t, p.bucket(), "refused twice: held to its turns")
	assert.Equal(t, now.Add(2*time.Second), p.resetAt, "the earliest turn stated, not the 429s'")
}

// A turn the book reckoned before the earliest one its window's answers
// stated, refused (the window had not turned), goes back to that turn, not
// to the one the 429 states, whose reset, rounded up, states it up to a
// second late (bench/storm's 4 x 200: a client came 320 ms past each turn
// from then on).
func TestBookRefusedTurnGoesBackToTheEarliestStated(t *testing.T) {
	var b Book
	tk, _ := b.Reserve(host, "", now, time.Minute, nil)
	b.Done(tk, Read(header06(49, 2), now, IETF, 0, false), false, now) // the turn stated: now+2 s
	p := b.scopes[host].policies[0]
	require.True(t, p.fixed)
	p.crowded = true                             // one of a fleet: no turn brought forward by its own sends (capTurn)
	p.resetAt = now.Add(1300 * time.Millisecond) // reckoned early
	early := p.resetAt
	probe, held := b.Reserve(host, "", early, time.Minute, nil)
	require.Nil(t, held, "the turn's first send asks whether it came")
	require.NotZero(t, probe.probes)
	b.Done(probe, Read(header06(0, 1), early, IETF, 0, false), true, early) // refused: 0.7 s left, stated 1 s
	assert.Equal(t, now.Add(2*time.Second), p.resetAt, "the earliest turn stated, not the 429's (now+2.3 s)")
}

// header06 is the header of an answer in the dialect of the drafts up to
// -06, a quota of 50: r left, the turn in t whole seconds.
func header06(r, t int) http.Header {
	return http.Header{"Ratelimit-Limit": {"50"}, "Ratelimit-Remaining": {fmt.Sprint(r)}, "Ratelimit-Reset": {fmt.Sprint(t)}}
}
