package quota

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Book keeps the pacing state of the scopes one client sends to, and
// decides, before each send, whether the quotas its scope's server
// advertised let it go now (Reserve) and, after the answer, what the
// answer says of them (Done). A scope is a host, refined by a name of the
// caller's (Key); within it, the quotas the server names (policies). The
// zero value is an empty Book, ready to use. Safe for concurrent use.
//
// For each policy it keeps the remaining count the answers state, the time
// its window turns, and the sends not yet answered (in flight), which
// count against the remaining count until their answers refresh it. A
// request goes when its share of the remaining count, less the sends in
// flight, leaves room for it; otherwise it waits until the window turns,
// or, if more wait than the next window is likely to take at once, until
// a slot spread over that window at its pace (quota over window). A quota
// whose answers are a token bucket's (its count plus the refill until the
// stated reset make the quota: the reset is the time to a full bucket) is
// paced at its rate instead: its count is the latest stated plus what
// refilled since, and a request without room takes the next slot of the
// pace rather than wait for a full bucket. The share is 1 for a client
// alone; several clients that use one quota see the count fall faster
// than their own sends explain, and each estimates its share as the ratio
// of the two (a client refused at its first send starts at the least;
// one whose first answer shows others spending the window sends no more
// at once than it has had answers until its share is measured). It reads
// the others in the order of its sends: of its own, an answer's count can
// have counted only those sent before it; a count fallen further shows
// others, and, until its share is measured, the client takes its part of
// the count's fall so far. At a
// fixed window's turn, a client of such a fleet sends its share of the
// quota and waits for the bursts to land before it reads the counts
// again, and takes the count to be no more than the quota less its own
// sends over its share; one whose own sends in flight hold its room waits
// for their answers, not the turn. A client whose share leaves the quota
// unused (the others' batches ended) probes it: one send at a time while
// a sixth of a window's quota is stated left, whose answers, if the count
// falls by no more than their own sends, double its share; a bucket full
// but for its own sends gives it the whole. The requests held for a turn go in the
// order they were first held (a queue per policy); at a turn the book
// reckoned, one send asks first whether the window turned. For a client
// alone, its answer wakes the others (Hold.Wake), which keep the room the
// turn gives while they wait for it, a new request
// leaves them a margin of up to two sends while sends are in flight (the
// answers of a burst, come on several connections, state counts a few
// apart), and a held request that finds its own sends in flight holding
// the room waits for their answers, not for the next turn. A fixed window
// turns at most a window after the earliest send its answers counted: a
// client alone whose first send went as the window began finds the turn
// that a reset in whole seconds (an epoch's) states up to a second late,
// and keeps its part of a second turn after turn; a client of a fleet
// turns at the earliest turn its window's answers stated (a 429 late in a
// window states one up to a second late). An answer to an earlier send
// that comes after the answers to later ones is older news.
// docs/ratelimit.md.
type Book struct {
	n      atomic.Int32 // len(scopes): an empty book is read without the lock
	mu     sync.RWMutex
	scopes map[Key]*scope
}

// Key names a scope: a host (its scheme and host[:port], or any strings
// that name one) and the name a caller gives part of its requests (""
// for none).
type Key struct {
	Scheme, Host, Name string
}

// Bounds on the state kept.
const (
	MaxScopes   = 1024 // scopes in a Book; the least recently used goes
	MaxPolicies = 16   // policies in a scope; others are not kept
	maxRoutes   = 64   // routes a routed policy knows; others are not held by it
)

// shareAlone is the share above which a client is taken to be alone:
// the estimate's noise must not cost a client alone its last request of
// each window.
const shareAlone = 0.9

// scope is the state of one Key.
type scope struct {
	policies []*policy
	used     time.Time // the latest Reserve or Done
	sends    uint64    // the sends Reserve let go: the latest's Ticket.ord
}

// policy is the state of one quota of a scope.
type policy struct {
	name   string
	routed bool     // held only by the requests of routes answered with it
	routes []string // those routes

	remaining int64     // the count as the answers of the current window state it (a bucket: the latest)
	statedAt  time.Time // when the latest answer stated it
	sentAt    time.Time // when the send that answer answered went: an answer to an earlier send is older news
	resetAt   time.Time // when the current window turns; zero: not known
	since     time.Time // when the current window began: sends before it are answered for an older one
	limit     int64     // a window's quota; 0: not stated
	window    time.Duration
	peak      int64 // the highest count stated: the quota, when not stated
	inFlight  int
	span      time.Duration // the longest reset stated: the window, when not stated
	answers   int           // answers read, up to bucketAnswers
	rateSeen  float64       // the fastest refill a bucket's answer implies, per second
	fixed     bool          // an answer was not a bucket's: the count returns only at the turn
	missed    int           // refusals while paced as a bucket
	crowded   bool          // the first answer showed others spending the window

	queue   []waiter // the requests held for a turn, in the order first held
	nextSeq uint64

	paceNext time.Time     // the next free slot of a bucket's pace
	rtt      time.Duration // the latest time from a send to its answer
	heardAt  time.Time     // when the latest answer came

	unconfirmed bool          // the window turned by the book's reckoning (roll); no answer has shown it yet
	probeAt     time.Time     // when the send that asks whether it did went; zero: none out
	probeDone   chan struct{} // closed when that send's answer comes (endProbe): the requests held for it ask again
	lag         time.Duration // added to the stated resets: the server states its turn early (it rounds down)
	refused     bool          // the answer being read refused the send that asked: the window did not turn
	coarse      bool          // resets are stated in whole seconds (not Fine): a turn may come up to a second before the one stated
	opened      time.Time     // when the earliest send the current window's answers counted went; zero: none yet
	openedPrev  time.Time     // opened of the window before the book's latest turn (a refused probe restores it)
	notBefore   time.Time     // a send that went then was refused the turn: the window turns later
	reach       time.Duration // the longest reset stated (answerProbe does not lengthen it, as it does span)
	capped      bool          // resetAt is capTurn's, before the turn stated
	statedTurn  time.Time     // the earliest turn the current window's answers stated (a bucket's: still to come); zero: none yet
	statedPrev  time.Time     // statedTurn of the window before the book's latest turn (a refused probe restores it)
	capMissed   int           // sends at capTurn's turns that were refused
	minWhole    time.Duration // the least window capTurn takes, after such a refusal

	share  float64   // the client's estimated share of the quota, in (0, 1]
	base   int64     // the count at the first answer of the measure; -1: none yet
	baseAt time.Time // when it was stated
	low    int64     // the lowest count the measure's answers stated
	own    int64     // the measure's answers that the server let through
	prevR  int64     // the count the previous answer stated; -1: none
	alone  int       // answers in a row whose count fell by their own send alone

	// The measure's answers against the order of their sends (Ticket.ord):
	// the client's sends that the server can have counted between two
	// answers are those that went between their sends (a later send is
	// counted later) and those in flight at the first; the count's fall
	// beyond them is other clients' sends.
	ordSet bool    // the first answer of the measure was read: ordOf, ordR and ordOut are its
	ordOf  uint64  // its send's ord
	ordR   int64   // the count it stated
	ordOut int64   // the client's sends in flight then that went before it (counted after it, maybe)
	seen   int64   // the most sends of other clients an answer of the measure showed
	shown  float64 // the client's part of the count's fall that its latest answer showed; 0: none yet
}

