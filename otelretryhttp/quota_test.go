package otelretryhttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/otelretryhttp"
	"github.com/seed2409de8f/retryhttp/retryhttptest"
)

// The quota a server advertises is gauged per scope and policy, and the
// request it holds is counted as a quota hold, not a parked retry.
func TestObserveQuotas(t *testing.T) {
	m := newMeter(t)
	reg, err := otelretryhttp.ObserveQuotas(m.mp, attribute.String("test", "quota"))
	require.NoError(t, err)
	defer func() { require.NoError(t, reg.Unregister()) }()

	clock := retryhttptest.NewClock(time.Now())
	start := clock.Now()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := hits.Add(1)
		if clock.Now().Sub(start) >= 10*time.Second {
			n -= 2 // the window turned: a fresh quota of 2
		}
		w.Header().Set("RateLimit", fmt.Sprintf(`"api";r=%d;t=10`, max(2-n, 0)))
		w.Header().Set("RateLimit-Policy", `"api";q=2;w=10`)
	}))
	t.Cleanup(srv.Close)
	tr := newTransport(t, m, retryhttp.WithClock(clock),
		retryhttp.WithQuotaScope(func(*http.Request) string { return "search" }))
	for range 3 {
		code, err := get(t, tr, srv.URL)
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, code)
	}
	got := m.collect(t)
	want := "{retryhttp.quota.policy=api,retryhttp.quota.scope=search,test=quota,url.scheme=http}"
	assert.Equal(t, "1", got[otelretryhttp.QuotaRemainingName+want], got)
	assert.Equal(t, "2", got[otelretryhttp.QuotaLimitName+want])
	assert.Equal(t, "0", got[otelretryhttp.QuotaInFlightName+want])
	assert.Equal(t, "1", got[otelretryhttp.QuotaHoldsName+"{}"], "the third request held once")
	for k := range got {
		assert.NotContains(t, k, otelretryhttp.ParkedName)
	}
}
