package otelretryhttp

import (
	"github.com/seed2409de8f/retryhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Span event and attribute names written by SpanEvents.
const (
	// RetryEventName is the name of the span event added for each retry or
	// hedge.
	RetryEventName = "retryhttp.retry"

	// AttemptKey is, on a retry event, the number of the attempt being
	// retried (1 for the first); AttemptsKey is, on the span, the number
	// of attempts the request sent in all.
	AttemptKey  = attribute.Key("retryhttp.attempt")
	AttemptsKey = attribute.Key("retryhttp.attempts")

	// RetryDelayKey is, on a retry event, the wait chosen before the
	// retry, in seconds.
	RetryDelayKey = attribute.Key("retryhttp.retry.delay")
)

// SpanEvents returns an option that writes each request's retries onto the
// span its context carries, typically the client span of an
// otelhttp.NewTransport that wraps the retrying transport:
//
//   - for each retry or hedge, an event RetryEventName with the attempt
//     retried (AttemptKey), the cause (RetryCauseKey), the wait in seconds
//     (RetryDelayKey), and the attempt's http.response.status_code or
//     error.type;
//   - when the request ends, the span attributes AttemptsKey and OutcomeKey
//     ("success", "retries_exhausted", "budget_refused", …), so that a trace
//     shows a retry storm being refused, not only retries being made.
//
// A context without a recording span costs one check per decision and no
// allocation. The option adds a hook (an OnRetryDecision, with
// retryhttp.WithHooks); it replaces none. Unlike the metrics, spans carry no cardinality limit, so
// the attributes are the same low-cardinality values.
func SpanEvents() retryhttp.Option {
	return retryhttp.WithHooks(retryhttp.Hooks{OnRetryDecision: spanDecision})
}

func spanDecision(d retryhttp.Decision) {
	a := d.Attempt
	if a.Req == nil {
		return
	}
	span := trace.SpanFromContext(a.Req.Context())
	if !span.IsRecording() {
		return
	}
	if !d.Retry {
		span.SetAttributes(AttemptsKey.Int(a.Count), OutcomeKey.String(outcome(d.Reason)))
		return
	}
	attrs := []attribute.KeyValue{
		AttemptKey.Int(a.Count),
		RetryCauseKey.String(d.Cause()),
		RetryDelayKey.Float64(d.Delay.Seconds()),
	}
	switch {
	case a.Res != nil:
		attrs = append(attrs, attribute.Int("http.response.status_code", a.Res.StatusCode))
	case a.Err != nil:
		attrs = append(attrs, attribute.String("error.type", errorType(a)))
	}
	span.AddEvent(RetryEventName, trace.WithAttributes(attrs...))
}
