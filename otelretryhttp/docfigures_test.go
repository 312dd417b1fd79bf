//go:build !race

// The race detector may change what allocates, so these counts are checked
// without it: .ci/run runs the DocCounts tests in a step of their own.

package otelretryhttp_test

import (
	"context"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/otelretryhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// TestObservabilityDocCounts checks the metrics row of the "Cost" table of
// docs/observability.md, the figures marked <!--fig otel KEY-->VALUE<!--/fig-->:
// the allocations and bytes of a GET answered 200 at once by an in-memory
// base transport, through a Transport recording metrics with the SDK, once
// the destination's attribute sets are cached. The core's tests check the
// other rows.
func TestObservabilityDocCounts(t *testing.T) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	metrics, err := otelretryhttp.New(mp)
	require.NoError(t, err)
	rt := retryhttp.New(retryhttp.WithTransport(memTransport{}), metrics)
	send := func() {
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
	measured := map[string]int64{
		"otel cost allocs metrics": int64(testing.AllocsPerRun(200, send)),
		"otel cost bytes metrics":  int64(bytesPerRun(200, send)),
	}

	doc, err := os.ReadFile("../docs/observability.md")
	require.NoError(t, err)
	marked := map[string]string{}
	for _, m := range regexp.MustCompile(`<!--fig (otel [^>]*?)-->([^<]*)<!--/fig-->`).FindAllStringSubmatch(string(doc), -1) {
		marked[strings.TrimSpace(m[1])] = strings.TrimSpace(m[2])
	}
	for key, got := range measured {
		// Written "≤ N": an upper bound with a margin.
		bound, err := strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(strings.ReplaceAll(marked[key], ",", ""), "≤")), 10, 64)
		require.NoError(t, err, "docs/observability.md: figure %q", key)
		assert.LessOrEqual(t, got, bound, "docs/observability.md: figure %q is at most %s", key, marked[key])
	}
	assert.Len(t, marked, len(measured), "docs/observability.md: every otel figure is measured")
}

// bytesPerRun is testing.AllocsPerRun for bytes: the average number of
// bytes allocated by one call of f, after a warm-up call.
func bytesPerRun(runs int, f func()) uint64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	f()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / uint64(runs)
}
