package retryhttp

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"strings"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/hostmap"
	"github.com/seed2409de8f/retryhttp/internal/quota"
	"github.com/seed2409de8f/retryhttp/internal/retryafter"
)

// Advertised quotas: the transport reads the quota a server states on its
// responses (the IETF RateLimit fields, X-RateLimit-*, and, for scopes the
// caller names, the LLM APIs' x-ratelimit-*-requests) and holds a request
// whose scope has none left until its window turns. docs/ratelimit.md
// ("Advertised quotas") states what is read and held, and why.

// processQuotas is the pacing state of the quotas advertised to the
// process's Transports: a quota is the server's, per API key, and the
// Transports of one process usually share a key, as they share the
// default retry budget.
var processQuotas quota.Book

// processContacts is the first-contact gate of the process's hosts: the
// first request to a host the process has not heard from goes alone, the
// others wait for its answer (at most 100 ms), so that a quota it states
// is known before they go.
var processContacts = quota.NewContacts()

// maxScopeName bounds the length of a scope name of WithQuotaScope; a
// longer one is cut.
const maxScopeName = 128

// WithQuotaPacing, when true (the default), paces requests to the quotas
// their servers advertise: every response's RateLimit fields (IETF, all
// drafts) and X-RateLimit-* fields are read, and a request whose quota is
// spent waits until the server's window turns instead of meeting a 429;
// concurrent requests do not overshoot what remains. The first request to
// a host the process has not heard from goes alone: the others sent
// meanwhile wait for its answer, at most 100ms, so that a quota it states
// is known before they go. A wait longer than
// the maximum delay (WithMaxDelay), or past the context's deadline, fails
// at once with a *QuotaWaitError. False turns it off: nothing is read or
// held. docs/ratelimit.md ("Advertised quotas") has the rules.
func WithQuotaPacing(pace bool) Option {
	return option(func(s *settings) { s.quotaPacing = pace })
}

// WithQuotaScope names the scope of each request's quota, for hosts that
// keep several (one per model, or per endpoint family): requests whose fn
// returns the same name, to the same host, share a quota; "" is the
// host's own. A named scope also reads the LLM APIs' fields
// (x-ratelimit-remaining-requests, x-ratelimit-reset-requests), which are
// not read otherwise. fn runs before each attempt, on the request's
// goroutine; names longer than 128 bytes are cut. nil, the default, names
// no scope. docs/ratelimit.md ("Advertised quotas").
func WithQuotaScope(fn func(*http.Request) string) Option {
	return option(func(s *settings) { s.quotaScope = fn })
}

// ErrQuotaExhausted is what a *QuotaWaitError unwraps to: the request's
// advertised quota is spent, and the window turns too late for it.
var ErrQuotaExhausted = errors.New("retryhttp: advertised quota exhausted")

// QuotaWaitError is returned when a request's advertised quota is spent
// and the server's window turns after the maximum delay (WithMaxDelay) or
// the context's deadline: the transport does not wait, and sends nothing
// more (stop reason StopQuotaWait). It unwraps to ErrQuotaExhausted.
type QuotaWaitError struct {
	// Wait is how long the request would have had to wait: until the
	// window turns, as the server stated it.
	Wait time.Duration

	// Scope is the quota's scope: the destination as scheme://host:port,
	// followed by "#" and the name of WithQuotaScope when it gave one.
	Scope string

	// Policy is the server's name for the quota (an IETF policy name,
	// GitHub's X-RateLimit-Resource); "" when it names none.
	Policy string
}

// Error reads "retryhttp: advertised quota exhausted for
// https://api.example.com:443 (policy "default"): the window turns in
// 1h0m0s".
func (e *QuotaWaitError) Error() string {
	policy := ""
	if e.Policy != "" {
		policy = fmt.Sprintf(" (policy %q)", e.Policy)
	}
	return fmt.Sprintf("%v for %s%s: the window turns in %v", ErrQuotaExhausted, e.Scope, policy, e.Wait)
}

// Unwrap returns ErrQuotaExhausted.
func (e *QuotaWaitError) Unwrap() error { return ErrQuotaExhausted }

// QuotaHold describes a request held because its advertised quota is
// spent, for a Hooks.OnQuotaHold hook: it waits Wait, then asks again.
// A hold is the quota's pace, not an outage: parked retries are ParkEvents.
type QuotaHold struct {
	// Attempt is the attempt about to be sent: Count is its number (1 for
	// the first), Req the request; it has no outcome.
	Attempt Attempt

	// Scope is the quota's scope, as QuotaWaitError's; Policy the server's
	// name for it.
	Scope, Policy string

	// Remaining is the count the server last stated (with the requests in
	// flight still to be answered, none may be left for this one).
	Remaining int64

	// Wait is how long the request waits before asking again.
	Wait time.Duration
}

