package otelretryhttp_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/otelretryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// meter is a MeterProvider read back through a manual reader.
type meter struct {
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
}

func newMeter(t *testing.T) *meter {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { require.NoError(t, mp.Shutdown(context.Background())) })
	return &meter{reader: reader, mp: mp}
}

// collect returns every data point recorded, as "name{k=v,…}" → value: the
// value of a counter or gauge, or "count/sum" of a histogram. Attributes
// are sorted by key; server.address and server.port are left out, checked
// by TestAttributes.
func (m *meter) collect(t *testing.T) map[string]string {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, m.reader.Collect(context.Background(), &rm))
	got := map[string]string{}
	for _, sm := range rm.ScopeMetrics {
		assert.Equal(t, otelretryhttp.ScopeName, sm.Scope.Name)
		for _, md := range sm.Metrics {
			switch data := md.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range data.DataPoints {
					got[md.Name+labels(dp.Attributes)] = strconv.FormatInt(dp.Value, 10)
				}
			case metricdata.Gauge[int64]:
				for _, dp := range data.DataPoints {
					got[md.Name+labels(dp.Attributes)] = strconv.FormatInt(dp.Value, 10)
				}
			case metricdata.Gauge[float64]:
				for _, dp := range data.DataPoints {
					got[md.Name+labels(dp.Attributes)] = strconv.FormatFloat(dp.Value, 'f', -1, 64)
				}
			case metricdata.Histogram[int64]:
				for _, dp := range data.DataPoints {
					got[md.Name+labels(dp.Attributes)] = strconv.FormatUint(dp.Count, 10) + "/" + strconv.FormatInt(dp.Sum, 10)
				}
			case metricdata.Histogram[float64]:
				for _, dp := range data.DataPoints {
					got[md.Name+labels(dp.Attributes)] = strconv.FormatUint(dp.Count, 10) + "/" + strconv.FormatFloat(dp.Sum, 'f', -1, 64)
				}
			default:
				t.Fatalf("unexpected data of %s: %T", md.Name, md.Data)
			}
		}
	}
	return got
}

func labels(set attribute.Set) string {
	var kv []string
	for _, a := range set.ToSlice() {
		if a.Key == "server.address" || a.Key == "server.port" {
			continue
		}
		kv = append(kv, string(a.Key)+"="+a.Value.Emit())
	}
	sort.Strings(kv)
	return "{" + strings.Join(kv, ",") + "}"
}