// waiter is a request held for a policy's turn (or for the answer that
// shows it), in its place in the policy's queue.
type waiter struct {
	seq uint64
	due time.Time // when it asks again: one that has not asked waiterGrace after it gave up
}

// Bounds on a policy's queue: waiters past maxQueue wait without a place
// (they ask again as new); a waiter that has not asked again waiterGrace
// after its due time is taken to have given up (its context ended).
const (
	maxQueue    = 4096
	waiterGrace = time.Second
)

// Ticket is a send that Reserve let go; pass it to Done with the send's
// answer. The zero Ticket is valid.
type Ticket struct {
	key    Key
	route  string
	sentAt time.Time
	sc     *scope
	mask   uint32 // the policies of sc whose in-flight count it holds
	probes uint32 // the policies of sc whose turn it asks about (turnProbeWait)
	ord    uint64 // the send's number among sc's (1, 2, ...); 0: sent while the book was idle
}

// Hold says why a request was not let go: the policy whose window it
// waits for, its remaining count, and the wait before the request may ask
// again (Reserve).
type Hold struct {
	Policy    string
	Remaining int64
	Wait      time.Duration
	// Wake, if not nil, is closed when the request may ask again before
	// Wait ends: the answer it waits for came.
	Wake <-chan struct{}

	slot   *policy // a bucket's, whose pace gave the request a slot
	queued *policy // the policy whose queue keeps the request's place, if any
	seq    uint64  // its place there
	why    waitFor // what it waited for
}

