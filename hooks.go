package retryhttp

import (
	"log/slog"
	"net/http"
	"time"
)

// AttemptInfo describes one attempt just made, for a Hooks.OnAttempt
// hook.
type AttemptInfo struct {
	// Attempt is the attempt: its number (Count, 1 for the first), the
	// request as sent, and its response or error. The response's body must
	// not be read or closed.
	Attempt Attempt

	// MaxRetries is the retry limit of the request: it is sent at most
	// MaxRetries+1 times.
	MaxRetries int

	// Hedged reports whether the attempt belongs to a hedged request
	// (WithHedging): attempts may then overlap, and one cancelled because
	// another won is reported too, with the cancellation as its error.
	Hedged bool
}

// Decision is what the transport decided after an attempt, for a
// Hooks.OnRetryDecision hook: to retry (Retry is true), after Delay, or to
// stop, for Reason. Each request gets zero or more retry decisions, then
// exactly one stop.
type Decision struct {
	// Attempt is, for a retry, the attempt that is retried; for a hedge, it
	// has no outcome: Count is the number of attempts already in flight,
	// and Req the request as the caller passed it to RoundTrip.
	//
	// For a stop, it holds what RoundTrip returns: Res is the response
	// returned, Err the error returned (joined with ErrRetriesExhausted,
	// say), Count the number of attempts sent, and Req the request as the
	// caller passed it to RoundTrip. Count is 0 when none was sent: the
	// circuit was open, no idempotency key could be made, or the caller
	// gave up while the request was held in its host's pause
	// (WithHoldDuringPause). Attempt 1 counts as sent even when the
	// caller's body fails while it reads it (Count 1). The response's body
	// must not be read or closed: it is the caller's.
	Attempt Attempt

	// MaxRetries is the retry limit of the request: it is sent at most
	// MaxRetries+1 times.
	MaxRetries int

	// Retry is true for a decision to send another attempt, false for the
	// stop.
	Retry bool

	// Hedge is true for a retry that WithHedging sends because the
	// attempts in flight were slow, not because one failed; they go on.
	Hedge bool

	// Delay is the wait before the retry: the DelayFn's choice, the hedge
	// delay for a hedge, zero for an attempt a hedged request replaces at
	// once. Zero for a stop.
	Delay time.Duration

	// Reason says why the transport stopped; zero for a retry.
	Reason StopReason
}

// Cause says in one word, from a small fixed set, why a retry was decided:
// "hedge" (sent because the attempts in flight were slow), "status" (a
// response the ShouldRetryFn retries: see Attempt.Res.StatusCode),
// "timeout" (IsTimeoutErr), "dns" (IsDNSErr), "connection" (a refused,
// reset or lost connection) or "error" (any other error). It is "" for a
// stop. Metrics and logs use it as a low-cardinality label.
func (d Decision) Cause() string {
	a := d.Attempt
	switch {
	case !d.Retry:
		return ""
	case d.Hedge:
		return "hedge"
	case a.Err == nil:
		return "status"
	case IsTimeoutErr(a.Err):
		return "timeout"
	case IsDNSErr(a.Err):
		return "dns"
	case isDialErr(a.Err) || isConnLost(a.Err):
		return "connection"
	}
	return "error"
}

// Hooks are functions the transport calls as a request goes, for metrics,
// traces or tests (like net/http/httptrace's ClientTrace). Every field is
// optional: a nil one is not called. Install them with WithHooks.
//
// Hooks run synchronously on the goroutine of the request (for a hedged
// request, that of RoundTrip, or, once the hedge delay passed during
// attempt 1, the goroutine that coordinates the attempts while RoundTrip
// waits; for attempts cancelled after another won, the goroutine that
// collects them, possibly after RoundTrip has returned), so a slow hook
// slows the request: a hook may block, but should not for long. Hooks must
// be safe for concurrent use, since requests run in parallel, and must not
// read or close response bodies nor modify requests. OnCircuitStateChange
// differs: see its doc.
type Hooks struct {
	// OnAttempt is called after every attempt, hedged attempts included,
	// with the attempt and its outcome.
	OnAttempt func(AttemptInfo)

	// OnRetryDecision is called at every decision of the transport: each
	// time it decides to retry, with the delay chosen, and once when it
	// stops, with the reason, including when the circuit breaker refuses
	// the request before any attempt. The stop is the request's last
	// decision.
	OnRetryDecision func(Decision)

	// OnPark is called when a request starts or stops waiting in its
	// host's queue: a retry parked in an outage, a retry in the pause lane
	// after a response that asked for a pause, or a first attempt held
	// while its host's pause runs (WithHoldDuringPause). It is told when
	// the wait begins, ends with a release, or is dropped (see ParkEvent;
	// a held first attempt dropped at its bound is sent all the same).
	OnPark func(ParkEvent)

	// OnQuotaHold is called each time a request is held because the quota
	// its server advertised is spent (WithQuotaPacing), before it waits;
	// it asks again after the wait, and may be held again. A hold is the
	// quota's pace, not an outage: it is never reported to OnPark.
	OnQuotaHold func(QuotaHold)

	// OnCircuitStateChange is called on every change of state of a
	// destination's circuit breaker (WithCircuitBreaker), with the
	// destination as scheme://host:port. Calls are made one at a time, in
	// the order of the changes, by the goroutine of a request that saw a
	// change, after the breaker's lock is released: the hook may send
	// requests through the same Transport. Without a circuit breaker it is
	// never called. The order of WithHooks and WithCircuitBreaker does not
	// matter.
	OnCircuitStateChange func(host string, from, to CircuitState)
}