// newServer starts a loopback server whose n-th request (1 for the first)
// is answered with status(n).
func newServer(t *testing.T, status func(n int64) int) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status(hits.Add(1)))
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// newTransport returns a Transport recording its metrics in m, whose idle
// connections are closed when the test ends.
func newTransport(t *testing.T, m *meter, opts ...retryhttp.Option) *retryhttp.Transport {
	t.Helper()
	metrics, err := otelretryhttp.New(m.mp)
	require.NoError(t, err)
	tr := retryhttp.New(append(opts, metrics)...)
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// get sends a GET through tr and returns the status, or 0 and the error.
func get(t *testing.T, tr http.RoundTripper, url string) (int, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	res, err := tr.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, nil
}

// delays makes the wait before retry n be n·10ms, and never waits.
func delays(tr *retryhttp.Transport) {
	retryhttp.WithDelayFn(func(a retryhttp.Attempt) time.Duration {
		return time.Duration(a.Count) * 10 * time.Millisecond
	})(tr)
}

func noWait(tr *retryhttp.Transport) {
	retryhttp.WithDelayFn(func(retryhttp.Attempt) time.Duration { return 0 })(tr)
}

func TestSuccessFirstTry(t *testing.T) {
	m := newMeter(t)
	srv, _ := newServer(t, func(int64) int { return 200 })
	tr := newTransport(t, m)

	status, err := get(t, tr, srv.URL)
	require.NoError(t, err)
	assert.Equal(t, 200, status)
	assert.Equal(t, map[string]string{
		"retryhttp.client.requests{http.request.method=GET,retryhttp.outcome=success}":             "1",
		"retryhttp.client.attempts{http.request.method=GET,http.response.status_code=200}":         "1",
		"retryhttp.client.attempts_per_request{http.request.method=GET,retryhttp.outcome=success}": "1/1",
	}, m.collect(t))
}

func TestTwo503ThenSuccess(t *testing.T) {
	m := newMeter(t)
	srv, hits := newServer(t, func(n int64) int { return map[bool]int{true: 503, false: 200}[n <= 2] })
	tr := newTransport(t, m, delays)

	for i := 0; i < 2; i++ { // two requests: the second succeeds at once
		status, err := get(t, tr, srv.URL)
		require.NoError(t, err)
		assert.Equal(t, 200, status)
	}
	assert.EqualValues(t, 4, hits.Load())
	assert.Equal(t, map[string]string{
		"retryhttp.client.requests{http.request.method=GET,retryhttp.outcome=success}":             "2",
		"retryhttp.client.attempts{http.request.method=GET,http.response.status_code=503}":         "2",
		"retryhttp.client.attempts{http.request.method=GET,http.response.status_code=200}":         "2",
		"retryhttp.client.retries{http.request.method=GET,retryhttp.retry.cause=status}":           "2",
		"retryhttp.client.retry.delay{http.request.method=GET}":                                    "2/0.03",
		"retryhttp.client.attempts_per_request{http.request.method=GET,retryhttp.outcome=success}": "2/4",
	}, m.collect(t))
}

func TestDeadBackendExhaustsRetries(t *testing.T) {
	m := newMeter(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := "http://" + l.Addr().String()
	require.NoError(t, l.Close())
	tr := newTransport(t, m, noWait)

	_, err = get(t, tr, dead)
	require.ErrorIs(t, err, retryhttp.ErrRetriesExhausted)
	assert.Equal(t, map[string]string{
		"retryhttp.client.requests{http.request.method=GET,retryhttp.outcome=retries_exhausted}":             "1",
		"retryhttp.client.failures{http.request.method=GET,retryhttp.outcome=retries_exhausted}":             "1",
		"retryhttp.client.attempts{error.type=connection,http.request.method=GET}":                           "4",
		"retryhttp.client.retries{http.request.method=GET,retryhttp.retry.cause=connection}":                 "3",
		"retryhttp.client.retry.delay{http.request.method=GET}":                                              "3/0",
		"retryhttp.client.attempts_per_request{http.request.method=GET,retryhttp.outcome=retries_exhausted}": "1/4",
	}, m.collect(t))
}

func TestBudgetRefusal(t *testing.T) {
	m := newMeter(t)
	srv, hits := newServer(t, func(int64) int { return 503 })
	tr := newTransport(t, m, noWait,
		retryhttp.WithRetryBudget(retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Capacity: 2, NoParking: true})))

	for i := 0; i < 2; i++ { // 2 retries, then 1 refused; then 1 refused
		status, err := get(t, tr, srv.URL)
		require.NoError(t, err)
		assert.Equal(t, 503, status)
	}
	assert.EqualValues(t, 4, hits.Load())
	assert.Equal(t, map[string]string{
		"retryhttp.client.requests{http.request.method=GET,retryhttp.outcome=budget_refused}":             "2",
		"retryhttp.client.failures{http.request.method=GET,retryhttp.outcome=budget_refused}":             "2",
		"retryhttp.client.budget.refusals{http.request.method=GET}":                                       "2",
		"retryhttp.client.attempts{http.request.method=GET,http.response.status_code=503}":                "4",
		"retryhttp.client.retries{http.request.method=GET,retryhttp.retry.cause=status}":                  "2",
		"retryhttp.client.retry.delay{http.request.method=GET}":                                           "2/0",
		"retryhttp.client.attempts_per_request{http.request.method=GET,retryhttp.outcome=budget_refused}": "2/4",
	}, m.collect(t))
}

func TestCircuitOpen(t *testing.T) {
	m := newMeter(t)
	srv, hits := newServer(t, func(int64) int { return 503 })
	tr := newTransport(t, m, retryhttp.WithMaxRetries(0),
		retryhttp.WithCircuitBreaker(retryhttp.CircuitBreakerSettings{MinRequests: 1, FailureRatio: 1, OpenTimeout: time.Hour}))

	status, err := get(t, tr, srv.URL)
	require.NoError(t, err)
	assert.Equal(t, 503, status)
	for i := 0; i < 2; i++ {
		_, err = get(t, tr, srv.URL)
		require.ErrorIs(t, err, retryhttp.ErrCircuitOpen)
	}
	assert.EqualValues(t, 1, hits.Load())
	assert.Equal(t, map[string]string{
		"retryhttp.client.requests{http.request.method=GET,retryhttp.outcome=not_retryable}":             "1",
		"retryhttp.client.failures{http.request.method=GET,retryhttp.outcome=not_retryable}":             "1",
		"retryhttp.client.requests{http.request.method=GET,retryhttp.outcome=circuit_open}":              "2",
		"retryhttp.client.failures{http.request.method=GET,retryhttp.outcome=circuit_open}":              "2",
		"retryhttp.client.attempts{http.request.method=GET,http.response.status_code=503}":               "1",
		"retryhttp.client.attempts_per_request{http.request.method=GET,retryhttp.outcome=not_retryable}": "1/1",
		"retryhttp.client.attempts_per_request{http.request.method=GET,retryhttp.outcome=circuit_open}":  "2/0",
		"retryhttp.client.circuit.state{}": "2",
	}, m.collect(t))
}

