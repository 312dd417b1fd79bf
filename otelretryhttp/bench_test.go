package otelretryhttp_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/otelretryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// memTransport is an in-memory base transport that answers 200 with no
// body, as in the core's happy-path benchmark.
type memTransport struct{}

func (memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: req}, nil
}

// BenchmarkHappyPath measures a GET answered 200 at once, through a
// Transport without metrics and with metrics recorded by the SDK, to show
// what the metrics add.
func BenchmarkHappyPath(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	metrics, err := otelretryhttp.New(mp)
	require.NoError(b, err)

	transports := []struct {
		name string
		rt   http.RoundTripper
	}{
		{"bare", memTransport{}},
		{"retryhttp", retryhttp.New(retryhttp.WithTransport(memTransport{}))},
		{"retryhttp+metrics", retryhttp.New(retryhttp.WithTransport(memTransport{}), metrics)},
	}
	for _, tr := range transports {
		b.Run(tr.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				req, err := http.NewRequest(http.MethodGet, "http://example.test/", nil)
				if err != nil {
					b.Fatal(err)
				}
				res, err := tr.rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				res.Body.Close()
			}
		})
	}
}

// TestMetricsAddNoAllocs checks that, once a destination's attribute sets
// have been seen, recording the metrics of a request that succeeds at once
// allocates nothing beyond what the transport does.
func TestMetricsAddNoAllocs(t *testing.T) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	metrics, err := otelretryhttp.New(mp)
	require.NoError(t, err)
	plain := retryhttp.New(retryhttp.WithTransport(memTransport{}))
	measured := retryhttp.New(retryhttp.WithTransport(memTransport{}), metrics)
	send := func(rt http.RoundTripper) func() {
		return func() {
			req, err := http.NewRequest(http.MethodGet, "http://example.test/", nil)
			if err != nil {
				panic(err)
			}
			res, err := rt.RoundTrip(req)
			if err != nil {
				panic(err)
			}
			res.Body.Close()
		}
	}
	send(measured)() // the attribute sets are made once
	assert.LessOrEqual(t, testing.AllocsPerRun(100, send(measured)), testing.AllocsPerRun(100, send(plain)), "metrics add no allocation")
}
