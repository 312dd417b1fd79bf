package retryhttp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/hostmap"
)

// CircuitState is the state of the circuit breaker of one destination host.
type CircuitState int

// The states of a circuit breaker.
const (
	// CircuitClosed lets every request through and counts their outcomes.
	CircuitClosed CircuitState = iota
	// CircuitHalfOpen lets a few probe requests through; if they all
	// succeed the circuit closes, and if one fails it opens again.
	CircuitHalfOpen
	// CircuitOpen fails every request at once with ErrCircuitOpen.
	CircuitOpen
)

// String returns "closed", "half-open" or "open".
func (s CircuitState) String() string {
	switch s {
	case CircuitClosed:
		return "closed"
	case CircuitHalfOpen:
		return "half-open"
	case CircuitOpen:
		return "open"
	}
	return fmt.Sprintf("CircuitState(%d)", int(s))
}

// CircuitBreakerSettings configures WithCircuitBreaker. The zero value of
// every field means its default:
//
//	FailureRatio    0.5   opens when half the samples in the window failed…
//	MinRequests     20    …and the window holds at least 20 samples
//	Window          60s   rolling window of the samples, in 10 buckets
//	OpenTimeout     30s   time open before probing (half-open)
//	HalfOpenProbes  3     probes let through half-open; all must succeed
//	OnStateChange   nil   no callback
//	MaxHosts        1024  destinations tracked (as RetryBudgetOptions.MaxHosts)
//
// One sample is one logical request: its final outcome after all its
// retries. A sample fails when that outcome is an error, or a response with
// status 429 or 500 and above; any other response is a success. A request
// whose caller cancelled its context is not a sample, nor is one that
// failed reading or rewinding the caller's body (ErrBufferingBody,
// ErrSeekingBody): neither says anything about the server. A caller's
// deadline that passed is a failure: the server was too slow.
type CircuitBreakerSettings struct {
	// FailureRatio is the share of failed samples in the window at which
	// the circuit opens. Zero, negative and NaN mean 0.5; values above 1
	// are treated as 1 (the circuit opens only when every sample failed).
	FailureRatio float64

	// MinRequests is the number of samples the window must hold before
	// the circuit may open. Zero means 20.
	MinRequests uint32

	// Window is the period over which samples are counted: a rolling
	// window in ten buckets, so samples older than Window are forgotten a
	// tenth at a time. Zero or negative means 60s.
	Window time.Duration

	// OpenTimeout is how long the circuit stays open before it lets probes
	// through. Zero or negative means 30s.
	OpenTimeout time.Duration

	// HalfOpenProbes is the number of requests let through while half-open;
	// the circuit closes once that many succeed in a row, and opens again
	// at the first failure. Further requests fail with ErrCircuitOpen while
	// the probes are in flight. Zero means 3.
	HalfOpenProbes uint32

	// OnStateChange, if not nil, is called on every change of state of a
	// destination's circuit, with the destination as scheme://host:port.
	// Calls are made one at a time, in the order of the changes, by the
	// goroutine of a request that saw a change, after the breaker's lock is
	// released: the callback may send requests through the same Transport.
	OnStateChange func(host string, from, to CircuitState)

	// MaxHosts bounds the number of destinations whose circuits are kept (to
	// within one per shard of the map, at most 31 more); past it, a new
	// destination evicts another (a closed one with no
	// samples if one is found quickly), which starts again closed. Zero or
	// negative means 1024.
	MaxHosts int
}

// Defaults of CircuitBreakerSettings.
const (
	defaultBreakerFailureRatio = 0.5
	defaultBreakerMinRequests  = 20
	defaultBreakerWindow       = 60 * time.Second
	defaultBreakerOpenTimeout  = 30 * time.Second
	defaultBreakerProbes       = 3
	breakerWindowBuckets       = 10
)

// WithCircuitBreaker gives the transport a circuit breaker per destination
// host, configured by settings (see CircuitBreakerSettings for its
// defaults). There is none by default. Its states and rules are those of
// github.com/sony/gobreaker/v2's two-step breaker; a closed circuit lets a
// request through and counts its success without taking a lock, and time is
// read from the transport's Clock (WithClock).
//
// While a destination's circuit is open, RoundTrip fails at once with an
// error wrapping ErrCircuitOpen, without sending anything; the request's
// body is closed.
func WithCircuitBreaker(settings CircuitBreakerSettings) Option {
	return func(t *Transport) {
		t.breakers = newBreakers(settings, t)
		if t.obs != nil {
			t.breakers.observe(t.obs.onCircuit)
		}
	}
}

