package otelretryhttp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/otelretryhttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// The retries of a request, written onto the span of its context. In a
// service, that span is the client span of otelhttp.NewTransport wrapping
// the retrying transport.
func ExampleSpanEvents() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())

	tr := retryhttp.New(otelretryhttp.SpanEvents(),
		retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 }))
	defer tr.CloseIdleConnections()
	ctx, span := tp.Tracer("example").Start(context.Background(), "GET")
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	if res, err := (&http.Client{Transport: tr}).Do(req); err == nil {
		res.Body.Close()
	}
	span.End()

	s := rec.Ended()[0]
	for _, e := range s.Events() {
		fmt.Println(e.Name, e.Attributes[0].Value.AsInt64(), e.Attributes[1].Value.AsString())
	}
	for _, kv := range s.Attributes() {
		fmt.Println(kv.Key, kv.Value.Emit())
	}
	// Output:
	// retryhttp.retry 1 status
	// retryhttp.attempts 2
	// retryhttp.outcome success
}
