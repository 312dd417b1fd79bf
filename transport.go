package retryhttp

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/budget"
	"github.com/seed2409de8f/retryhttp/internal/quota"
)

// Attempt describes one attempt at sending a request, as seen by a
// ShouldRetryFn or a DelayFn after the attempt.
//
// Its first four fields are those of github.com/justinrixx/retryhttp's
// Attempt. The three booleans after them are kept on purpose, as part of the
// API: they are what a policy needs to know of the request that the request
// itself does not show (whether its key was injected, and the transport's
// settings for keys and for the cross-hop signal), so that a ShouldRetryFn,
// DefaultShouldRetryFn and any policy wrapping it included, stays a pure
// function of its Attempt, which a test can build as a literal. Their zero
// values read an Attempt as one built without them would be: a key on the
// request is the caller's, injected keys are not known to be honoured, and
// the signal is honoured. A policy that passes the Attempt on unchanged
// passes them on.
type Attempt struct {
	// Count is the number of attempts made so far, this one included: 1
	// after the first attempt.
	Count int

	// Req is the request as sent on this attempt, with the caller's
	// context. It must not be modified.
	Req *http.Request

	// Res is the response of this attempt, or nil if it failed with Err.
	// Its body must not be read or closed: the transport either returns it
	// to the caller or drains and closes it.
	Res *http.Response

	// Err is the error of this attempt, or nil if a response arrived.
	Err error

	// IdempotencyKeyInjected reports whether the idempotency key on Req
	// was put there by the transport rather than by the caller.
	IdempotencyKeyInjected bool

	// IdempotencyKeyHonored reports whether the transport was told that
	// the server honours idempotency keys (IdempotencyKeys.Honored),
	// so that an injected key makes Req safe to send again.
	IdempotencyKeyHonored bool

	// RetrySignalIgnored reports whether the transport was told to ignore
	// the cross-hop signal (WithRetrySignal(false)), so that a response
	// carrying RetrySignalHeader: no-retry is retried like any other.
	RetrySignalIgnored bool
}

// Transport is an http.RoundTripper that retries failed requests. Set it as
// the Transport of an http.Client; the code that makes requests does not
// change.
//
// The zero value is ready to use, with every default: up to DefaultMaxRetries
// retries decided by DefaultShouldRetryFn, waits chosen by DefaultDelayFn, a
// retry budget per destination host (RetryBudget) shared with every other
// Transport of the process that has no budget of its own, no circuit
// breaker, and a pooled base transport from github.com/hashicorp/go-cleanhttp.
// New applies options.
//
// A Transport is safe for concurrent use by multiple goroutines. It must not
// be copied after first use.
type Transport struct {
	// The settings each request starts from (options.go): the options'
	// patches, in order, and the settings they resolve to, on first use.
	patches  []patch
	resolved atomic.Pointer[settings]

	// The parts options plug in.
	transport    http.RoundTripper         // WithTransport; nil: the shared one (base.go)
	breakers     *breakers                 // WithCircuitBreaker; nil: none
	obs          *observer                 // hooks and logger (hooks.go, log.go); nil: none
	prepareRetry func(*http.Request) error // WithPrepareRetry; nil: none
	cookieJar    http.CookieJar            // WithCookieJar (cookies.go); nil: none

	deadlineHeader bool // WithDeadlineHeader (deadline.go)

	policyOf func(*http.Request) *Policy // WithPolicyFunc (policy.go); nil: none

	clk Clock // WithClock; nil: the real clock (clock.go)
	// The latency of first attempts, for adaptive hedging (hedgedelay.go).
	tails tailLatencies
}

var _ http.RoundTripper = (*Transport)(nil)

