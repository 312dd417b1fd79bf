package otelretryhttp_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/otelretryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// The attribute cache remembers the destination found last, and reads the
// sets of an attempt answered 200-207 and of a stop from arrays first
// (metrics.go). Requests that change destination, method and status at
// every request, from several goroutines at once, must each be counted
// under their own attributes, as docs/observability.md lists them.

func TestMetricsCountEachDestinationConcurrently(t *testing.T) {
	m := newMeter(t)
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(a.Close)
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			w.WriteHeader(http.StatusNoContent)
		case http.MethodPost:
			w.WriteHeader(http.StatusNotFound)
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(b.Close)
	ua, err := url.Parse(a.URL)
	require.NoError(t, err)
	ub, err := url.Parse(b.URL)
	require.NoError(t, err)
	tr := newTransport(t, m, retryhttp.WithMaxRetries(0))

	// The kinds of request, each with the attributes it is counted under
	// (address, port, method) and its status, outcome and failure.
	type kind struct {
		method, url, addr, port string
		status                  int
		outcome                 string
		failed                  bool
	}
	kinds := []kind{
		{http.MethodGet, a.URL, "127.0.0.1", ua.Port(), 200, "success", false},
		{http.MethodGet, "http://localhost:" + ua.Port(), "localhost", ua.Port(), 200, "success", false},
		{http.MethodPost, a.URL + "/x", "127.0.0.1", ua.Port(), 200, "success", false},
		{http.MethodGet, b.URL, "127.0.0.1", ub.Port(), 204, "success", false},
		{http.MethodPost, b.URL, "127.0.0.1", ub.Port(), 404, "not_retryable", false},
		{"PURGE", b.URL, "127.0.0.1", ub.Port(), 503, "not_retryable", true},
	}
	const workers, rounds = 4, 25
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				for i := range kinds {
					j := (i + r + w) % len(kinds) // each kind once a round…
					if w%2 == 1 {
						j = len(kinds) - 1 - j // …in an order of the worker's
					}
					k := kinds[j]
					req, err := http.NewRequest(k.method, k.url, nil)
					if !assert.NoError(t, err) {
						return
					}
					res, err := tr.RoundTrip(req)
					if !assert.NoError(t, err) {
						return
					}
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					assert.Equal(t, k.status, res.StatusCode)
				}
			}
		}()
	}
	wg.Wait()

	want := map[string]string{}
	add := func(key string, n int) {
		v, _ := strconv.Atoi(want[key])
		want[key] = strconv.Itoa(v + n)
	}
	for _, k := range kinds {
		n := workers * rounds
		method := k.method
		if method == "PURGE" {
			method = "_OTHER"
		}
		dest := []string{"http.request.method=" + method, "server.address=" + k.addr, "server.port=" + k.port}
		add(otelretryhttp.AttemptsName+sorted(dest, "http.response.status_code="+strconv.Itoa(k.status)), n)
		add(otelretryhttp.RequestsName+sorted(dest, "retryhttp.outcome="+k.outcome), n)
		if k.failed {
			add(otelretryhttp.FailuresName+sorted(dest, "retryhttp.outcome="+k.outcome), n)
		}
	}
	got := map[string]string{}
	perRequest := map[string]uint64{}
	var rm metricdata.ResourceMetrics
	require.NoError(t, m.reader.Collect(context.Background(), &rm))
	for _, sm := range rm.ScopeMetrics {
		for _, md := range sm.Metrics {
			switch data := md.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range data.DataPoints {
					got[md.Name+allLabels(dp.Attributes)] = strconv.FormatInt(dp.Value, 10)
				}
			case metricdata.Histogram[int64]:
				for _, dp := range data.DataPoints {
					assert.Equal(t, dp.Count, uint64(dp.Sum), "one attempt per request")
					perRequest[md.Name+allLabels(dp.Attributes)] = dp.Count
				}
			}
		}
	}
	assert.Equal(t, want, got)
	for key, v := range want {
		if strings.HasPrefix(key, otelretryhttp.RequestsName+"{") {
			n, _ := strconv.Atoi(v)
			h := otelretryhttp.AttemptsPerRequestName + strings.TrimPrefix(key, otelretryhttp.RequestsName)
			assert.EqualValues(t, n, perRequest[h], h)
		}
	}
	assert.Len(t, perRequest, len(kinds))
}

// sorted returns "{kv,…}" of kv and more, sorted, as allLabels spells a set.
func sorted(kv []string, more string) string {
	all := append(append([]string(nil), kv...), more)
	sort.Strings(all)
	return "{" + strings.Join(all, ",") + "}"
}

// allLabels is labels with the address and the port.
func allLabels(set attribute.Set) string {
	var kv []string
	for _, a := range set.ToSlice() {
		kv = append(kv, string(a.Key)+"="+a.Value.Emit())
	}
	sort.Strings(kv)
	return "{" + strings.Join(kv, ",") + "}"
}