// Reserve decides, at now, for a request of scope k whose route is route
// (package retryhttp: its path's first segment): a Ticket to send it now,
// or a Hold whose Wait is how long to wait before asking again. bound is
// the longest the caller can wait: a longer wait is still returned, for
// the caller to fail with, but does not count the request among the
// window's waiters. after is the Hold the request waited for, when it
// asks again (nil: first asked): a request that waited for a slot of a
// bucket's pace is not put behind the slots given after it.
func (b *Book) Reserve(k Key, route string, now time.Time, bound time.Duration, after *Hold) (Ticket, *Hold) {
	t := Ticket{key: k, route: route, sentAt: now}
	if b.n.Load() == 0 {
		return t, nil
	}
	b.mu.RLock()
	sc := b.scopes[k] // a scope of no quota, the usual case, takes no write lock
	b.mu.RUnlock()
	if sc == nil {
		return t, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if sc = b.scopes[k]; sc == nil {
		return t, nil
	}
	sc.used = now
	t.sc = sc
	var held *policy
	var wait time.Duration
	var why waitFor
	for _, p := range sc.policies {
		if !p.applies(route) {
			continue
		}
		if w, f := p.hold(now, after); w > wait || held == nil && w > 0 {
			held, wait, why = p, w, f
		}
	}
	if held != nil {
		h := &Hold{Policy: held.name, Remaining: held.remaining, Wait: wait, why: why}
		switch {
		case held.bucket():
			// A slot beyond a window: the pace may quicken meanwhile (the
			// share grows); it asks again a window on, its slot kept.
			h.slot, h.Wait = held, min(wait, held.windowLen())
		case wait <= bound:
			h.Wait = held.enqueue(now, after, h, why, wait)
			if why == forProbe && held.solo() {
				// A client alone: woken by the answer. A fleet's clients
				// ask at their intervals, which spread their turn's bursts
				// (woken at once, 4 x 200 in bench/storm met more 429s).
				h.Wake = held.probeDone
			}
		default:
			held.leave(after) // it will not wait: its place goes
		}
		return Ticket{}, h
	}
	sc.sends++
	t.ord = sc.sends
	for i, p := range sc.policies {
		if p.applies(route) {
			p.leave(after)
			p.inFlight++
			t.mask |= 1 << i
			if p.unconfirmed && p.probeAt.IsZero() {
				p.probeAt = now // the first send of a turn the book reckoned asks whether it came
				p.probeDone = make(chan struct{})
				t.probes |= 1 << i
			}
		}
	}
	return t, nil
}

// Done records the answer to the send of t, at now: obs, the quotas it
// states (Read), and whether it was a 429 (throttled). An answer without
// obs (an error, a response without the fields) only ends the send.
func (b *Book) Done(t Ticket, obs []Observation, throttled bool, now time.Time) {
	if t.sc == nil && len(obs) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	sc := t.sc
	for i, p := range sc.policiesOrNil() {
		if t.probes&(1<<i) != 0 {
			p.answerProbe(obs, throttled)
		}
		if t.mask&(1<<i) != 0 && p.inFlight > 0 {
			p.inFlight--
			if d := now.Sub(t.sentAt); d > 0 {
				p.rtt = d
			}
			if throttled && len(obs) == 0 && !t.sentAt.Before(p.since) {
				p.remaining, p.statedAt, p.sentAt = 0, now, t.sentAt // the server refused: none left, whatever was stated
			}
		}
	}
	if len(obs) == 0 {
		return
	}
	if cur := b.scopes[t.key]; cur != nil {
		sc = cur
	} else {
		sc = b.add(t.key, now)
	}
	sc.used = now
	for _, o := range obs {
		if p := sc.policy(o); p != nil {
			p.observe(o, t, sc.sends, now, throttled)
		}
	}
	for _, p := range sc.policies {
		p.refused = false // read, or not stated by this answer
	}
}

// policiesOrNil returns sc's policies; none for a nil sc.
func (sc *scope) policiesOrNil() []*policy {
	if sc == nil {
		return nil
	}
	return sc.policies
}

// add makes the scope k, evicting the least recently used if the book is
// full. Requires b.mu.
func (b *Book) add(k Key, now time.Time) *scope {
	if b.scopes == nil {
		b.scopes = map[Key]*scope{}
	}
	if len(b.scopes) >= MaxScopes {
		var oldest Key
		var at time.Time
		first := true
		for key, sc := range b.scopes {
			if first || sc.used.Before(at) {
				oldest, at, first = key, sc.used, false
			}
		}
		delete(b.scopes, oldest)
	}
	sc := &scope{used: now}
	b.scopes[k] = sc
	b.n.Store(int32(len(b.scopes)))
	return sc
}

// policy returns sc's policy named by o, making it if there is room.
func (sc *scope) policy(o Observation) *policy {
	for _, p := range sc.policies {
		if p.name == o.Policy && p.routed == o.Routed {
			return p
		}
	}
	if len(sc.policies) >= MaxPolicies {
		return nil
	}
	p := &policy{name: o.Policy, routed: o.Routed, share: 1, base: -1, prevR: -1}
	sc.policies = append(sc.policies, p)
	return p
}

// applies reports whether p holds the requests of route.
func (p *policy) applies(route string) bool {
	if !p.routed {
		return true
	}
	for _, r := range p.routes {
		if r == route {
			return true
		}
	}
	return false
}

// roll moves p into the window that began at its turn, if the turn has
// passed at now: the count is then the quota, as far as it is known,
// until an answer states it.
func (p *policy) roll(now time.Time) {
	if p.resetAt.IsZero() || now.Before(p.resetAt) {
		return
	}
	if !p.bucket() {
		p.measure(0)
	}
	p.since = p.resetAt
	p.openedPrev, p.opened = p.opened, time.Time{} // (capped: the turn reckoned from one capTurn brought is its too)
	p.remaining, p.statedAt, p.sentAt = p.quota(), p.resetAt, p.resetAt
	p.statedPrev, p.statedTurn = p.statedTurn, time.Time{}
	p.unconfirmed = !p.bucket()
	p.endProbe()
	p.base, p.own = -1, 0
	w := p.windowLen()
	if p.fixed && !p.bucket() && p.wholeWindow() > 0 {
		// A fixed window stated in whole seconds: its whole seconds, not
		// the longest reset (a reset truncated, or lengthened by a
		// refused send, is not a window).
		w = p.wholeWindow()
	}
	if w > 0 {
		n := now.Sub(p.resetAt)/w + 1 // windows passed, the one begun included
		p.resetAt = p.resetAt.Add(n * w)
	} else {
		p.resetAt = time.Time{}
	}
}

// measure estimates the client's share of p's quota over the measure
// that ends: its own sends that the server let through, over what the
// quota spent meanwhile (all the clients' sends): the quota less the
// lowest count, for a window it saw begin (it rolled into it) or saw
// spent (a fixed window's count of 0: then the share is exact, and the shares of the
// clients that saw it spent sum to 1, even for a client none of whose
// sends got through); otherwise what the count fell while it watched,
// from its first answer (that answer's send included), and, for a
// bucket, what refilled meanwhile (refill). A client alone spent it all
// itself; one of four, a quarter. The share is at least one send of the
// window's quota (up to 64), so that every client sends at each turn.
func (p *policy) measure(refill float64) {
	if p.base < 0 || p.own == 0 && !p.spent() {
		return
	}
	if s, ok := p.estimate(refill); ok {
		if p.fixed && !p.spent() && p.fleet() && p.heardAt.Before(p.burstEnd()) {
			// The lowest count it saw was stated before the others'
			// bursts had all landed: the window's end is not seen, and the
			// share it gives is too large. Only a smaller one counts.
			s = min(s, p.share)
		}
		p.share = s
	}
}

// estimate returns the share the measure so far shows, if it shows one:
// the sends in flight are taken to be counted by the server already.
func (p *policy) estimate(refill float64) (float64, bool) {
	spent := float64(p.base-p.low+1) + refill
	if !p.bucket() && (!p.since.IsZero() || p.spent()) {
		spent = float64(p.quota() - p.low)
	}
	if spent <= 0 {
		return 0, false
	}
	own := p.own
	if !p.spent() {
		own += int64(p.inFlight) // a window seen spent had room for none of them
	}
	return min(max(float64(own)/spent, 1/float64(min(p.quota(), 64))), 1), true
}

// spent reports whether p's answers showed its fixed window spent (a count
// of 0) in the measure: its share of the window is then exact. Not for a
// quota that may be a bucket, whose measure does not span a window.
func (p *policy) spent() bool { return p.fixed && p.low == 0 }

// quota returns the count a new window is taken to start with: the quota
// stated, or else the highest count stated, or else 1 (a probe).
func (p *policy) quota() int64 {
	switch {
	case p.limit > 0:
		return p.limit
	case p.peak > 0:
		return p.peak
	}
	return 1
}

// windowLen returns the length of p's window: as stated, or else the
// longest reset stated; zero if not known.
func (p *policy) windowLen() time.Duration {
	if p.window > 0 {
		return p.window
	}
	if whole := p.span.Truncate(time.Second) + time.Second; whole-p.span < whole/40 {
		// The longest reset seen is what was left of the window at the
		// first answer after a turn: a little short of it. Windows are
		// whole seconds; one taken a little short turns early, and every
		// few turns a send meets the old window's end.
		return whole
	}
	return p.span
}

// rate returns how fast p's quota returns, per second: the quota over the
// window stated, or else the fastest refill a bucket's answers imply (a
// reset rounded up to whole seconds makes the longest reset too long), or
// else the quota over the longest reset; zero if not known.
func (p *policy) rate() float64 {
	if p.window <= 0 && p.rateSeen > 0 {
		return p.rateSeen
	}
	if w := p.windowLen(); w > 0 {
		return float64(p.quota()) / w.Seconds()
	}
	return 0
}

// bucketAnswers is how many answers must agree with a token bucket's
// before p is paced as one.
const bucketAnswers = 3

// bucket reports whether p is paced as a token bucket (or a sliding
// window): its count returns a little at a time, at its rate, rather than
// all at the turn. A server that states the reset as the time to a full
// bucket would otherwise hold a client that sees a low count for a whole
// refill.
func (p *policy) bucket() bool {
	return !p.fixed && p.answers >= bucketAnswers && p.windowLen() > 0
}

// share1 returns the share p's client paces to: 1 when it is taken to be
// alone.
func (p *policy) share1() float64 {
	if p.share >= shareAlone {
		return 1
	}
	return p.share
}

// aloneRun is how many answers in a row, each stating a count fallen by
// no more than its own send, double a share (count1); with 4, the
// simulated fleets (TestBookSimulatedBatches) met more 429s.
const aloneRun = 8

// count returns the count p has at now: as stated, and for a bucket, with
// what refilled since.
func (p *policy) count(now time.Time) float64 {
	c := float64(p.remaining)
	if p.bucket() && now.After(p.statedAt) {
		c = min(float64(p.quota()), c+p.rate()*now.Sub(p.statedAt).Seconds())
	}
	return c
}

// room returns how many more sends p lets go at once: the client's share
// of the remaining count (for a fleet's client, of fleetCount's), less its
// sends in flight, and in a crowded start no more than its answers
// (starting); for a quota whose answers showed a fixed window, with a
// sixth of its quota or more stated left, at least one send when none is
// in flight (a probe).
func (p *policy) room(now time.Time) int64 {
	c := p.count(now)
	if p.fleet() && now.Before(p.burstEnd()) {
		// The turn's burst: the clients of a fleet each send their share
		// of the window's quota at once, and the counts their answers
		// state do not show the others' bursts yet: a client sends its
		// share of the quota (one at least), no more, until they have
		// landed.
		budget := max(int64(p.share*float64(p.quota())+1e-9), 1)
		return min(budget-p.own, int64(c)) - int64(p.inFlight)
	}
	room := p.allowance(p.fleetCount(c)) - int64(p.inFlight)
	if p.since.IsZero() && p.shown > 0 && p.shown < p.share1() && p.others() {
		// The first window, others spending it too, the share not yet
		// measured: the client's part of the count's fall so far, of
		// what is left (as if alone, each client would send the whole).
		room = int64(p.shown*c+1e-9) - int64(p.inFlight)
	}
	if p.starting() {
		room = min(room, max(p.own, 1)-int64(p.inFlight))
	}
	if !p.bucket() && p.since.IsZero() && c*endShare < float64(p.quota()) && p.others() {
		// The end of a first window that others spend too: their sends
		// in flight are not in the count yet, and each client that took
		// the count for its own would overshoot it. One at a time.
		room = min(room, 1-int64(p.inFlight))
	}
	if room < 1 && p.inFlight == 0 && p.fixed && (c*probeShare >= float64(p.quota()) || p.rest(c)) {
		// A probe: a sixth of the window's quota or more is left, as the
		// latest answer states it, or for a fleet's client the rest the
		// others left, which the share would leave unused if
		// the other clients no longer send (their batches ended). One at
		// a time, whose answers show whether they do (count1) and what
		// is left once the others' sends landed (measure).
		return 1
	}
	return room
}

// rest reports whether p's client, of a fleet, takes the count c it last
// heard to be what the others left of the window: stated once the turn's
// bursts had landed (before, the others' sends were still landing), and
// more than one, or one that the count fell to by the client's own send
// alone (where others take the rest too, the last one goes to one of
// them; each sending for it would meet a 429).
func (p *policy) rest(c float64) bool {
	return p.fleet() && !p.heardAt.Before(p.burstEnd()) && (c >= 2 || c >= 1 && p.alone > 0)
}

// endShare is the part of a window's quota (one over it) below which a
// client that others' sends crowd keeps one send in flight, in the first
// window it meets (before it measured its share).
const endShare = 4

// others reports whether p's answers showed other clients spending the
// window: its first answer did (crowded), or the count fell further than
// all its own sends could explain.
func (p *policy) others() bool {
	return p.crowded || p.seen > 0 || p.base >= 0 && p.base-p.low > p.own+int64(p.inFlight)
}

// probeShare is the part of a window's quota (one over it) whose being
// left lets a client whose share has no room probe the window: with 2 (a
// half), a fleet whose clients' batches end one by one left windows a
// third unused (bench/storm's 4 x 50); with 8, the stale counts of a
// turn's bursts sent probes into spent windows.
const probeShare = 6

// fleetCount returns the count c that p's client takes to be left: for a
// client of a fleet in a fixed window, no more than what the window began
// with less its own sends over its share (the others send in proportion:
// their sends land between its answers, whose counts lag them).
func (p *policy) fleetCount(c float64) float64 {
	if !p.fixed || p.share1() >= 1 || p.base < 0 {
		return c
	}
	start := p.quota()
	if p.since.IsZero() {
		start = p.base + 1
	}
	return min(c, float64(start)-float64(p.own)/p.share)
}

// starting reports whether p's client is in the first window it met, its
// first answer showed others spending it, and its answers have not yet
// measured its share (measureAnswers): it sends no more at once than it
// has had answers (one, then two, ...), whose counts show how fast the
// others spend the window before it sends as if alone.
func (p *policy) starting() bool {
	return p.crowded && p.since.IsZero() && p.own < measureAnswers
}

// measureAnswers is how many answers of its own a client's share is first
// measured on within a window.
const measureAnswers = 4

// solo reports whether p's client is taken to use the quota alone: its
// share is whole, and its first answer did not show others spending the
// window. The rules that keep a turn's room for the requests held for it
// are a lone client's; a fleet's clients keep to their intervals, which
// spread their bursts at the turn.
func (p *policy) solo() bool {
	return p.share1() >= 1 && !p.crowded
}

// fleet reports whether p's client shares a fixed window with others (its
// share is below shareAlone) and saw the window turn.
func (p *policy) fleet() bool {
	return p.fixed && p.share1() < 1 && !p.since.IsZero()
}

// burstEnd returns when the clients' bursts at the turn of p's window are
// taken to have landed: a few round trips after it.
func (p *policy) burstEnd() time.Time {
	return p.since.Add(max(minBurstSpan, 4*p.rtt))
}

// minBurstSpan is burstEnd's least span after the turn.
const minBurstSpan = 20 * time.Millisecond

// allowance returns how many sends the client's share of the count c lets
// be in flight at once.
func (p *policy) allowance(c float64) int64 {
	return int64(p.share1()*c + 1e-9)
}

// waitFor is what a held request waits for.
type waitFor int

const (
	forRoom    waitFor = iota // room: answers to come, a slot of a pace
	forTurn                   // the window's turn
	forProbe                  // the answer that shows whether the window turned
	forAnswers                // the answers to the client's sends in flight
)

// hold returns how long a request must wait for p at now: zero if p has
// room for it, or does not know when its window turns; and what it waits
// for. after: the Hold it waited for (nil: first asked).
func (p *policy) hold(now time.Time, after *Hold) (time.Duration, waitFor) {
	p.roll(now)
	if p.bucket() {
		return p.holdBucket(now, after != nil && after.slot == p), forRoom
	}
	if w := p.holdForProbe(now); w > 0 {
		return w, forProbe
	}
	if p.resetAt.IsZero() {
		return 0, forRoom
	}
	ahead := int64(p.ahead(now, after))
	if p.room(now) > ahead+p.margin(ahead, after) {
		return 0, forRoom
	}
	if p.fleet() && now.Before(p.burstEnd()) {
		// Its share of the turn's burst sent: what the bursts left goes
		// by the counts once they have landed.
		return min(p.burstEnd().Sub(now), p.resetAt.Sub(now)), forRoom
	}
	if p.inFlight > 0 && (p.starting() || p.share1() < 1 || p.solo() && after != nil && after.queued == p) && (p.allowance(p.count(now)) > ahead || p.fleet()) {
		// The client's own sends in flight hold the room its share of the
		// count gives: their answers free part of it (the share of a
		// count fallen by them is less by less than them), long before
		// the turn; for a fleet's client, their answers may state what
		// the others left (rest). A round trip; for a client alone,
		// doubled at each wait in a row up to maxAnswersWait (sends that
		// hang do not make it poll).
		w := max(p.rtt, time.Millisecond)
		if after != nil && after.why == forAnswers && p.solo() {
			w = max(w, 2*after.Wait)
		}
		return min(w, maxAnswersWait, p.resetAt.Sub(now)), forAnswers
	}
	if p.rest(p.count(now)) || p.fleet() && p.room(now) >= 1 && (after == nil || after.why != forAnswers) {
		// The room there is (the rest the others left, or a probe of
		// it) goes to those ahead, one by one; their answers tell
		// whether some is left. (Once for a probe's room: those ahead
		// are sent at once, and answered in a round trip.)
		return min(max(p.rtt, time.Millisecond), p.resetAt.Sub(now)), forAnswers
	}
	return p.resetAt.Sub(now), forTurn
}

// maxAnswersWait bounds a wait for the answers to the client's sends in
// flight: within waiterGrace, so that a request that waits for them keeps
// its place.
const maxAnswersWait = waiterGrace / 2

// margin returns the room that a request not yet held by p leaves, beyond
// the ahead requests held before it, for a client alone: the answers of a
// window's end, come on several connections, state counts a few apart,
// and a held request denied for want of one unit waits a whole window.
// None while no send is in flight (the count is then exact).
func (p *policy) margin(ahead int64, after *Hold) int64 {
	if ahead == 0 || after != nil && after.queued == p || !p.solo() {
		return 0
	}
	return min(int64(p.inFlight), maxMargin)
}

// maxMargin bounds margin.
const maxMargin = 2

// ahead returns how many requests wait before the request that waited
// for after (a new one: all that wait) and are due to ask again by now,
// dropping the waiters that gave up. The room a window's turn gives goes
// in the order the requests were first held: a closed loop that asks
// again the moment its answer comes does not take the turn of a request
// that waited for it; room that frees before the waiters are due goes to
// whoever asks.
func (p *policy) ahead(now time.Time, after *Hold) int {
	if len(p.queue) == 0 {
		return 0
	}
	p.queue = slices.DeleteFunc(p.queue, func(w waiter) bool { return now.Sub(w.due) > waiterGrace })
	end := len(p.queue)
	if after != nil && after.queued == p {
		end, _ = p.find(after.seq)
	}
	n := 0
	for _, w := range p.queue[:end] {
		if !w.due.After(now) {
			n++
		}
	}
	return n
}

// find returns the index of seq in p's queue, or where it would be.
func (p *policy) find(seq uint64) (int, bool) {
	return slices.BinarySearchFunc(p.queue, seq, func(w waiter, seq uint64) int { return cmp.Compare(w.seq, seq) })
}

// leave takes the request that waited for after out of p's queue: it
// goes, or will not wait again.
func (p *policy) leave(after *Hold) {
	if after == nil || after.queued != p {
		return
	}
	if i, found := p.find(after.seq); found {
		p.queue = slices.Delete(p.queue, i, i+1)
	}
}

// fineHold is how long a count of 0 whose window turns "now", stated
// finer than in whole seconds, holds the requests.
const fineHold = 50 * time.Millisecond

// turnProbeWait bounds the wait for the answer that shows a turn the book
// reckoned (holdForProbe): an answer slower than this, the turn is taken
// on trust.
const turnProbeWait = 500 * time.Millisecond

// holdForProbe returns how long a request must wait at now for the answer
// to the first send of a window the book turned by its own reckoning: a
// server that rounds its reset down, or whose clock runs late, turns
// after the time it stated, and a whole window's quota sent at that time
// would meet 429s. Until that answer shows the new window (or
// turnProbeWait passes), the others wait for it, asking again at doubling
// intervals from a millisecond. Zero when no such send is out.
func (p *policy) holdForProbe(now time.Time) time.Duration {
	if !p.unconfirmed || p.probeAt.IsZero() {
		return 0
	}
	out := now.Sub(p.probeAt)
	if out >= turnProbeWait {
		p.unconfirmed = false
		p.endProbe()
		return 0
	}
	return min(max(out, time.Millisecond), turnProbeWait-out)
}

// endProbe ends the wait for the send that asks whether p's window
// turned: the requests held for its answer ask again at once.
func (p *policy) endProbe() {
	p.probeAt = time.Time{}
	if p.probeDone != nil {
		close(p.probeDone)
		p.probeDone = nil
	}
}

// answerProbe records the answer to the send that asked whether p's
// window turned: a success shows it did; a 429 that states the turn come
// (no reset, or one now) shows a server that states its turns early, and
// later resets are read a second later (the rounding of whole seconds).
func (p *policy) answerProbe(obs []Observation, throttled bool) {
	sent := p.probeAt
	p.endProbe()
	switch {
	case !throttled && len(obs) > 0:
		p.unconfirmed = false
	case throttled:
		p.refused = true
		// The window the book turned goes on: its earliest send still
		// bounds its turn (capTurn), which comes after this send's, and
		// so does the earliest turn its answers stated, if after it (the
		// 429's own reset, rounded up, states it up to a second late).
		p.opened, p.notBefore = p.openedPrev, sent
		if p.statedPrev.After(sent) {
			p.statedTurn = p.statedPrev
		}
		if p.capped {
			// Brought too soon: the window is longer than taken.
			p.capMissed++
			p.minWhole = p.wholeWindow() + time.Second
		}
		for _, o := range obs {
			switch {
			case o.Policy != p.name:
			case !o.Fine && (!o.HasReset || o.Reset <= 0):
				p.lag = time.Second
			case o.HasReset && o.Reset < p.windowLen()/2 && p.window == 0:
				// The window had not turned: it is longer than the
				// longest reset seen (a client that joined a window late
				// never saw its whole length), by the time it still had
				// to run.
				p.span = min(p.span+o.Reset, maxReset)
			}
		}
	}
}

// holdBucket is hold for a bucket: a request goes if there is room, and
// none waits for an earlier slot; otherwise it takes the next slot of the
// client's pace (its share of the rate), no sooner than its token is due.
func (p *policy) holdBucket(now time.Time, slotted bool) time.Duration {
	perSec := p.share1() * p.rate()
	gap := time.Duration(float64(time.Second) / perSec)
	if !slotted && now.Add(gap/2).Before(p.paceNext) {
		return p.slot(now, 0, gap) // others wait for slots: after them
	}
	if p.room(now) >= 1 {
		return 0
	}
	need := float64(p.inFlight+1) - p.share1()*p.count(now)
	due := time.Duration(need / perSec * float64(time.Second))
	if slotted {
		// Its slot came and the sends in flight still claim the tokens:
		// it waits for its own token, keeping its turn, rather than take
		// a slot behind every other waiter (each such slot, wasted, would
		// slow the pace below the rate).
		return max(due, time.Millisecond)
	}
	return p.slot(now, due, gap)
}

// slot takes the next slot of p's pace, no sooner than now+due.
func (p *policy) slot(now time.Time, due, gap time.Duration) time.Duration {
	at := now.Add(due)
	if at.Before(p.paceNext) {
		at = p.paceNext
	}
	p.paceNext = at.Add(gap)
	return max(at.Sub(now), time.Millisecond)
}

// enqueue keeps the place in p's queue of a request held for wait (why:
// what it waits for), giving a place to one that has none, records it in
// h, and returns the request's wait: for a turn, to the turn, for as many
// as the next window is likely to let go at once (the client's share of
// its quota); the others at slots spread after it at the quota's pace,
// where they ask again. For a client alone, a request held for a probe's
// answer or for its sends' answers stays due: the room those answers show
// is kept for it (ahead) against requests that ask before it does.
func (p *policy) enqueue(now time.Time, after, h *Hold, why waitFor, wait time.Duration) time.Duration {
	k, found := 0, false
	if after != nil && after.queued == p {
		k, found = p.find(after.seq)
	}
	if !found {
		if len(p.queue) >= maxQueue {
			return wait
		}
		p.nextSeq++
		k = len(p.queue)
		p.queue = append(p.queue, waiter{seq: p.nextSeq})
	}
	h.queued, h.seq = p, p.queue[k].seq
	if (why == forProbe || why == forAnswers) && p.solo() {
		p.queue[k].due = now
		return wait
	}
	if why == forTurn {
		allowance := max(int(p.share*float64(p.quota())), 1)
		if k >= allowance {
			gap := 50 * time.Millisecond
			if w := p.windowLen(); w > 0 {
				gap = w / time.Duration(p.quota())
			}
			wait += time.Duration(k-allowance+1) * gap
		}
	}
	p.queue[k].due = now.Add(wait)
	return wait
}

// TurnIn returns how long, at now, until the turn of the spent fixed
// windows of scope k that route's requests wait for, as b reckons it (the
// latest of them), and whether that turn is sooner than the one stated
// (found: capTurn); ok is false if none of k's quotas known to b is a
// fixed window whose latest answer stated none left.
func (b *Book) TurnIn(k Key, route string, now time.Time) (d time.Duration, found, ok bool) {
	if b.Idle() {
		return 0, false, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	sc := b.scopes[k]
	if sc == nil {
		return 0, false, false
	}
	found = true
	for _, p := range sc.policies {
		if p.applies(route) && p.fixed && !p.resetAt.IsZero() && p.remaining <= 0 {
			d, ok = max(d, p.resetAt.Sub(now)), true
			found = found && p.capped
		}
	}
	return d, found && ok, ok
}

// Forget takes the request that waited for h out of the queue it kept a
// place in: it will not ask again (its context ended).
func (b *Book) Forget(h *Hold) {
	if h == nil || h.queued == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	h.queued.leave(h)
}

// observe records o, stated by the answer to t at now; sends is the
// latest Ticket.ord of t's scope.
func (p *policy) observe(o Observation, t Ticket, sends uint64, now time.Time, throttled bool) {
	if p.routed && !p.applies(t.route) && len(p.routes) < maxRoutes {
		p.routes = append(p.routes, t.route)
	}
	if o.Limit > 0 {
		p.limit = o.Limit
	}
	if o.Window > 0 {
		p.window = o.Window
	}
	p.peak = max(p.peak, o.Remaining)
	if throttled && p.bucket() {
		// Paced as a bucket and refused all the same, twice: clients it
		// does not know of share it, or its count returns only at the
		// turn. Its turns hold it from now on. (Once may be answers come
		// out of order: a later send's higher count read last.)
		if p.missed++; p.missed >= 2 {
			p.fixed = true
			if p.statedTurn.After(now) && p.statedTurn.Before(p.resetAt) {
				// Its turn, the earliest its answers stated: a bucket's
				// is the latest's, which a 429 late in the window states
				// up to a second late (a client whose fleet's windows
				// were spent when its requests came took that turn, and
				// came that late every window).
				p.resetAt = p.statedTurn
			}
		}
	}
	p.learnShape(o)
	p.roll(now)
	p.heardAt = now
	if t.sentAt.Before(p.since) && !p.countedSince(o, now) {
		return // sent in a window past, and counted in it: its count is not this window's
	}
	resetAt := time.Time{}
	switch {
	case o.HasReset && o.Reset > 0:
		resetAt = now.Add(o.Reset + p.lag)
	case o.Remaining == 0:
		// None left, and no time (or "now", rounded down): hold for a
		// second, or the window if shorter, rather than ask at once; for
		// a reset stated finer, "now" is now: for a moment.
		hold := time.Second
		if o.HasReset && o.Fine {
			hold = fineHold
		}
		if p.window > 0 {
			hold = min(hold, p.window)
		}
		resetAt = now.Add(hold)
	}
	counted := !p.refused
	if p.refused {
		// The window the book turned had not: its count is the old
		// window's, which the share was measured on at the turn.
		p.refused = false
	} else {
		p.count1(o.Remaining, t.ord, sends, now, throttled)
	}
	newer := !t.sentAt.Before(p.sentAt) // the send went after the one that stated the count kept
	if p.bucket() {
		// The latest statement: a bucket's count goes up and down. An
		// answer to an earlier send, come late, is older news.
		if newer {
			p.remaining, p.statedAt, p.sentAt, p.resetAt = o.Remaining, now, t.sentAt, resetAt
		}
		if !resetAt.IsZero() && (!p.statedTurn.After(now) || resetAt.Before(p.statedTurn)) {
			p.statedTurn = resetAt // (should its turns hold it: missed)
		}
		return
	}
	if p.resetAt.IsZero() || newer && o.Remaining > p.remaining+int64(p.inFlight)+1 {
		// The first statement of a window, or the count went up by more
		// than answers out of order explain, for a send that went after
		// the one that stated the count: the server's window turned
		// early. (An answer to an earlier send, come late, states the
		// count before the sends answered since.)
		p.remaining, p.statedAt, p.sentAt, p.resetAt = o.Remaining, now, t.sentAt, resetAt
		p.opened, p.capped, p.statedTurn = time.Time{}, false, resetAt
		if !t.sentAt.Before(p.since) {
			p.opened = t.sentAt
		}
		p.capTurn()
		return
	}
	// The same window: the lowest count, and the earliest turn (a reset
	// in whole seconds rounds up; the earliest is the closest).
	if o.Remaining < p.remaining {
		p.remaining, p.statedAt, p.sentAt = o.Remaining, now, t.sentAt
	}
	if !resetAt.IsZero() && (p.statedTurn.IsZero() || resetAt.Before(p.statedTurn)) {
		p.statedTurn = resetAt
	}
	switch {
	case resetAt.IsZero():
	case p.capped && p.inFleet():
		// Its turns were brought by capTurn while it took itself to be
		// alone: a client of a fleet turns at the turn stated, with the
		// others (capTurn): the earliest the window's answers stated (a
		// 429 late in the window states a turn up to a second late, and
		// a client that took it sent each window's first requests that
		// late, into windows the others had spent: bench/storm's 4 x 200
		// lost a request to four 429s).
		p.resetAt, p.capped = p.statedTurn, false
	case p.statedTurn.After(now) && p.statedTurn.Before(p.resetAt):
		p.resetAt, p.capped = p.statedTurn, false // (this answer's, or an earlier one's: refused, answerProbe)
	case resetAt.Before(p.resetAt):
		p.resetAt, p.capped = resetAt, false
	}
	if counted && !t.sentAt.Before(p.since) && (p.opened.IsZero() || t.sentAt.Before(p.opened)) {
		// (A send that went before the turn the book reckoned, and was
		// counted in the new window, landed in it at a time not known.)
		p.opened = t.sentAt
	}
	p.capTurn()
}

// capTurn brings p's turn no later than a window after the earliest send
// its current window counted (opened): that send landed in the window,
// which turns at most a window after it began. A reset in whole seconds
// may state the turn up to a second late, and one stated as an epoch
// second (GitHub's) is the same second for every answer, so the
// earliest of them does not come closer: a client that began with the
// window (a batch's first send) learns the turn's part of a second from
// its own sends, and keeps it turn after turn (each window's earliest
// send goes at the turn the book reckoned). A turn so brought too soon
// meets the probe's refusal (answerProbe), and is not brought before the
// refused send again.
func (p *policy) capTurn() {
	w := p.wholeWindow()
	if w <= 0 || !p.fixed || p.missed >= 2 || p.capMissed >= maxCapMissed || p.opened.IsZero() || p.resetAt.IsZero() {
		// (A bucket refused twice, held to its turns, is no window.)
		return
	}
	if p.inFleet() {
		// A client of a fleet: each would turn at its own first send's
		// part of a second, the fleet's turns spread over their sends'
		// spread, where the turn stated (an epoch: the same instant to
		// all) turns them together; one that turned sooner than the
		// others would spend the window before their turn.
		return
	}
	if c := p.opened.Add(w); c.Before(p.resetAt) && c.After(p.notBefore) {
		p.resetAt, p.capped = c, true
	}
}

// inFleet reports whether p's client may share p with other clients: its
// first answer showed others spending the window, its share is below 1,
// or the count fell by more than its own sends since its measure began.
func (p *policy) inFleet() bool {
	if p.crowded || p.share < 1 {
		return true
	}
	if p.base < 0 || p.own == 0 && !p.spent() {
		return false // no measure under way
	}
	// The count fell by more than its own sends (one more, as the
	// measure counts a window seen spent, is its own).
	s, ok := p.estimate(0)
	return ok && s < 1-1.5/float64(p.quota())
}

// wholeWindow returns the length of p's window as capTurn takes it: as
// stated; else, for resets stated in whole seconds, the whole seconds of
// the longest (with the second a server that rounds down leaves out),
// which is the window when an answer came as it began (a reset rounded
// up states up to a second more); zero if less than a second, or for
// resets stated finer, which state the turn itself.
func (p *policy) wholeWindow() time.Duration {
	if p.window > 0 {
		return p.window
	}
	if !p.coarse {
		return 0
	}
	return max((p.reach + p.lag).Truncate(time.Second), p.minWhole)
}

// maxCapMissed is how many refusals at capTurn's turns end its capping
// of p: a window whose start no answer came near is longer than the
// longest reset shows, and each such turn would cost a 429.
const maxCapMissed = 2

// countedSince reports whether o, the answer at now to a send that went
// before p's window began (by the book's reckoning), was counted in that
// window all the same: the server turned first (the book turns at the
// stated reset, which rounds up), and its answer states a count left and
// a turn more than a window's quarter past the rounding (a second) after
// the window began. Such a send spent the new window's quota; its answer
// is read as the window's.
func (p *policy) countedSince(o Observation, now time.Time) bool {
	return o.HasReset && o.Remaining > 0 && now.Add(o.Reset).Sub(p.since) > time.Second+p.windowLen()/4
}

// learnShape reads whether o is a bucket's answer: a bucket that states
// the time to a full bucket has its count plus what refills until then
// make the quota, within the reset's rounding (a second); a fixed
// window's count is near the quota at the start of a window whose whole
// length remains, twice what a bucket states. It records the longest
// reset, and the fastest refill a bucket's answers imply.
func (p *policy) learnShape(o Observation) {
	if !o.HasReset || o.Reset <= 0 {
		return
	}
	p.span = max(p.span, o.Reset)
	p.reach = max(p.reach, o.Reset)
	p.coarse = !o.Fine
	if p.fixed {
		return
	}
	q := float64(p.quota())
	if o.Remaining <= p.quota()-2 {
		// At least this fast: the bucket holds o.Remaining and a fraction.
		p.rateSeen = max(p.rateSeen, (q-float64(o.Remaining)-1)/o.Reset.Seconds())
	}
	if w := p.windowLen(); w > 0 {
		rate := q / w.Seconds() // not rateSeen: a window's answers imply no rate
		if float64(o.Remaining)+rate*o.Reset.Seconds() > q+rate+1 {
			p.fixed = true
			return
		}
	}
	if p.answers < bucketAnswers {
		p.answers++
	}
}

// countOthers counts, in the measure, the sends of other clients that the
// answer to the send ord (sends: the latest ord of its scope), stating r,
// shows: the count's fall since the measure's first answer beyond the
// client's own sends that the server can have counted meanwhile.
func (p *policy) countOthers(r int64, ord, sends uint64, throttled bool) {
	switch {
	case !p.ordSet:
		// The first answer of the measure (its send's ord 0 only if it
		// is the first answer the book read: a send made while the book
		// was idle goes alone, Contacts).
		if ord == 0 && p.prevR >= 0 {
			return
		}
		out := int64(p.inFlight)
		if !p.routed && sends >= ord {
			out = max(out-int64(sends-ord), 0) // those that went after it are counted after it
		}
		p.ordSet, p.ordOf, p.ordR, p.ordOut = true, ord, r, out
	case ord > p.ordOf:
		mine := int64(ord-p.ordOf) + p.ordOut // its own sends the server can have counted since
		p.seen = max(p.seen, p.ordR-r-mine)
		if fall := p.ordR - r + 1; fall > 0 && !throttled {
			p.shown = min(float64(mine+1)/float64(fall), 1)
		}
	}
}

// count1 counts an answer stating r at now in the measure of the share.
func (p *policy) count1(r int64, ord, sends uint64, now time.Time, throttled bool) {
	if p.bucket() && p.base >= 0 && now.Sub(p.baseAt) >= p.windowLen() {
		p.measure(p.rate() * now.Sub(p.baseAt).Seconds())
		p.base, p.own = -1, 0
	}
	if !throttled {
		p.own++
	}
	if p.base < 0 {
		p.base, p.baseAt, p.low = r, now, r
		p.ordSet, p.seen, p.shown = false, 0, 0
	}
	p.countOthers(r, ord, sends, throttled)
	p.low = min(p.low, r)
	// Probing upward, in a fixed window (a bucket's count rises between
	// answers): answers in a row whose count fell by no more than
	// their own send show that the other clients are not sending now (their
	// batches ended, or they hold for the turn): the quota has room the
	// share leaves unused. Each run of them doubles the share until the
	// turn's measure.
	if p.fixed && !throttled && p.prevR >= 0 && r >= p.prevR-1 && r > 0 {
		p.alone++
		if p.alone >= aloneRun && p.share < 1 {
			p.share, p.alone = min(1, 2*p.share), 0
		}
	} else {
		p.alone = 0
	}
	if p.prevR < 0 {
		// Its first answer: a count below what its own send left of a
		// whole quota shows others spending the window.
		p.crowded = throttled || r < p.quota()-1
	}
	if p.prevR < 0 && throttled && r == 0 {
		// Refused at the first send (the first contact goes alone): the
		// others spent the quota before it. Its share starts at the
		// least; it grows as the count shows no one else sending, or at
		// the turn's measure.
		p.share = 1 / float64(min(p.quota(), 64))
	}
	p.prevR = r
	if p.bucket() && !throttled && r+int64(p.inFlight)+1 >= p.quota() {
		// A bucket full but for the client's own sends: no one else spends
		// it (the other clients' batches ended), whatever share the
		// measure gave the client while they did.
		p.share, p.paceNext = 1, time.Time{} // the slots given at the old pace are not waited for
	}
	// Within the measure: a share clearly below the estimate counts at
	// once (a fleet's first window, where each client took itself to be
	// alone).
	refill := 0.0
	if p.bucket() {
		refill = p.rate() * now.Sub(p.baseAt).Seconds()
	}
	if p.own >= measureAnswers {
		if s, ok := p.estimate(refill); ok && s < 0.75*p.share {
			p.share = s
		}
	}
}

// Reset forgets every scope b keeps, as if no server had advertised a
// quota to it.
func (b *Book) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	clear(b.scopes)
	b.n.Store(0)
}

// Idle reports whether b keeps no scope: no server has advertised a quota
// to it, so Reserve would let everything go. It takes no lock.
func (b *Book) Idle() bool { return b.n.Load() == 0 }

// Open returns the Ticket of a send of scope k and route made at sentAt
// without Reserve (the book was Idle), for Done to record its answer.
func Open(k Key, route string, sentAt time.Time) Ticket {
	return Ticket{key: k, route: route, sentAt: sentAt}
}

// State is one policy of a scope as Each reports it.
type State struct {
	Key    Key
	Policy string
	// Remaining is the count the answers of the current window state, less
	// nothing: sends in flight are InFlight.
	Remaining int64
	InFlight  int
	// Limit is the window's quota when stated or seen (the highest count),
	// and ResetAt when the window turns (zero: not known).
	Limit   int64
	ResetAt time.Time
}

// Each calls fn with the state of every policy b keeps, from a copy taken
// under the lock (fn may call b), until fn returns false.
func (b *Book) Each(fn func(State) bool) {
	if b.Idle() {
		return
	}
	b.mu.Lock()
	states := make([]State, 0, len(b.scopes))
	for k, sc := range b.scopes {
		for _, p := range sc.policies {
			states = append(states, State{
				Key: k, Policy: p.name, Remaining: p.remaining, InFlight: p.inFlight,
				Limit: p.quota(), ResetAt: p.resetAt,
			})
		}
	}
	b.mu.Unlock()
	for _, s := range states {
		if !fn(s) {
			return
		}
	}
}