// New returns a Transport configured by options.
//
// Create it once and reuse it, for all the requests of a program (or of one
// client of a service), as the Transport of one or several http.Clients: a
// Transport is safe for concurrent use, and it keeps per-destination state
// (the circuit breakers, a retry budget given with WithRetryBudget) that
// protects a destination only when the requests to it go through it.
// Transports made without WithTransport share one pooled base transport, so
// that one made per call (&http.Client{Transport: retryhttp.New()} inside a
// function) reuses the process's connections rather than opening a pool of
// its own each time; CloseIdleConnections closes that shared pool's idle
// connections. Likewise, Transports made without WithRetryBudget share the
// process's default retry budget per destination, so that one made per call
// is as storm-safe as one shared.
func New(options ...func(*Transport)) *Transport {
	t := &Transport{}
	for _, option := range options {
		if option != nil {
			option(t)
		}
	}
	return t
}

// RoundTrip sends req, retrying as the transport's settings and req's
// context overrides say. It never modifies req. When it returns an error it
// returns no response; when retries end on a response, that response is
// returned as the server sent it, for the caller to read and close (or, with
// WithErrorOnGiveUp, closed and replaced by a *GiveUpError). With
// hedging on (WithHedging), a request guessed idempotent may have several
// attempts in flight at once; the first final answer is returned.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	// Fail fast while the destination's circuit is open. Otherwise the
	// breaker, if any, sees the final outcome, after all the retries.
	var admitted ticket // breaker.go
	if t.breakers != nil {
		var refused error
		if admitted, refused = t.breakers.allow(req); refused != nil {
			closeBody(req)
			// The cross-hop signal has no per-request override: the
			// transport's own settings say whether to report.
			t.base().pushback(req, ending{StopCircuitOpen, 0}, nil)
			if t.obs != nil { // the settings, resolved for the report only
				var own settings
				t.obs.reportStop(req, ending{StopCircuitOpen, 0}, nil, refused, t.settings(req, &own).maxRetries)
			}
			return nil, refused
		}
	}
	s := t.base() // what req runs with, once: one policy throughout
	if t.policyOf != nil || overridesMade.Load() {
		var own settings // if a policy or overrides apply: a patched copy
		s = t.settings(req, &own)
	}
	facts := scanHeader(req.Header) // the headers the transport reads, looked up once (headerscan.go)
	s = s.layered(&facts)           // layers.go: an outer layer's retry is not retried here
	var body replay                 // each attempt's request (body.go), made by roundTrip
	res, e, err := t.roundTrip(req, s, &facts, &body)
	body.finish() // no attempt follows: a streamed body is closed once none reads it
	// A success with nothing to tell a breaker or the hooks: Pushback and
	// WithErrorOnGiveUp have nothing to do with it either.
	if e.why == StopSuccess && t.breakers == nil && t.obs == nil {
		return res, err
	}
	s.pushback(req, e, res)
	if t.breakers != nil {
		t.breakers.done(admitted, req, res, err)
	}
	if s.errorOnGiveUp {
		res, err = giveUp(e, res, err) // giveup.go
	}
	t.obs.reportStop(req, e, res, err, s.maxRetries)
	return res, err
}