// breakers are the circuits of one Transport, one per destination.
//
// A circuit goes through phases: each change of state starts a new one,
// as gobreaker starts a new generation, and the outcome of a request
// allowed in an earlier phase is not counted. A phase is never reused, so
// the closed path needs no lock: it reads the circuit's current phase with
// one atomic load, and counts a success in the phase's window with one
// atomic add. Failures, probes and changes of state take the circuit's
// mutex.
type breakers struct {
	ratio       float64       // FailureRatio, resolved
	minRequests uint32        // MinRequests, resolved
	probes      uint32        // HalfOpenProbes, resolved
	period      time.Duration // of one bucket of the window
	buckets     uint64        // in the window
	openTimeout time.Duration

	clock  *Transport // whose clock (WithClock) gives the time: see now
	hosts  *hostmap.Map[*circuit]
	notify *notifier // nil without OnStateChange or hooks

	onStateChange func(host string, from, to CircuitState)   // the settings'
	hooks         []func(host string, from, to CircuitState) // WithOnCircuitStateChange
}

// circuit is the breaker of one destination.
type circuit struct {
	host  string
	b     *breakers
	phase atomic.Pointer[phase] // the current one
	mu    sync.Mutex            // serialises changes of state and all but closed successes

	// parkedIn are the budgets in which the Transport's retries to the
	// destination have parked: the transport's, a destination's own
	// (park.go). When the circuit opens, their retries fail at once.
	parkMu   sync.Mutex
	parkedIn []*RetryBudget // guarded by parkMu
}

