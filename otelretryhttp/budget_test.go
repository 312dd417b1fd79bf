package otelretryhttp_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/otelretryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
)

// TestObserveRetryBudget: a dead backend drains its bucket; the gauges
// read the budget at collection, one series per destination.
func TestObserveRetryBudget(t *testing.T) {
	m := newMeter(t)
	b := retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Capacity: 2, NoParking: true})
	reg, err := otelretryhttp.ObserveRetryBudget(b, m.mp, attribute.String("budget", "api"))
	require.NoError(t, err)
	assert.Empty(t, m.collect(t), "no host yet")

	srv, hits := newServer(t, func(int64) int { return http.StatusServiceUnavailable })
	tr := retryhttp.New(retryhttp.WithRetryBudget(b),
		retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 }))
	t.Cleanup(tr.CloseIdleConnections)
	code, err := get(t, tr, srv.URL)
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.EqualValues(t, 3, hits.Load(), "two retries, then the bucket is empty")

	assert.Equal(t, map[string]string{
		otelretryhttp.BudgetTokensName + "{budget=api,url.scheme=http}":   "0",
		otelretryhttp.BudgetCapacityName + "{budget=api,url.scheme=http}": "2",
		otelretryhttp.BudgetParkedName + "{budget=api,url.scheme=http}":   "0",
		otelretryhttp.BudgetInFlightName + "{budget=api,url.scheme=http}": "0",
	}, m.collect(t))
	require.NoError(t, reg.Unregister())
	assert.Empty(t, m.collect(t), "nothing after Unregister")
}

func TestObserveRetryBudgetNil(t *testing.T) {
	_, err := otelretryhttp.ObserveRetryBudget(nil, newMeter(t).mp)
	assert.ErrorContains(t, err, "nil")
}
