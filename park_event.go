package retryhttp

import (
	"log/slog"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/budget"
	"github.com/seed2409de8f/retryhttp/internal/hostmap"
)

// ParkKind says what happened to a wait in the retry budget: a retry
// parked by an outage, a retry waiting in the host's pause lane, or a first
// attempt held by WithHoldDuringPause (ParkEvent says how to tell them
// apart).
type ParkKind uint8

const (
	// ParkParked: the wait begins: an outage's retry found no token and
	// waits for a slot of the host's window; a pause's retry (or a held
	// first attempt) waits in the host's pause lane.
	ParkParked ParkKind = iota + 1
	// ParkReleased: the window gave the retry a slot (or a token came), or
	// the lane let it go at the host's pace; it is sent now.
	ParkReleased
	// ParkDropped: the wait ended without a release (Reason says why). A
	// retry's request ends; a held first attempt is sent all the same when
	// its wait reached its bound, and ends unsent when its caller cancelled
	// or its circuit opened.
	ParkDropped
)

// String returns "parked", "released" or "dropped".
func (k ParkKind) String() string {
	switch k {
	case ParkParked:
		return "parked"
	case ParkReleased:
		return "released"
	case ParkDropped:
		return "dropped"
	}
	return "unknown"
}

// ParkEvent describes a wait in the retry budget, for a Hooks.OnPark hook:
// not only the parked retries (into an outage, or without a token where
// the host is short of room: docs/budget-algorithm.md), but also every
// wait in a host's pause lane, outage or not (a 429's retry), and every
// first attempt held by WithHoldDuringPause. A held first attempt has
// Attempt.Count 0; a retry in the pause lane has an Attempt.Res that asked
// for a pause (a 429, or a Retry-After or rate-limit reset asking a wait),
// though such a retry parks in the host's queue when the lane would not
// release it before its bound; docs/observability.md has more.
type ParkEvent struct {
	// Kind says what happened.
	Kind ParkKind

	// Attempt is the attempt whose retry waits, as a Decision's; for a
	// held first attempt, only Req is set (Count is 0). Its response's body
	// must not be read or closed.
	Attempt Attempt

	// Host is the destination, as scheme://host:port.
	Host string

	// Waited is how long the retry was parked, for ParkReleased and
	// ParkDropped; it does not include the retry's delay, waited first.
	Waited time.Duration

	// Window is the host's window after the event: the parked retries it
	// lets be in flight at once.
	Window int

	// InFlight is the number of the host's slots held after the event;
	// Parked the number of retries parked on it by an outage. Window,
	// InFlight and Parked describe the outage's queue, also in an event of
	// the pause lane, whose waiters they do not count.
	InFlight, Parked int

	// Reason says why a wait ended without a release (ParkDropped):
	// StopBudgetRefused (a bound was reached), StopCircuitOpen or
	// StopCanceled. Zero otherwise.
	Reason StopReason
}

// reportPark completes e with its host's pacing, st, and reports it to
// the hooks and the logger.
func (o *observer) reportPark(e ParkEvent, st budget.Stand) {
	if o == nil || len(o.onPark) == 0 && (o.logger == nil || e.Kind == ParkDropped) {
		return
	}
	e.Window, e.InFlight, e.Parked = st.Window, st.InFlight, st.Parked
	e.Host = hostmap.KeyOf(e.Attempt.Req).String()
	for _, fn := range o.onPark {
		fn(e)
	}
	o.logPark(e)
}

// logPark writes the record of a parked or released retry.
func (o *observer) logPark(e ParkEvent) {
	l, a := o.logger, e.Attempt
	if l == nil || e.Kind == ParkDropped || a.Req == nil {
		return
	}
	ctx := a.Req.Context()
	if !l.Enabled(ctx, LogLevelPark) {
		return
	}
	u := redactURL(a.Req.URL)
	attrs := []slog.Attr{slog.String("method", method(a.Req)), slog.String("url", u), slog.Int("attempt", a.Count)}
	if e.Kind == ParkReleased {
		attrs = append(attrs, slog.Duration("waited", e.Waited))
	}
	attrs = append(attrs, slog.Int("window", e.Window), slog.Int("in_flight", e.InFlight), slog.Int("parked", e.Parked))
	l.LogAttrs(ctx, LogLevelPark, "retryhttp: "+e.Kind.String(), attrs...)
}