// WithHooks adds the non-nil functions of h to the hooks of the transport.
// Each WithHooks adds to those installed before, rather than replacing
// them, so that an integration (otelretryhttp) and the caller's own hooks
// both run: hooks of one kind are called in the order of the options that
// installed them. Without hooks (no WithHooks, or only nil functions),
// nothing is called and nothing is allocated.
func WithHooks(h Hooks) Option {
	return func(t *Transport) {
		if h.OnAttempt == nil && h.OnRetryDecision == nil && h.OnPark == nil && h.OnQuotaHold == nil && h.OnCircuitStateChange == nil {
			return // no observer: the request path stays as without hooks
		}
		o := t.observer()
		if h.OnAttempt != nil {
			o.onAttempt = append(o.onAttempt, h.OnAttempt)
		}
		if h.OnRetryDecision != nil {
			o.onDecision = append(o.onDecision, h.OnRetryDecision)
		}
		if h.OnPark != nil {
			o.onPark = append(o.onPark, h.OnPark)
		}
		if h.OnQuotaHold != nil {
			o.onQuota = append(o.onQuota, h.OnQuotaHold)
		}
		if h.OnCircuitStateChange != nil {
			o.onCircuit = append(o.onCircuit, h.OnCircuitStateChange)
			t.breakers.observe(o.onCircuit)
		}
	}
}

// observer holds a Transport's hooks and logger. A Transport without any
// has none, so that the request path checks one pointer.
type observer struct {
	onAttempt  []func(AttemptInfo)
	onDecision []func(Decision)
	onCircuit  []func(host string, from, to CircuitState)
	onPark     []func(ParkEvent)
	onQuota    []func(QuotaHold)
	logger     *slog.Logger
}

// observer returns t's observer, making it if needed.
func (t *Transport) observer() *observer {
	if t.obs == nil {
		t.obs = &observer{}
	}
	return t.obs
}

// The observer's reports. Each is a method with a nil receiver allowed: a
// Transport without hooks or logger has a nil observer, and a report to it
// does nothing and allocates nothing.

// reportAttempt reports an attempt to the hooks.
func (o *observer) reportAttempt(a *Attempt, maxRetries int, hedged bool) {
	if o == nil {
		return
	}
	for _, fn := range o.onAttempt {
		fn(AttemptInfo{Attempt: *a, MaxRetries: maxRetries, Hedged: hedged})
	}
}

// reportRetry reports a decision to retry a, after delay, to the hooks and
// the logger.
func (o *observer) reportRetry(a Attempt, maxRetries int, delay time.Duration, hedge bool) {
	if o == nil {
		return
	}
	o.report(Decision{Attempt: a, MaxRetries: maxRetries, Retry: true, Hedge: hedge, Delay: delay})
}

// reportStop reports how a request sent as req ended, once RoundTrip has
// its outcome; maxRetries is the request's.
func (o *observer) reportStop(req *http.Request, e ending, res *http.Response, err error, maxRetries int) {
	if o == nil {
		return
	}
	o.report(Decision{
		Attempt:    Attempt{Count: e.attempts, Req: req, Res: res, Err: err},
		MaxRetries: maxRetries,
		Reason:     e.why,
	})
}

// report hands a decision to the hooks and the logger.
func (o *observer) report(d Decision) {
	for _, fn := range o.onDecision {
		fn(d)
	}
	if o.logger != nil { // log.go
		o.log(d)
	}
}
