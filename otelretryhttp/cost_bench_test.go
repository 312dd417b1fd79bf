package otelretryhttp_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/otelretryhttp"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// The cost benchmarks measure one GET answered 200 at once, without and with
// metrics recorded by the SDK, as top-level benchmarks so that an
// instruction count (callgrind) of each can be taken alone:
//
//	go test -c -o /tmp/o.test ./otelretryhttp
//	GOGC=off GOMAXPROCS=1 GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind \
//	    /tmp/o.test -test.run '^$' -test.bench '^BenchmarkCostGetMetrics$' -test.benchtime=20000x
//
// at two counts; the difference over the difference of the counts is the
// cost of one request (issue 13's "happy GET with OTel metrics" row).

func BenchmarkCostGet(b *testing.B) {
	benchGet(b, retryhttp.New(retryhttp.WithTransport(memTransport{})))
}

func BenchmarkCostGetMetrics(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	metrics, err := otelretryhttp.New(mp)
	if err != nil {
		b.Fatal(err)
	}
	benchGet(b, retryhttp.New(retryhttp.WithTransport(memTransport{}), metrics))
}

// BenchmarkCostGetMetricsNoop records with OpenTelemetry's no-op meter
// provider: what this package adds, without the SDK's aggregation.
func BenchmarkCostGetMetricsNoop(b *testing.B) {
	metrics, err := otelretryhttp.New(noop.NewMeterProvider())
	if err != nil {
		b.Fatal(err)
	}
	benchGet(b, retryhttp.New(retryhttp.WithTransport(memTransport{}), metrics))
}

// BenchmarkCostGetHooks has empty hooks where the metrics have theirs:
// what the transport's reporting costs, before this package does anything.
func BenchmarkCostGetHooks(b *testing.B) {
	benchGet(b, retryhttp.New(retryhttp.WithTransport(memTransport{}),
		retryhttp.WithHooks(retryhttp.Hooks{
			OnAttempt:       func(retryhttp.AttemptInfo) {},
			OnRetryDecision: func(retryhttp.Decision) {},
		})))
}

// benchGet sends b.N GETs through rt, one request made beforehand.
func benchGet(b *testing.B, rt http.RoundTripper) {
	req, err := http.NewRequest(http.MethodGet, "http://example.test/", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		res.Body.Close()
	}
}