// phase is one state of a circuit, from a change of state to the next.
type phase struct {
	state CircuitState
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

// ticket is what allow hands over to done: the circuit that let a request
// through, its phase then, and the age of the request in that phase.
type ticket struct {
	c   *circuit
	p   *phase
	age uint64
}

// The classes of a request's final outcome, for the breaker (sample).
var (
	errSampleFailed   = errors.New("failed")
	errSampleExcluded = errors.New("excluded")
)

func newBreakers(s CircuitBreakerSettings, clock *Transport) *breakers {
	ratio := s.FailureRatio
	switch {
	case ratio <= 0 || math.IsNaN(ratio):
		ratio = defaultBreakerFailureRatio
	case ratio > 1:
		ratio = 1
	}
	minRequests := s.MinRequests
	if minRequests == 0 {
		minRequests = defaultBreakerMinRequests
	}
	window := s.Window
	if window <= 0 {
		window = defaultBreakerWindow
	}
	openTimeout := s.OpenTimeout
	if openTimeout <= 0 {
		openTimeout = defaultBreakerOpenTimeout
	}
	probes := s.HalfOpenProbes
	if probes == 0 {
		probes = defaultBreakerProbes
	}
	maxHosts := s.MaxHosts
	if maxHosts <= 0 {
		maxHosts = DefaultRetryBudgetMaxHosts
	}
	// As gobreaker: the window is a whole number of buckets of a tenth of
	// it, rounded up (one bucket, the whole window, if a tenth is zero).
	period, buckets := window/breakerWindowBuckets, uint64(1)
	if period > 0 {
		buckets = uint64((window + period - 1) / period)
	} else {
		period = window
	}

	b := &breakers{
		ratio: ratio, minRequests: minRequests, probes: probes,
		period: period, buckets: buckets, openTimeout: openTimeout,
		clock: clock,
	}
	if s.OnStateChange != nil {
		b.onStateChange = s.OnStateChange
		b.notifyChanges()
	}
	b.hosts = hostmap.New(maxHosts, func(k hostmap.Key) *circuit {
		c := &circuit{host: k.String(), b: b}
		c.phase.Store(b.newPhase(CircuitClosed, b.now()))
		return c
	})
	return b
}

// now returns the time of the Transport's Clock, read when called, so that
// the order of WithClock and WithCircuitBreaker does not matter.
func (b *breakers) now() time.Time {
	return b.clock.clock().Now()
}

// newPhase returns a phase in state that starts at now.
func (b *breakers) newPhase(state CircuitState, now time.Time) *phase {
	p := &phase{state: state, start: now}
	switch state {
	case CircuitClosed:
		p.window = make([]atomic.Pointer[bucket], b.buckets)
	case CircuitOpen:
		p.until = now.Add(b.openTimeout)
	}
	return p
}

// age returns the number of whole periods from the start of p to now.
func (b *breakers) age(p *phase, now time.Time) uint64 {
	if d := now.Sub(p.start); d > 0 {
		return uint64(d / b.period)
	}
	return 0
}

// ageNow returns the age of p now: the number of whole periods from its
// start to the time of the Transport's Clock. On the real clock it reads
// the monotonic clock alone, as time.Since does (p.start, read from the
// real clock, has a monotonic reading), not the wall clock as well.
func (b *breakers) ageNow(p *phase) uint64 {
	if b.clock.clk != nil {
		return b.age(p, b.now())
	}
	if d := time.Since(p.start); d > 0 {
		return uint64(d / b.period)
	}
	return 0
}

// observe makes b call hooks, too, on every change of state. It must be
// called before b is used. A nil b has no state to report.
func (b *breakers) observe(hooks []func(host string, from, to CircuitState)) {
	if b == nil || len(hooks) == 0 {
		return
	}
	b.hooks = hooks
	b.notifyChanges()
}

// notifyChanges routes the state changes of b's circuits to its callbacks.
func (b *breakers) notifyChanges() {
	if b.notify == nil {
		b.notify = &notifier{fn: b.stateChanged}
	}
}

// stateChanged calls the settings' OnStateChange, then the hooks.
func (b *breakers) stateChanged(host string, from, to CircuitState) {
	if b.onStateChange != nil {
		b.onStateChange(host, from, to)
	}
	for _, fn := range b.hooks {
		fn(host, from, to)
	}
}

// allow asks the circuit of req's destination whether req may be sent. If
// so, it returns the ticket to hand to done with the request's final
// outcome; if not, an error wrapping ErrCircuitOpen. A closed circuit
// answers without a lock.
func (b *breakers) allow(req *http.Request) (ticket, error) {
	c := b.hosts.GetOrCreate(hostmap.KeyOf(req))
	if p := c.phase.Load(); p.state == CircuitClosed {
		return ticket{c, p, p.allowed(b.ageNow(p))}, nil
	}
	now := b.now()
	c.mu.Lock()
	p := c.current(now)
	t, ok := ticket{c, p, 0}, true
	switch p.state {
	case CircuitClosed:
		t.age = p.allowed(b.age(p, now))
	case CircuitHalfOpen:
		if ok = p.probes-min(p.probes, p.excluded) < b.probes; ok {
			p.probes++
		}
	default:
		ok = false
	}
	c.mu.Unlock()
	b.notify.flush()
	if !ok {
		return ticket{}, fmt.Errorf("%w: %s", ErrCircuitOpen, c.host)
	}
	return t, nil
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

// done gives the circuit of t the final outcome of the request it let
// through. A success in a closed circuit is counted without a lock or a
// look at the clock.
func (b *breakers) done(t ticket, req *http.Request, res *http.Response, err error) {
	if t.c == nil {
		return
	}
	ctx := req.Context()
	c := t.c
	if err == nil && t.p.state == CircuitClosed && !failedStatus(res.StatusCode) && ctx.Err() == nil &&
		c.phase.Load() == t.p {
		b.count(t.p, t.age, false) // a success (sample's nil), in the phase that let it through
		return
	}
	s := sample(ctx, res, err)
	if s != errSampleFailed && t.p.state == CircuitClosed && c.phase.Load() == t.p {
		if s == nil {
			b.count(t.p, t.age, false)
		}
		return // an excluded outcome changes nothing in a closed circuit
	}
	now := b.now()
	c.mu.Lock()
	if p := c.current(now); p == t.p {
		switch {
		case s == errSampleExcluded:
			p.excluded++ // counts only half-open
		case p.state == CircuitClosed && s == nil:
			b.count(p, t.age, false)
		case p.state == CircuitClosed:
			b.count(p, t.age, true)
			if b.trips(p, b.age(p, now)) {
				c.become(CircuitOpen, now)
			}
		case s == nil: // half-open
			if p.successes++; p.successes >= b.probes {
				c.become(CircuitClosed, now)
			}
		default: // a failed probe
			c.become(CircuitOpen, now)
		}
	}
	open := c.phase.Load().state == CircuitOpen
	c.mu.Unlock()
	b.notify.flush()
	if s == errSampleFailed && open {
		b.failParked(c, hostmap.KeyOf(req))
	}
}

// count adds a sample of age to the window of the closed phase p, unless
// the window has moved past that age: its bucket then holds a later age.
// It takes no lock.
func (b *breakers) count(p *phase, age uint64, failed bool) {
	slot := &p.window[age%b.buckets]
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
func (b *breakers) trips(p *phase, now uint64) bool {
	var successes, failures uint64
	for i := range p.window {
		if k := p.window[i].Load(); k != nil && k.age <= now && now-k.age < b.buckets {
			successes += k.successes.Load()
			failures += k.failures.Load()
		}
	}
	n := successes + failures
	return n >= uint64(b.minRequests) && float64(failures) >= b.ratio*float64(n)
}

// current returns c's phase at now, first opening the half-open phase if
// the open one has lasted its time. c.mu must be held.
func (c *circuit) current(now time.Time) *phase {
	p := c.phase.Load()
	if p.state == CircuitOpen && p.until.Before(now) {
		p = c.become(CircuitHalfOpen, now)
	}
	return p
}

// become starts a phase in state to, and queues the change for the
// callbacks. c.mu must be held.
func (c *circuit) become(to CircuitState, now time.Time) *phase {
	from := c.phase.Load().state
	p := c.b.newPhase(to, now)
	c.phase.Store(p)
	if c.b.notify != nil {
		c.b.notify.push(stateChange{c.host, from, to})
	}
	return p
}

// state returns c's state at now. Only an open circuit whose time is up
// takes the lock, to become half-open; the change is delivered to the
// callbacks by the next request's allow or done, not here: park calls this
// under parkMu.
func (c *circuit) state(now time.Time) CircuitState {
	p := c.phase.Load()
	if p.state != CircuitOpen || !p.until.Before(now) {
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
	if p.state != CircuitClosed {
		return false
	}
	last := p.lastAllow.Load()
	return last == 0 || c.b.age(p, c.b.now())-(last-1) >= c.b.buckets
}

// Busy reports false: a circuit may always be forgotten.
func (c *circuit) Busy() bool { return false }

// isOpen reports whether the circuit of req's destination is open. A nil
// b has no circuits.
func (b *breakers) isOpen(req *http.Request) bool {
	if b == nil {
		return false
	}
	c, ok := b.hosts.Get(hostmap.KeyOf(req))
	return ok && c.state(b.now()) == CircuitOpen
}

// sample classifies the final outcome of a request for the breaker: nil
// for a success, errSampleFailed, or errSampleExcluded when the outcome
// says nothing about the server.
func sample(ctx context.Context, res *http.Response, err error) error {
	if err != nil || ctx.Err() != nil {
		return sampleUnhappy(ctx, res, err)
	}
	if failedStatus(res.StatusCode) { // failure.go
		return errSampleFailed
	}
	return nil
}

// sampleUnhappy is sample for an error, or a context that is done.
func sampleUnhappy(ctx context.Context, res *http.Response, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		return errSampleExcluded // the caller gave up
	case errors.Is(err, ErrBufferingBody), errors.Is(err, ErrSeekingBody):
		return errSampleExcluded // the caller's body failed
	case err != nil:
		return errSampleFailed
	case failedStatus(res.StatusCode): // failure.go
		return errSampleFailed
	}
	return nil
}

type stateChange struct {
	host     string
	from, to CircuitState
}

// notifier delivers state changes to the OnStateChange callback outside
// the circuit's lock (held while changing state), one at a time
// and in order: changes are queued under the circuit's lock, and delivered
// after it by whichever goroutine finds no delivery under way. A callback
// that sends a request whose breaker changes state only queues the change;
// the delivering goroutine delivers it when the callback returns.
type notifier struct {
	fn func(host string, from, to CircuitState)

	mu         sync.Mutex
	queue      []stateChange
	delivering bool
}

func (n *notifier) push(c stateChange) {
	n.mu.Lock()
	n.queue = append(n.queue, c)
	n.mu.Unlock()
}

// flush delivers the queued changes, unless another goroutine is already
// doing so. A nil notifier has nothing to deliver.
func (n *notifier) flush() {
	if n == nil {
		return
	}
	n.mu.Lock()
	if n.delivering {
		n.mu.Unlock()
		return
	}
	n.delivering = true
	for len(n.queue) > 0 {
		c := n.queue[0]
		n.queue = n.queue[1:]
		n.mu.Unlock()
		n.deliver(c)
		n.mu.Lock()
	}
	n.delivering = false
	n.mu.Unlock()
}

// deliver calls the callback; if it panics, the next flush delivers again.
func (n *notifier) deliver(c stateChange) {
	returned := false
	defer func() {
		if !returned {
			n.mu.Lock()
			n.delivering = false
			n.mu.Unlock()
		}
	}()
	n.fn(c.host, c.from, c.to)
	returned = true
}