// roundTrip sends the attempts of one logical request, whose headers have
// the facts f, and says how it ended. It makes body, each attempt's
// request with a body of its own; the caller finishes it (replay.finish)
// once roundTrip has returned.
func (t *Transport) roundTrip(req *http.Request, s *settings, f *headerFacts, body *replay) (*http.Response, ending, error) {
	ctx := req.Context()
	caller := req
	req, idem, err := s.keyed(req, f) // idempotency.go: once per request
	if err != nil {
		closeBody(req)
		return nil, ending{StopError, 0}, err
	}
	body.init(req, s, f)
	if s.hedgingOn() {
		if d, ok := t.hedging(ctx, req, s, idem, body); ok {
			return t.roundTripHedged(ctx, caller, *s, d, *body, idem)
		}
	}
	// Watch the writes of requests that only a proof of never having left
	// could make retryable, unless the base transport is known not to
	// replay them (writewatch.go).
	var w *writeWatch
	if !idem.guessed && body.mayReplay() && s.maxRetries > 0 && !t.baseReplaysOnlyUnsent() {
		body.req, w = watchWrites(body.req) // writewatch.go
	}
	var l lease             // the retry's claim on the destination's budget
	var claim *budget.Retry // the request's account with the budget (admit.go)
	if s.holdDuringPause {
		// Held while its host's stated pause runs (pause.go).
		var why StopReason
		if l, why, err = t.holdFirst(ctx, s, req, &claim); err != nil {
			closeBody(req)
			return nil, ending{why, 0}, err
		}
	}
	refundable := false // this attempt retries a lost connection
	for count := 1; ; count++ {
		// 1. Send one attempt, with a body of its own (for a retry, as the
		// PrepareRetry hook rewrote it: prepare.go). A success refills
		// the destination's retry budget, and gives back the token of a
		// retry after a lost connection.
		var q quotaSend // held while its advertised quota is spent (quota.go)
		q.on = s.quotaPacing
		if q.on && (s.quotaScope != nil || !processQuotas.Idle() || processContacts.Cold(req.URL)) {
			if err := t.quotaHold(ctx, s, req, count, &q); err != nil {
				q.heard()
				l.End(outNeutral, 0, 0)
				return nil, quotaEnding(err, count-1), err
			}
		}
		sent, err := t.attemptRequest(body, count)
		if err != nil {
			l.End(outNeutral, 0, 0)
			if q.on {
				t.quotaDone(req, &q, nil)
				q.heard()
			}
			return nil, ending{StopError, count - 1}, err
		}
		w.reset()
		o := attemptOutcome{First: count == 1, Refund: refundable}
		res, err := t.sendSettled(sent, s, &o, &l)
		if q.on && (q.asked || res != nil && quota.Advertised(res.Header)) {
			t.quotaDone(sent, &q, res) // a quota known, or one stated
		}
		q.heard()
		if o.First && s.hedgeQuantile != 0 {
			// Adaptive hedging learns from the latency of first
			// attempts (hedgedelay.go).
			t.firstEnd(sent, o.Latency, res, err)
		}
		if err != nil {
			err = w.mark(err) // writewatch.go: written before a dial error?
		}

		// 2. Judge the outcome (judge.go): final (an upgraded connection, a
		// request that cannot be sent again, an outcome the policy does not
		// retry), or out of retries: the last response as it is, or the
		// last error marked as such. Otherwise it is worth another attempt.
		a := t.newAttempt(s, idem, count, sent, res, err)
		t.obs.reportAttempt(&a, s.maxRetries, false)
		if why := s.judge(&a, body, count); why != 0 {
			return res, ending{why, count}, markGiveUp(why, count, err)
		}

		// 3. Choose the wait: the DelayFn's, and, with a budget, never
		// shorter than a pause the server stated (pause.go; read as the
		// budget settled the attempt). Don't wait longer than the
		// transport allows, nor past the caller's deadline: hand over the
		// last outcome.
		d, paced := max(s.delay(a), o.Stated, 0), false
		if q.on && !s.ownDelay {
			d, paced = t.quotaTurnCap(sent, &q, res, d) // quota.go: no later than the quota's turn
		}
		if d > s.maxDelay {
			return res, ending{StopDelayTooLong, count}, err
		}
		if t.pastDeadline(ctx, d) {
			return res, ending{StopDeadline, count}, err
		}

		// 4. Take the retry from the destination's budget (budget.Admit):
		// report the retry, let go of the response the caller will not see,
		// and wait; or park (park.go: into an outage, or without a token
		// where the destination is short of room) until it answers again or
		// a token comes; or wait in its pause lane (not a 429 whose quota
		// is paced: the quota's hold, at the next attempt, paces it).
		// Refused: the last response as it is, or the last error marked as
		// such.
		refundable = res == nil && isConnLost(err)
		var why StopReason
		if l, why, err = t.awaitRetry(ctx, s, a, d, o.Pause, paced, &claim); why == StopCanceled {
			return nil, ending{why, count}, err
		} else if why != 0 {
			return res, ending{why, count}, err
		}
	}
}

