// Package breaker is the circuit breaker of a retryhttp Transport: a
// circuit per destination host, with the states and rules of
// github.com/sony/gobreaker/v2's two-step breaker. A closed circuit lets a
// request through and counts its success without a lock; time is read
// from the clock given to New, lazily (no timers, no goroutines).
//
// The package knows nothing of HTTP responses: the caller classifies a
// request's final outcome (Sample) and hands it to Done.
package breaker

import (
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/hostmap"
)

// State is the state of one circuit.
type State int

// The states of a circuit.
const (
	Closed   State = iota // every request goes through; outcomes are counted
	HalfOpen              // a few probes go through
	Open                  // every request is refused
)

// Sample is the class of a request's final outcome.
type Sample uint8

// The classes of a request's final outcome.
const (
	Success  Sample = iota
	Failure         // counts against the circuit
	Excluded        // says nothing about the server
)

// Config configures New. The zero value of every field means its default
// (the Default… constants); so does an invalid value.
type Config struct {
	FailureRatio   float64       // above 1: 1
	MinRequests    uint32        // samples in the window before it may open
	Window         time.Duration // rolling, in ten buckets
	OpenTimeout    time.Duration // open before half-open
	HalfOpenProbes uint32        // let through half-open; all must succeed
	MaxHosts       int           // circuits kept
}

// Defaults of Config.
const (
	DefaultFailureRatio = 0.5
	DefaultMinRequests  = 20
	DefaultWindow       = 60 * time.Second
	DefaultOpenTimeout  = 30 * time.Second
	DefaultProbes       = 3
	DefaultMaxHosts     = 1024
	WindowBuckets       = 10
)

// Clock gives the time. A nil Clock is the real one.
type Clock interface {
	Now() time.Time
}

// Set is the circuits of one Transport, one per destination. It is safe
// for concurrent use once made; SetClock and OnChange must be called
// before it is used.
//
// A circuit goes through phases: each change of state starts a new one,
// as gobreaker starts a new generation, and the outcome of a request
// allowed in an earlier phase is not counted. A phase is never reused, so
// the closed path needs no lock: it reads the circuit's current phase with
// one atomic load, and counts a success in the phase's window with one
// atomic add. Failures, probes and changes of state take the circuit's
// mutex.
type Set struct {
	ratio       float64
	minRequests uint32
	probes      uint32
	period      time.Duration // of one bucket of the window
	buckets     uint64        // in the window
	openTimeout time.Duration

	clock  Clock // nil: the real clock
	hosts  *hostmap.Map[*circuit]
	notify *notifier // nil without OnChange
}

// circuit is the breaker of one destination.
type circuit struct {
	key   hostmap.Key
	host  string // key as scheme://host:port
	s     *Set
	phase atomic.Pointer[phase] // the current one
	mu    sync.Mutex            // serialises changes of state and all but closed successes

	// parkedIn are the places (retry budgets) in which the Set's retries
	// to the destination have parked. When the circuit opens, their
	// retries fail at once.
	parkMu   sync.Mutex
	parkedIn []Parking // guarded by parkMu
}

// phase is one state of a circuit, from a change of state to the next.
type phase struct {
	state State
	start time.Time // the ages of samples count periods from it
	until time.Time // open: when it becomes half-open

	// Closed: the rolling window, bucket age%len(window) holding the
	// samples allowed at that age (one period), and the age of the last
	// request allowed, plus one (0: none).
	window    []atomic.Pointer[bucket]
	lastAllow atomic.Uint64

	// Half-open, guarded by the circuit's mu: probes let through, their
	// successes, and those of them that were no sample.
	probes, successes, excluded uint32
}

// bucket counts the samples of the requests allowed at one age.
type bucket struct {
	age                 uint64
	successes, failures atomic.Uint64
}

// Ticket is what Allow hands over to Done: the circuit that let a request
// through, its phase then, and the age of the request in that phase. The
// zero Ticket is no request's: Done ignores it.
type Ticket struct {
	c   *circuit
	p   *phase
	age uint64
}

// New returns circuits configured by cfg, on clock (nil: the real one).
func New(cfg Config, clock Clock) *Set {
	ratio := cfg.FailureRatio
	switch {
	case ratio <= 0 || math.IsNaN(ratio):
		ratio = DefaultFailureRatio
	case ratio > 1:
		ratio = 1
	}
	minRequests := cmpOr(cfg.MinRequests, DefaultMinRequests)
	window := cfg.Window
	if window <= 0 {
		window = DefaultWindow
	}
	openTimeout := cfg.OpenTimeout
	if openTimeout <= 0 {
		openTimeout = DefaultOpenTimeout
	}
	probes := cmpOr(cfg.HalfOpenProbes, DefaultProbes)
	maxHosts := cfg.MaxHosts
	if maxHosts <= 0 {
		maxHosts = DefaultMaxHosts
	}
	// As gobreaker: the window is a whole number of buckets of a tenth of
	// it, rounded up (one bucket, the whole window, if a tenth is zero).
	period, buckets := window/WindowBuckets, uint64(1)
	if period > 0 {
		buckets = uint64((window + period - 1) / period)
	} else {
		period = window
	}
	s := &Set{
		ratio: ratio, minRequests: minRequests, probes: probes,
		period: period, buckets: buckets, openTimeout: openTimeout,
		clock: clock,
	}
	s.hosts = hostmap.New(maxHosts, func(k hostmap.Key) *circuit {
		c := &circuit{key: k, host: k.String(), s: s}
		c.phase.Store(s.newPhase(Closed, s.now()))
		return c
	})
	return s
}