// QuotaState is one advertised quota as Quotas reports it.
type QuotaState struct {
	// Scope is the quota's scope, as QuotaWaitError's; Policy the server's
	// name for it.
	Scope, Policy string

	// Remaining is the count the server last stated for the current window
	// (at a window's turn, the window's quota, until an answer states it);
	// InFlight the requests sent against it and not yet answered.
	Remaining int64
	InFlight  int

	// Limit is the window's quota, as stated, or else the highest count
	// seen.
	Limit int64

	// ResetAt is when the window turns, on the clock of the Transport that
	// read it last; zero when not known.
	ResetAt time.Time
}

// Quotas returns the advertised quotas the process's Transports pace to
// (WithQuotaPacing), in no particular order: at most 1024 scopes, the
// least recently used forgotten first, and 16 quotas each.
// otelretryhttp.ObserveQuotas reports them as metrics.
func Quotas() iter.Seq[QuotaState] {
	return func(yield func(QuotaState) bool) {
		processQuotas.Each(func(st quota.State) bool {
			return yield(QuotaState{
				Scope: scopeString(st.Key), Policy: st.Policy, Remaining: st.Remaining,
				InFlight: st.InFlight, Limit: st.Limit, ResetAt: st.ResetAt,
			})
		})
	}
}

// scopeString returns k as QuotaWaitError.Scope reads.
func scopeString(k quota.Key) string {
	dest := hostmap.Key{Scheme: k.Scheme, Host: k.Host}.String()
	if k.Name == "" {
		return dest
	}
	return dest + "#" + k.Name
}

// quotaSend is the quota state of one attempt: the ticket Reserve gave it,
// or, when no quota was known, the time it was sent.
type quotaSend struct {
	tk     quota.Ticket
	name   string    // the caller's scope name
	sentAt time.Time // when it was let go, if a quota was known
	asked  bool      // tk is Reserve's
	on     bool      // pacing is on for the request

	contact *quota.Contact // the gate of the host, when this is the first send to it
}

// firstContact lets the attempt req go at once to a host the process has
// heard from. The first attempt to a host not heard from goes too, and q
// keeps its gate for heard; the others wait for its answer, at most
// quota.FirstContactWait, or fail with the context's error.
func (t *Transport) firstContact(ctx context.Context, req *http.Request, q *quotaSend) error {
	c := processContacts.Ask(req)
	switch {
	case c == nil:
		return nil
	case c.Claim():
		q.contact = c
		return nil
	}
	return c.Wait(ctx)
}

// heard opens the gate q kept, if any: its attempt was answered (and its
// quota, if it stated one, read), or failed.
func (q *quotaSend) heard() {
	if q.contact != nil {
		q.contact.Open()
		q.contact = nil
	}
}

// quotaHold holds the attempt req of count until its host has been heard
// from (firstContact) and its scope's advertised quota lets it go, and
// fills q for quotaDone and heard. It fails with a
// *QuotaWaitError when the wait would pass the maximum delay or the
// deadline, or with the context's error.
func (t *Transport) quotaHold(ctx context.Context, s *settings, req *http.Request, count int, q *quotaSend) error {
	q.on = true // s.quotaPacing: the caller asks only then
	if err := t.firstContact(ctx, req, q); err != nil {
		return err
	}
	if s.quotaScope == nil && processQuotas.Idle() {
		return nil // the usual case: no quota known in the process
	}
	if s.quotaScope != nil {
		q.name = s.quotaScope(req)
		if len(q.name) > maxScopeName {
			q.name = q.name[:maxScopeName]
		}
	}
	if processQuotas.Idle() {
		return nil // no quota known in the process: quotaDone dates a first one
	}
	clk := t.clock()
	k, route := quotaKey(req, q.name), routeOf(req)
	var waited time.Duration
	var after *quota.Hold
	for {
		now := clk.Now()
		bound := s.maxDelay - waited
		if deadline, ok := ctx.Deadline(); ok {
			bound = min(bound, deadline.Sub(now)-1)
		}
		tk, hold := processQuotas.Reserve(k, route, now, max(bound, 0), after)
		if hold == nil {
			q.tk, q.sentAt, q.asked = tk, now, true
			return nil
		}
		if hold.Wait > bound {
			return &QuotaWaitError{Wait: hold.Wait, Scope: scopeString(k), Policy: hold.Policy}
		}
		wait := max(hold.Wait, time.Millisecond)
		if s.budget != nil {
			// The host is silent because the client is: its parked
			// retries do not give it up meanwhile.
			s.budget.inner().Quiet(hostmap.KeyOf(req), wait)
		}
		t.obs.reportQuotaHold(QuotaHold{
			Attempt: Attempt{Count: count, Req: req}, Scope: scopeString(k), Policy: hold.Policy,
			Remaining: hold.Remaining, Wait: wait,
		})
		start := clk.Now()
		if err := t.waitOrWake(ctx, wait, hold.Wake); err != nil {
			processQuotas.Forget(hold) // its place in the queue goes
			return err
		}
		waited += min(max(clk.Now().Sub(start), 0), wait)
		after = hold
	}
}

