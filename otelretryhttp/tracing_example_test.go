package otelretryhttp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// resendCount sets the OpenTelemetry attribute http.request.resend_count on
// the span of each retry: placed below otelhttp's per-attempt transport, it
// finds the attempt's span in the request's context, and the attempt's
// number in its Retry-Attempt header.
type resendCount struct{ next http.RoundTripper }

func (rc resendCount) RoundTrip(r *http.Request) (*http.Response, error) {
	if n := retryhttp.AttemptFromRequest(r); n > 1 {
		trace.SpanFromContext(r.Context()).SetAttributes(attribute.Int("http.request.resend_count", n-1))
	}
	return rc.next.RoundTrip(r)
}

// otelhttp on both sides of the retrying transport: above it, one span per
// logical request (what the caller waited for); below it, one child span per
// attempt, retries marked with http.request.resend_count. Either alone
// works too: above only, one span per request (add otelretryhttp.SpanEvents
// to see its retries as events); below only, one span per attempt.
// docs/observability.md discusses the choice.
func Example_otelhttp() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if n.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	named := func(name string) otelhttp.Option {
		return otelhttp.WithSpanNameFormatter(func(string, *http.Request) string { return name })
	}

	// Below: a span per attempt, around the process's shared base
	// transport (retryhttp.DefaultBaseTransport keeps its pool and
	// go-cleanhttp's settings).
	perAttempt := otelhttp.NewTransport(resendCount{retryhttp.DefaultBaseTransport()},
		otelhttp.WithTracerProvider(tp), named("attempt"))
	tr := retryhttp.New(retryhttp.WithTransport(perAttempt),
		retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 }))
	defer tr.CloseIdleConnections()
	// Above: a span per logical request.
	client := &http.Client{Transport: otelhttp.NewTransport(tr, otelhttp.WithTracerProvider(tp), named("request"))}

	res, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()

	// The spans as started: the request's, then its attempts'.
	spans := rec.Ended()
	slices.SortFunc(spans, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	request := spans[0].SpanContext().SpanID()
	for _, s := range spans {
		line := s.Name()
		if s.Parent().SpanID() == request {
			line += " (child of request)"
		}
		for _, kv := range s.Attributes() {
			switch kv.Key {
			case "http.response.status_code", "http.request.resend_count":
				line += fmt.Sprintf(" %s=%s", kv.Key, kv.Value.Emit())
			}
		}
		fmt.Println(line)
	}
	// Output:
	// request http.response.status_code=200
	// attempt (child of request) http.response.status_code=503
	// attempt (child of request) http.request.resend_count=1 http.response.status_code=503
	// attempt (child of request) http.request.resend_count=2 http.response.status_code=200
}
