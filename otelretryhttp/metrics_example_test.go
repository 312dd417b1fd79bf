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
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// Metrics of a Transport, read here with the SDK's manual reader; a service
// gives New its MeterProvider (an OTLP or Prometheus exporter's). One
// request that needed a retry: one logical request, two attempts (by their
// status), one retry caused by a status. The counters' attributes other than
// server.address and server.port are printed.
func ExampleNew() {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	metrics, err := otelretryhttp.New(mp)
	if err != nil {
		fmt.Println(err)
		return
	}
	tr := retryhttp.New(metrics, retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 }))
	defer tr.CloseIdleConnections()
	if res, err := (&http.Client{Transport: tr}).Get(srv.URL); err == nil {
		res.Body.Close()
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		fmt.Println(err)
		return
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				continue
			}
			for _, dp := range sum.DataPoints {
				label := ""
				for _, kv := range dp.Attributes.ToSlice() {
					if kv.Key != "server.address" && kv.Key != "server.port" {
						label += " " + string(kv.Key) + "=" + kv.Value.Emit()
					}
				}
				fmt.Printf("%s%s: %d\n", m.Name, label, dp.Value)
			}
		}
	}
	// Unordered output:
	// retryhttp.client.requests http.request.method=GET retryhttp.outcome=success: 1
	// retryhttp.client.attempts http.request.method=GET http.response.status_code=503: 1
	// retryhttp.client.attempts http.request.method=GET http.response.status_code=200: 1
	// retryhttp.client.retries http.request.method=GET retryhttp.retry.cause=status: 1
}