func TestAttributes(t *testing.T) {
	m := newMeter(t)
	srv, _ := newServer(t, func(int64) int { return 200 })
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	tr := newTransport(t, m)

	for _, method := range []string{"PURGE", http.MethodGet} {
		req, err := http.NewRequest(method, srv.URL+"/users/42?token=s3cr3t", nil)
		require.NoError(t, err)
		res, err := tr.RoundTrip(req)
		require.NoError(t, err)
		res.Body.Close()
	}

	var rm metricdata.ResourceMetrics
	require.NoError(t, m.reader.Collect(context.Background(), &rm))
	require.Len(t, rm.ScopeMetrics, 1)
	var requests metricdata.Sum[int64]
	for _, md := range rm.ScopeMetrics[0].Metrics {
		if md.Name == otelretryhttp.RequestsName {
			requests = md.Data.(metricdata.Sum[int64])
			assert.Equal(t, "{request}", md.Unit)
		}
	}
	var methods []string
	for _, dp := range requests.DataPoints {
		addr, _ := dp.Attributes.Value("server.address")
		port, _ := dp.Attributes.Value("server.port")
		method, _ := dp.Attributes.Value("http.request.method")
		assert.Equal(t, u.Hostname(), addr.AsString())
		assert.Equal(t, u.Port(), strconv.FormatInt(port.AsInt64(), 10))
		assert.Equal(t, 4, dp.Attributes.Len(), "method, address, port and outcome: never the path or query")
		methods = append(methods, method.AsString())
	}
	assert.ElementsMatch(t, []string{"_OTHER", "GET"}, methods)
}

func TestHooksOfTheTransportKept(t *testing.T) {
	m := newMeter(t)
	srv, _ := newServer(t, func(int64) int { return 200 })
	var stops atomic.Int64
	tr := newTransport(t, m, retryhttp.WithHooks(retryhttp.Hooks{OnRetryDecision: func(d retryhttp.Decision) {
		if !d.Retry {
			stops.Add(1)
		}
	}}))
	_, err := get(t, tr, srv.URL)
	require.NoError(t, err)
	assert.EqualValues(t, 1, stops.Load(), "the transport's own hook still runs")
	assert.Equal(t, "1", m.collect(t)["retryhttp.client.requests{http.request.method=GET,retryhttp.outcome=success}"])
}

func TestNewWithGlobalProvider(t *testing.T) {
	opt, err := otelretryhttp.New(nil)
	require.NoError(t, err)
	assert.NotNil(t, opt)
}

func TestParkedRetry(t *testing.T) {
	m := newMeter(t)
	srv, hits := newServer(t, func(n int64) int {
		if n <= 2 {
			return 503
		}
		return 200
	})
	tr := newTransport(t, m, noWait,
		retryhttp.WithRetryBudget(retryhttp.NewRetryBudget(retryhttp.RetryBudgetOptions{Capacity: 1})))

	// A retry with the token, then one parked until a probe is released.
	status, err := get(t, tr, srv.URL)
	require.NoError(t, err)
	assert.Equal(t, 200, status)
	assert.EqualValues(t, 3, hits.Load())
	got := m.collect(t)
	assert.Equal(t, "1", got["retryhttp.client.retries.parked{http.request.method=GET,retryhttp.park.event=parked}"])
	assert.Equal(t, "1", got["retryhttp.client.retries.parked{http.request.method=GET,retryhttp.park.event=released}"])
	assert.Contains(t, got, "retryhttp.client.park.wait{http.request.method=GET,retryhttp.park.event=released}")
	assert.Contains(t, got, "retryhttp.client.park.window{}")
}
