package retryhttp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
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
// host, built on github.com/sony/gobreaker/v2, configured by settings (see
// CircuitBreakerSettings for its defaults). There is none by default.
//
// While a destination's circuit is open, RoundTrip fails at once with an
// error wrapping ErrCircuitOpen, without sending anything; the request's
// body is closed.
func WithCircuitBreaker(settings CircuitBreakerSettings) Option {
	return func(t *Transport) {
		t.breakers = newBreakers(settings)
		if t.obs != nil {
			t.breakers.observe(t.obs.onCircuit)
		}
	}
}

// breakers are the circuits of one Transport, one per destination.
type breakers struct {
	gb     gobreaker.Settings // template: Name is set per destination
	hosts  *hostMap[*circuit]
	notify *notifier // nil without OnStateChange or hooks

	onStateChange func(host string, from, to CircuitState)   // the settings'
	hooks         []func(host string, from, to CircuitState) // WithOnCircuitStateChange
}

// circuit is the breaker of one destination.
type circuit struct {
	host string
	cb   *gobreaker.TwoStepCircuitBreaker[struct{}]

	// parkedIn are the budgets in which the Transport's retries to the
	// destination have parked: the transport's, a destination's own
	// (park.go). When the circuit opens, their retries fail at once.
	parkMu   sync.Mutex
	parkedIn []*RetryBudget // guarded by parkMu
}

// idle reports whether the circuit is closed with no samples, so that
// forgetting it loses nothing.
func (c *circuit) idle() bool {
	return c.cb.State() == gobreaker.StateClosed && c.cb.Counts().Requests == 0
}

// busy reports false: a circuit may always be forgotten.
func (c *circuit) busy() bool { return false }

// The outcomes handed to gobreaker's done.
var (
	errSampleFailed   = errors.New("failed")
	errSampleExcluded = errors.New("excluded")
)

func newBreakers(s CircuitBreakerSettings) *breakers {
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

	b := &breakers{gb: gobreaker.Settings{
		MaxRequests:  probes,
		Interval:     window,
		BucketPeriod: window / breakerWindowBuckets,
		Timeout:      openTimeout,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			n := c.TotalSuccesses + c.TotalFailures
			return n >= minRequests && float64(c.TotalFailures) >= ratio*float64(n)
		},
		IsSuccessful: func(err error) bool { return err == nil },
		IsExcluded:   func(err error) bool { return err == errSampleExcluded },
	}}
	if s.OnStateChange != nil {
		b.onStateChange = s.OnStateChange
		b.notifyChanges()
	}
	b.hosts = newHostMap(maxHosts, func(k hostKey) *circuit {
		st := b.gb
		st.Name = k.String()
		return &circuit{host: st.Name, cb: gobreaker.NewTwoStepCircuitBreaker[struct{}](st)}
	})
	return b
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
	if b.notify != nil {
		return
	}
	b.notify = &notifier{fn: b.stateChanged}
	b.gb.OnStateChange = func(host string, from, to gobreaker.State) {
		b.notify.push(stateChange{host, circuitState(from), circuitState(to)})
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
// so, it returns the function to call with the request's final outcome;
// if not, an error wrapping ErrCircuitOpen.
func (b *breakers) allow(req *http.Request) (func(*http.Response, error), error) {
	c := b.hosts.getOrCreate(keyOf(req))
	done, err := c.cb.Allow()
	b.notify.flush()
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrCircuitOpen, c.host)
	}
	ctx := req.Context()
	return func(res *http.Response, err error) {
		s := sample(ctx, res, err)
		done(s)
		b.notify.flush()
		if s == errSampleFailed && c.cb.State() == gobreaker.StateOpen {
			b.failParked(c, keyOf(req))
		}
	}, nil
}

// isOpen reports whether the circuit of req's destination is open. A nil
// b has no circuits.
func (b *breakers) isOpen(req *http.Request) bool {
	if b == nil {
		return false
	}
	c, ok := b.hosts.get(keyOf(req))
	return ok && c.cb.State() == gobreaker.StateOpen
}

// sample classifies the final outcome of a request for the breaker: nil
// for a success, errSampleFailed, or errSampleExcluded when the outcome
// says nothing about the server.
func sample(ctx context.Context, res *http.Response, err error) error {
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

func circuitState(s gobreaker.State) CircuitState {
	switch s {
	case gobreaker.StateHalfOpen:
		return CircuitHalfOpen
	case gobreaker.StateOpen:
		return CircuitOpen
	}
	return CircuitClosed
}

type stateChange struct {
	host     string
	from, to CircuitState
}

// notifier delivers state changes to the OnStateChange callback outside
// gobreaker's lock (which holds it while changing state), one at a time
// and in order: changes are queued under the breaker's lock, and delivered
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
