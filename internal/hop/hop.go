// Package hop holds what the two sides of a service share: the client side
// (package retryhttp's Transport, for its outbound calls) and the inbound
// side (package inbound's middleware, around its handlers). An outbound
// request reports how it ended to the middleware of the inbound request it
// was sent for, through the request's context; both sides reach the record
// here, so neither imports the other for it, and users never see it.
package hop

import (
	"context"
	"sync/atomic"
)

// FailedStatus reports whether a response with status code shows a server
// that failed or asks to be left alone: 429, or 500 and above. It fails a
// breaker's sample, and it is the failure that Pushback passes on.
func FailedStatus(code int) bool {
	return code >= 500 || code == 429
}

// Outcome is the record of the outbound calls of one inbound request: did
// any of them give up, or was told to. It is safe for concurrent use: the
// handler's goroutines may report concurrently.
type Outcome struct {
	gaveUp atomic.Bool
}

// MarkGaveUp records that an outbound request gave up, or was told to.
func (o *Outcome) MarkGaveUp() { o.gaveUp.Store(true) }

// GaveUp reports whether MarkGaveUp was called.
func (o *Outcome) GaveUp() bool { return o.gaveUp.Load() }

// outcomeKey is the context key of an inbound request's *Outcome.
type outcomeKey struct{}

// WithOutcome returns ctx carrying o, for the outbound requests sent with
// it or a context derived from it. A nil o excludes them: they report to
// no one.
func WithOutcome(ctx context.Context, o *Outcome) context.Context {
	return context.WithValue(ctx, outcomeKey{}, o)
}

// OutcomeFrom returns the Outcome that ctx carries, nil if none or if its
// requests are excluded.
func OutcomeFrom(ctx context.Context) *Outcome {
	o, _ := ctx.Value(outcomeKey{}).(*Outcome)
	return o
}
