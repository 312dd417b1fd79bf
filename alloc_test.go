//go:build !race

package retryhttp_test

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The race detector may change what allocates, so these counts are checked
// without it.

// allocsOf is testing.AllocsPerRun of one request built by newReq and sent
// through rt, which must succeed.
func allocsOf(t *testing.T, rt http.RoundTripper, newReq func(string) (*http.Request, error)) float64 {
	t.Helper()
	const url = "http://example.test/"
	require.NoError(t, roundTripOnce(rt, url, newReq))
	return testing.AllocsPerRun(100, mustRoundTrip(rt, url, newReq))
}

// TestRetryAllocs bounds what one retry (a 503, then a 200) allocates
// beyond the base transport's own second round trip: the attempt's request
// copy with its Retry-Attempt value, and its header map (two allocations),
// as github.com/justinrixx/retryhttp's 3; one more for margin.
func TestRetryAllocs(t *testing.T) {
	const url = "http://example.test/"
	bare := &flipTransport{}
	bareAllocs := testing.AllocsPerRun(100, func() { require.NoError(t, bareRetry(bare, url)) })
	reqAllocs := testing.AllocsPerRun(100, func() { _, _ = newGET(url) })
	ours := allocsOf(t, newRetrying(&flipTransport{}), newGET)
	// bare's work is two requests built and sent; ours builds one.
	assert.LessOrEqual(t, ours, bareAllocs-reqAllocs+4, "bare %v (a request: %v), retryhttp %v", bareAllocs, reqAllocs, ours)
}

// TestKeyInjectionAllocs bounds what injecting an idempotency key costs a
// POST: the request copy, the header map and its values (two
// allocations), the key's text and its value slice: 5, and one more for
// margin.
func TestKeyInjectionAllocs(t *testing.T) {
	keyed := allocsOf(t, retryhttp.New(retryhttp.WithTransport(memTransport{})), newPOST)
	noKeys := allocsOf(t, retryhttp.New(retryhttp.WithTransport(memTransport{}), retryhttp.WithIdempotencyKeys(retryhttp.IdempotencyKeys{Disabled: true})), newPOST)
	assert.LessOrEqual(t, keyed, noKeys+6, "keys off %v, keys on %v", noKeys, keyed)
}

// bodyTransport answers 200 with a small body, in memory.
type bodyTransport struct{}

func (bodyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("ok")), Request: req}, nil
}

// TestHedgedGETAllocs bounds what a hedged GET whose hedge never fires
// allocates beyond the base transport: attempt 1's cancellable context
// (two allocations) and its request with that context; and, when the
// response has a body to read, the wrapper that ends attempt 1 when it is
// closed; one more for margin.
func TestHedgedGETAllocs(t *testing.T) {
	tests := []struct {
		name  string
		base  http.RoundTripper
		extra float64
	}{
		{"no body", memTransport{}, 3},
		{"a body", bodyTransport{}, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bare := allocsOf(t, tt.base, newGET)
			ours := allocsOf(t, newHedging(tt.base), newGET)
			assert.LessOrEqual(t, ours, bare+tt.extra+1, "bare %v, hedged %v", bare, ours)
		})
	}
}

// The race detector may change what allocates, so these counts are checked
// without it: .ci/run runs the DocCounts tests in a step of their own.

// TestObservabilityDocCounts checks the allocations and bytes of the happy
// path in docs/observability.md's "Cost" table: a GET answered 200 at once
// by an in-memory base transport, sent directly, through a Transport, and
// through one with no-op hooks and a logger at Warn. otelretryhttp checks
// the row with metrics.
func TestObservabilityDocCounts(t *testing.T) {
	const url = "http://example.test/"
	quiet := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))
	measured := map[string]int64{}
	for name, rt := range map[string]http.RoundTripper{
		"bare":      memTransport{},
		"retryhttp": retryhttp.New(retryhttp.WithTransport(memTransport{})),
		"hooks": retryhttp.New(retryhttp.WithTransport(memTransport{}), retryhttp.WithLogger(quiet),
			retryhttp.WithHooks(retryhttp.Hooks{
				OnAttempt:       func(retryhttp.AttemptInfo) {},
				OnRetryDecision: func(retryhttp.Decision) {},
			})),
	} {
		f := mustRoundTrip(rt, url, newGET)
		measured["cost allocs "+name] = int64(testing.AllocsPerRun(200, f))
		measured["cost bytes "+name] = int64(bytesPerRun(200, f))
	}
	testkit.CheckDocFigures(t, "docs/observability.md", "cost ", measured)
}
