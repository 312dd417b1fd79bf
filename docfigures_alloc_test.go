//go:build !race

// The race detector may change what allocates, so these counts are checked
// without it: .ci/run runs the DocCounts tests in a step of their own.

package retryhttp_test

import (
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/seed2409de8f/retryhttp"
	"github.com/seed2409de8f/retryhttp/internal/testkit"
)

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
