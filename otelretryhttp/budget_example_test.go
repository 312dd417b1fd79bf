package otelretryhttp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/otelretryhttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// ObserveRetryBudget gauges the tokens left per destination: here a dead
// backend has drained its bucket. In a service, observe the budget in use,
// retryhttp.DefaultRetryBudget() for Transports without WithRetryBudget,
// once at start-up.
func ExampleObserveRetryBudget() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	budget := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Capacity: 2, NoParking: true})
	reg, err := otelretryhttp.ObserveRetryBudget(budget, mp)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Unregister()

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	tr := retryhttp.New(retryhttp.WithRetryBudget(budget),
		retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 }))
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
		for _, md := range sm.Metrics {
			if g, ok := md.Data.(metricdata.Gauge[float64]); ok && md.Name == otelretryhttp.BudgetTokensName {
				for _, dp := range g.DataPoints {
					addr, _ := dp.Attributes.Value("server.address")
					fmt.Println(md.Name, addr.AsString(), dp.Value)
				}
			}
		}
	}
	// Output:
	// retryhttp.client.budget.tokens 127.0.0.1 0
}