// sendSettled sends req, one attempt of a request that runs with s, and
// settles its outcome with the budget, if any (budget.go settle): o says
// what the attempt is, and gets its timeout, latency and, when known, its
// end; l is the retry's claim on the destination's budget, if any. The
// attempt is timed when its latency is wanted: by the budget, or by
// adaptive hedging (firstEnd).
//
// When both the transport and the budget run on the real clock, the
// attempt is timed on the budget's (budget.Budget.Now, monotonic only, as
// the real clock's latencies are), and its end is also the time settle
// records; otherwise on the transport's clock, and settle reads the
// budget's own for the end, so that neither is handed a reading of the
// other.
func (t *Transport) sendSettled(req *http.Request, s *settings, o *attemptOutcome, l *lease) (*http.Response, error) {
	b := s.budget
	if b == nil && s.hedgeQuantile == 0 {
		return t.send(req, s.attemptTimeout) // no latency wanted, nothing to settle
	}
	var start time.Time // the transport's clock, unless mono
	var at int64        // the budget's, if mono
	mono := false
	if t.clk == nil && b != nil {
		at, mono = b.core.Now()
	}
	if !mono {
		start = t.clock().Now()
	}
	res, err := t.send(req, s.attemptTimeout)
	if mono {
		o.At, _ = b.core.Now()
		o.AtKnown = true
		o.Latency = time.Duration(o.At - at)
	} else {
		o.Latency = t.clock().Now().Sub(start)
	}
	o.Timeout = s.attemptTimeout
	if b != nil {
		ok := success(res)
		if !ok {
			o.Stated, o.Pause = t.pauseOf(res)
			o.Limit = o.Pause && res.StatusCode == http.StatusTooManyRequests
		}
		b.settle(req, ok, res != nil, o, l)
	}
	return res, err
}

// send runs one attempt on the base transport, enforcing its contract: an
// error comes without a response, and a response with no error.
func (t *Transport) send(req *http.Request, timeout time.Duration) (*http.Response, error) {
	if t.deadlineHeader {
		req = t.withDeadlineHeader(req, timeout) // deadline.go
	}
	var res *http.Response
	var err error
	if timeout > 0 {
		res, err = sendWithTimeout(t.clock(), t.baseTransport(), req, timeout)
	} else {
		res, err = t.baseTransport().RoundTrip(req)
	}
	if err != nil {
		err = strayCancel(req, err) // straycancel.go
	}
	switch {
	case err != nil && res != nil:
		discard(res)
		return nil, err
	case err == nil && res == nil:
		return nil, errNilResponse
	}
	return res, err
}

// pastDeadline reports whether waiting d would end after ctx's deadline.
func (t *Transport) pastDeadline(ctx context.Context, d time.Duration) bool {
	deadline, ok := ctx.Deadline()
	if !ok {
		return false
	}
	return !t.clock().Now().Add(d).Before(deadline)
}

// wait waits d on t's clock, or until ctx is done, whichever comes first.
func (t *Transport) wait(ctx context.Context, d time.Duration) error {
	return t.waitOrWake(ctx, d, nil)
}

// waitOrWake is wait, ended early when wake (if not nil) is closed.
func (t *Transport) waitOrWake(ctx context.Context, d time.Duration, wake <-chan struct{}) error {
	if d <= 0 {
		return ctx.Err()
	}
	fire, timer := t.clock().NewTimer(d)
	defer timer.Stop()
	select {
	case <-fire:
		return nil
	case <-wake:
		return ctx.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// baseTransport returns the transport that sends each attempt: the one set
// with WithTransport, or else the process-wide shared one (base.go).
func (t *Transport) baseTransport() http.RoundTripper {
	if t.transport != nil {
		return t.transport
	}
	return sharedBase()
}

// CloseIdleConnections closes the idle connections of the base transport, if
// it has such a method. For a Transport made without WithTransport, that is
// the pooled base transport shared by every such Transport in the process:
// the idle connections of all of them are closed, as
// http.DefaultTransport.CloseIdleConnections does for the http.Clients that
// share it. Connections in use are not touched.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.baseTransport().(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
