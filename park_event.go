package retryhttp

import (
	"log/slog"
	"time"

	"github.com/seed2409de8f/retryhttp/internal/budget"
	"github.com/seed2409de8f/retryhttp/internal/hostmap"
)

// ParkKind says what happened to a parked retry.
type ParkKind uint8

const (
	// ParkParked: the budget had no token for the retry; it waits for a
	// slot of the host's window.
	ParkParked ParkKind = iota + 1
	// ParkReleased: the window gave the retry a slot; it is sent now.
	ParkReleased
	// ParkDropped: the retry gave up waiting (Reason says why); the
	// request ends.
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

// ParkEvent describes a change of a parked retry, for a Hooks.OnPark
// hook. docs/budget-algorithm.md describes parking.
type ParkEvent struct {
	// Kind says what happened.
	Kind ParkKind

	// Attempt is the attempt whose retry is parked, as a Decision's. Its
	// response's body must not be read or closed.
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
	// Parked the number of retries parked on it.
	InFlight, Parked int

	// Reason says why a dropped retry gave up: StopBudgetRefused (a bound
	// was reached), StopCircuitOpen or StopCanceled. Zero otherwise.
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