// quotaDone records the answer to the attempt req of q: the quotas res
// states, if any.
func (t *Transport) quotaDone(req *http.Request, q *quotaSend, res *http.Response) {
	if !q.on || !q.asked && res == nil {
		return
	}
	if !q.asked && !quota.Advertised(res.Header) {
		return // the common case: no quota known, none stated
	}
	var obs []quota.Observation
	var now time.Time
	if res != nil {
		now = t.clock().Now()
		d := quota.IETF | quota.XRateLimit
		if q.name != "" {
			d |= quota.LLM
		}
		var ra time.Duration
		hasRA := false
		if len(res.Header["Retry-After"]) > 0 {
			ra, hasRA = retryafter.Parse(res.Header, func() time.Time { return now })
		}
		obs = quota.Read(res.Header, now, d, ra, hasRA)
	}
	if !q.asked {
		if len(obs) == 0 {
			return
		}
		q.tk = quota.Open(quotaKey(req, q.name), routeOf(req), now) // its answer's time, near enough
	}
	if now.IsZero() {
		now = t.clock().Now()
	}
	processQuotas.Done(q.tk, obs, res != nil && res.StatusCode == http.StatusTooManyRequests, now)
}

// quotaTurnCap returns the wait d of the retry of req, the attempt of q
// answered res, no longer than until the turn of the spent window its
// 429 met: the turn its quota fields state, or the process's quota
// book's when it knows one: the earliest its answers stated, sooner (by
// less than a second: a reset in whole seconds is rounded up, a 429 late
// in its window states a turn up to a second late, and a fleet's clients
// have spent the new window by then), or later (a server that rounds
// down). The book holds the
// retry until then (quotaHold), in the order the window's waiters came,
// and a wait past the turn (DefaultDelayFn's: the server's reset jittered
// by a third) finds the new window spent by those sent at the turn. A
// Retry-After the 429 carries is waited in full, and so is a DelayFn of
// the caller's (the transport does not call it here); a 429 that states
// no turn keeps its backoff. paced reports that the book holds the retry
// until that turn (it knows the window spent): the budget's pause lane,
// which spaces a host's retries at the pace its answers show, then leaves
// it to the book (a gap of the lane's, the pause stated, can send a
// fleet's retry a window past the turn: docs/ratelimit.md, Measured).
func (t *Transport) quotaTurnCap(req *http.Request, q *quotaSend, res *http.Response, d time.Duration) (time.Duration, bool) {
	if res == nil || res.StatusCode != http.StatusTooManyRequests || len(res.Header["Retry-After"]) > 0 {
		return d, false
	}
	limit, _ := t.pauseOf(res) // the turn stated, if any
	turn, found, ok := processQuotas.TurnIn(quotaKey(req, q.name), routeOf(req), t.clock().Now())
	if ok && (found || turn > limit || turn > 0 && turn > limit-time.Second) {
		// (Sooner by less than the second a whole-second reset rounds
		// up: a book that keeps fewer policies than a 429 states may
		// know only a shorter one's turn.)
		limit = turn
	}
	if limit <= 0 {
		return d, ok
	}
	return min(d, limit), ok
}

// quotaKey returns the scope of req with the caller's name.
func quotaKey(req *http.Request, name string) quota.Key {
	h := hostmap.KeyOf(req)
	return quota.Key{Scheme: h.Scheme, Host: h.Host, Name: name}
}

// routeOf returns the route of req that a vendor quota is tied to: its
// path's first segment ("repos" for /repos/o/r; "" for /).
func routeOf(req *http.Request) string {
	if req.URL == nil {
		return ""
	}
	p := strings.TrimPrefix(req.URL.Path, "/")
	if i := strings.IndexByte(p, '/'); i >= 0 {
		p = p[:i]
	}
	return p
}

// quotaEnding is the ending of a request whose quota hold failed with err
// after attempts were sent.
func quotaEnding(err error, attempts int) ending {
	var qe *QuotaWaitError
	if errors.As(err, &qe) {
		return ending{StopQuotaWait, attempts}
	}
	return ending{StopCanceled, attempts}
}

// quotaTry is quotaHold for a hedge: it lets req go only if its quota has
// room at once, and reports whether it did; a hedge is not worth a wait.
func (t *Transport) quotaTry(s *settings, req *http.Request, q *quotaSend) bool {
	*q = quotaSend{on: s.quotaPacing}
	if !q.on {
		return true
	}
	if s.quotaScope != nil {
		q.name = s.quotaScope(req)
		if len(q.name) > maxScopeName {
			q.name = q.name[:maxScopeName]
		}
	}
	now := t.clock().Now()
	if processQuotas.Idle() {
		q.sentAt = now
		return true
	}
	tk, hold := processQuotas.Reserve(quotaKey(req, q.name), routeOf(req), now, 0, nil)
	if hold != nil {
		q.on = false
		return false
	}
	q.tk, q.sentAt, q.asked = tk, now, true
	return true
}