// cmpOr returns v, or def when v is zero.
func cmpOr(v, def uint32) uint32 {
	if v == 0 {
		return def
	}
	return v
}

// SetClock makes s read the time on clock (nil: the real one).
func (s *Set) SetClock(clock Clock) { s.clock = clock }

// OnChange makes s call fn on every change of state of a circuit, with the
// destination as scheme://host:port: one call at a time, in the order of
// the changes, by the goroutine of a request that saw a change (Allow or
// Done), after the circuit's lock is released.
func (s *Set) OnChange(fn func(host string, from, to State)) {
	s.notify = &notifier{fn: fn}
}

// now returns the time of s's clock.
func (s *Set) now() time.Time {
	if s.clock != nil {
		return s.clock.Now()
	}
	return time.Now()
}

// newPhase returns a phase in state that starts at now.
func (s *Set) newPhase(state State, now time.Time) *phase {
	p := &phase{state: state, start: now}
	switch state {
	case Closed:
		p.window = make([]atomic.Pointer[bucket], s.buckets)
	case Open:
		p.until = now.Add(s.openTimeout)
	}
	return p
}

// age returns the number of whole periods from the start of p to now.
func (s *Set) age(p *phase, now time.Time) uint64 {
	if d := now.Sub(p.start); d > 0 {
		return uint64(d / s.period)
	}
	return 0
}

// ageNow returns the age of p now. On the real clock it reads the
// monotonic clock alone, as time.Since does (p.start, read from the real
// clock, has a monotonic reading), not the wall clock as well.
func (s *Set) ageNow(p *phase) uint64 {
	if s.clock != nil {
		return s.age(p, s.clock.Now())
	}
	if d := time.Since(p.start); d > 0 {
		return uint64(d / s.period)
	}
	return 0
}

// Allow asks the circuit of req's destination whether req may be sent. If
// so, it returns the ticket to hand to Done with the request's final
// outcome; if not, false and the destination as scheme://host:port. A
// closed circuit answers without a lock.
func (s *Set) Allow(req *http.Request) (t Ticket, ok bool, host string) {
	c := s.hosts.GetOrCreate(hostmap.KeyOf(req))
	if p := c.phase.Load(); p.state == Closed {
		return Ticket{c, p, p.allowed(s.ageNow(p))}, true, ""
	}
	now := s.now()
	c.mu.Lock()
	p := c.current(now)
	t, ok = Ticket{c, p, 0}, true
	switch p.state {
	case Closed:
		t.age = p.allowed(s.age(p, now))
	case HalfOpen:
		if ok = p.probes-min(p.probes, p.excluded) < s.probes; ok {
			p.probes++
		}
	default:
		ok = false
	}
	c.mu.Unlock()
	s.notify.flush()
	if !ok {
		return Ticket{}, false, c.host
	}
	return t, true, ""
}

// allowed records that a request was let through at age in the closed
// phase p, and returns age.
func (p *phase) allowed(age uint64) uint64 {
	for {
		last := p.lastAllow.Load()
		if last > age || p.lastAllow.CompareAndSwap(last, age+1) {
			return age
		}
	}
}

// Done gives the circuit of t the final outcome of the request it let
// through, classified as sample. A success in a closed circuit is counted
// without a lock or a look at the clock.
func (s *Set) Done(t Ticket, sample Sample) {
	c := t.c
	if c == nil {
		return
	}
	if sample != Failure && t.p.state == Closed && c.phase.Load() == t.p {
		if sample == Success {
			s.count(t.p, t.age, false) // in the phase that let it through
		}
		return // an excluded outcome changes nothing in a closed circuit
	}
	now := s.now()
	c.mu.Lock()
	if p := c.current(now); p == t.p {
		switch {
		case sample == Excluded:
			p.excluded++ // counts only half-open
		case p.state == Closed && sample == Success:
			s.count(p, t.age, false)
		case p.state == Closed:
			s.count(p, t.age, true)
			if s.trips(p, s.age(p, now)) {
				c.become(Open, now)
			}
		case sample == Success: // half-open
			if p.successes++; p.successes >= s.probes {
				c.become(Closed, now)
			}
		default: // a failed probe
			c.become(Open, now)
		}
	}
	open := c.phase.Load().state == Open
	c.mu.Unlock()
	s.notify.flush()
	if sample == Failure && open {
		s.failParked(c)
	}
}

// IsOpen reports whether the circuit of req's destination is open. A nil
// s has no circuits.
func (s *Set) IsOpen(req *http.Request) bool {
	if s == nil {
		return false
	}
	c, ok := s.hosts.Get(hostmap.KeyOf(req))
	return ok && c.state(s.now()) == Open
}
