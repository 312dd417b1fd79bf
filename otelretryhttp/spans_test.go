package otelretryhttp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/otelretryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestSpanEvents sends a request that is retried twice, and once more
// through a budget that refuses the retry, under a recording span, and
// reads the events and attributes back.
func TestSpanEvents(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1)%3 != 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { require.NoError(t, tp.Shutdown(context.Background())) }()

	send := func(tr *retryhttp.Transport) {
		defer tr.CloseIdleConnections()
		ctx, span := tp.Tracer("test").Start(context.Background(), "GET")
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		res, err := (&http.Client{Transport: tr}).Do(req)
		require.NoError(t, err)
		res.Body.Close()
		span.End()
	}
	noWait := retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return time.Millisecond })
	send(retryhttp.New(noWait, otelretryhttp.SpanEvents(), retryhttp.WithRetryBudget(nil)))
	send(retryhttp.New(noWait, otelretryhttp.SpanEvents(),
		retryhttp.WithRetryBudget(retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Capacity: 1, NoParking: true}))))

	spans := rec.Ended()
	require.Len(t, spans, 2)
	attrs := func(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
		m := map[attribute.Key]attribute.Value{}
		for _, kv := range kvs {
			m[kv.Key] = kv.Value
		}
		return m
	}

	// Retried twice, then success.
	s := attrs(spans[0].Attributes())
	assert.Equal(t, int64(3), s[otelretryhttp.AttemptsKey].AsInt64())
	assert.Equal(t, "success", s[otelretryhttp.OutcomeKey].AsString())
	events := spans[0].Events()
	require.Len(t, events, 2)
	for i, e := range events {
		assert.Equal(t, otelretryhttp.RetryEventName, e.Name)
		ea := attrs(e.Attributes)
		assert.Equal(t, int64(i+1), ea[otelretryhttp.AttemptKey].AsInt64())
		assert.Equal(t, "status", ea[otelretryhttp.RetryCauseKey].AsString())
		assert.Equal(t, 0.001, ea[otelretryhttp.RetryDelayKey].AsFloat64())
		assert.Equal(t, int64(503), ea["http.response.status_code"].AsInt64())
	}

	// One retry, then the budget refuses the next: the span says so.
	s = attrs(spans[1].Attributes())
	assert.Equal(t, int64(2), s[otelretryhttp.AttemptsKey].AsInt64())
	assert.Equal(t, "budget_refused", s[otelretryhttp.OutcomeKey].AsString())
	assert.Len(t, spans[1].Events(), 1)
}

// TestSpanEventsWithoutSpan checks that a request without a recording span
// is untouched and allocates nothing more.
func TestSpanEventsWithoutSpan(t *testing.T) {
	plain := retryhttp.New(retryhttp.WithTransport(memTransport{}))
	traced := retryhttp.New(retryhttp.WithTransport(memTransport{}), otelretryhttp.SpanEvents())
	send := func(rt http.RoundTripper) func() {
		return func() {
			req, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
			res, err := rt.RoundTrip(req)
			if err != nil {
				panic(err)
			}
			res.Body.Close()
		}
	}
	assert.Equal(t, testing.AllocsPerRun(100, send(plain)), testing.AllocsPerRun(100, send(traced)))
}
