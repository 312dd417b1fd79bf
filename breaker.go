package retryhttp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/breaker"
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
	// the circuit may open. Zero or negative means 20.
	MinRequests int

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
	// the probes are in flight. Zero or negative means 3.
	HalfOpenProbes int

	// MaxHosts bounds the number of destinations whose circuits are kept (to
	// within one per shard of the map); past it, a new
	// destination evicts another (a closed one with no
	// samples if one is found quickly), which starts again closed. Zero or
	// negative means 1024.
	MaxHosts int
}

// WithCircuitBreaker gives the transport a circuit breaker per destination
// host, configured by settings (see CircuitBreakerSettings for its
// defaults). There is none by default. A circuit is closed, open or
// half-open, as CircuitBreakerSettings describes (the rules of a two-step
// breaker, as github.com/sony/gobreaker/v2's), and time is read from the
// transport's Clock (WithClock), whatever the order of the options.
//
// While a destination's circuit is open, RoundTrip fails at once with an
// error wrapping ErrCircuitOpen, without sending anything; the request's
// body is closed. A retry parked on the destination's retry budget when
// its circuit opens ends at once too (StopCircuitOpen), with the last
// response as it is or the last error joined with ErrCircuitOpen.
func WithCircuitBreaker(settings CircuitBreakerSettings) Option {
	return func(t *Transport) {
		t.breakers = newBreakers(settings, t.clk)
		if t.obs != nil {
			t.breakers.observe(t.obs.onCircuit)
		}
	}
}

// breakers are the circuits of one Transport (internal/breaker) and the
// hooks of their changes of state.
type breakers struct {
	set   *breaker.Set
	hooks []func(host string, from, to CircuitState) // Hooks.OnCircuitStateChange
}

// ticket is what allow hands over to done.
type ticket = breaker.Ticket

// newBreakers returns the circuits configured by s, on clock (nil: the
// real one).
func newBreakers(s CircuitBreakerSettings, clock Clock) *breakers {
	return &breakers{set: breaker.New(breaker.Config{
		FailureRatio:   s.FailureRatio,
		MinRequests:    positiveUint32(s.MinRequests),
		Window:         s.Window,
		OpenTimeout:    s.OpenTimeout,
		HalfOpenProbes: positiveUint32(s.HalfOpenProbes),
		MaxHosts:       s.MaxHosts,
	}, clock)}
}

// setClock makes b read the time on c (nil: the real clock). A nil b has
// no circuits.
func (b *breakers) setClock(c Clock) {
	if b != nil {
		b.set.SetClock(c)
	}
}

// observe makes b call hooks on every change of state. It must be
// called before b is used. A nil b has no state to report.
func (b *breakers) observe(hooks []func(host string, from, to CircuitState)) {
	if b == nil || len(hooks) == 0 {
		return
	}
	b.hooks = hooks
	b.set.OnChange(b.stateChanged)
}

// stateChanged calls the hooks, in order.
func (b *breakers) stateChanged(host string, from, to breaker.State) {
	for _, fn := range b.hooks {
		fn(host, CircuitState(from), CircuitState(to))
	}
}

// allow asks the circuit of req's destination whether req may be sent. If
// so, it returns the ticket to hand to done with the request's final
// outcome; if not, an error wrapping ErrCircuitOpen.
func (b *breakers) allow(req *http.Request) (ticket, error) {
	t, ok, host := b.set.Allow(req)
	if !ok {
		return t, fmt.Errorf("%w: %s", ErrCircuitOpen, host)
	}
	return t, nil
}

// done gives the circuit of t the final outcome of the request it let
// through.
func (b *breakers) done(t ticket, req *http.Request, res *http.Response, err error) {
	b.set.Done(t, sample(req.Context(), res, err))
}

// isOpen reports whether the circuit of req's destination is open. A nil
// b has no circuits.
func (b *breakers) isOpen(req *http.Request) bool {
	return b != nil && b.set.IsOpen(req)
}

// sample classifies the final outcome of a request for the breaker: a
// success, a failure, or excluded when the outcome says nothing about the
// server.
func sample(ctx context.Context, res *http.Response, err error) breaker.Sample {
	if err != nil || ctx.Err() != nil {
		return sampleUnhappy(ctx, res, err)
	}
	if failedStatus(res.StatusCode) { // failure.go
		return breaker.Failure
	}
	return breaker.Success
}

// sampleUnhappy is sample for an error, or a context that is done.
func sampleUnhappy(ctx context.Context, res *http.Response, err error) breaker.Sample {
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		return breaker.Excluded // the caller gave up
	case errors.Is(err, ErrBufferingBody), errors.Is(err, ErrSeekingBody):
		return breaker.Excluded // the caller's body failed
	case err != nil:
		return breaker.Failure
	case failedStatus(res.StatusCode): // failure.go
		return breaker.Failure
	}
	return breaker.Success
}

// positiveUint32 returns n as internal/breaker counts, 0 (its default) when
// n is zero or negative, and at most math.MaxUint32.
func positiveUint32(n int) uint32 {
	switch {
	case n <= 0:
		return 0
	case uint64(n) > math.MaxUint32:
		return math.MaxUint32
	}
	return uint32(n)
}
